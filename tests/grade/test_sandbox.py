"""Untrusted submissions: hangs, memory blow-ups, early exits, crashes, fake results, bad arrays.

Each costs only its own component's points, with a message saying what happened.
"""

import json
import os

import numpy as np

from npgpt.cli import main
from npgpt.grade.grader import grade

HERE = os.path.join(os.path.dirname(__file__), "submissions")


def comp(result, key):
    return next(c for c in result.components if c.key == key)


def score(c):
    return sum(t.score for t in c.tests)


def test_hang_is_killed_and_the_other_component_still_graded():
    r = grade(os.path.join(HERE, "hang.py"), seed=1, timeout=2.0)
    ln, gelu = comp(r, "layernorm"), comp(r, "gelu")
    assert "timed out after 2 s" in ln.problem and score(ln) == 0
    assert all("timed out" in t.output for t in ln.tests)
    assert score(gelu) == 10.0, [t.output for t in gelu.tests if not t.passed]


def test_memory_hog_gets_a_memory_error_message():
    r = grade(os.path.join(HERE, "memory_hog.py"), seed=1, timeout=5.0, memory_mb=512)
    ln, gelu = comp(r, "layernorm"), comp(r, "gelu")
    out = {t.name: t.output for t in ln.tests}
    assert "MemoryError: ran out of memory (the limit is 512 MB)" in out["LayerNorm.forward: out"]
    assert "skipped after case 'main'" in out["LayerNorm.forward: float32 dtype and shape"]
    assert "MemoryError" in gelu.tests[0].output
    assert score(ln) == score(gelu) == 0


def test_exit_crash_and_os_exit_cost_only_their_component():
    r = grade(os.path.join(HERE, "exits.py"), seed=1)
    assert "called sys.exit(3)" in comp(r, "layernorm").tests[0].output
    assert "exited early with status 0" in comp(r, "gelu").problem
    assert "SIGSEGV" in comp(r, "linear").problem
    assert [score(comp(r, k)) for k in ("layernorm", "gelu", "linear", "crossentropy")] == [0, 0, 0, 10.0]


def test_syntax_error_scores_zero_with_the_line():
    r = grade(os.path.join(HERE, "syntax_error.py.txt"), only=["gelu", "layernorm"], seed=1)
    assert r.score == 0 and r.max_score == 20
    assert all(c.problem == "SyntaxError at line 9: expected ':'" for c in r.components)


def test_ndarray_subclass_object_array_and_list_are_refused():
    r = grade(os.path.join(HERE, "bad_arrays.py"), seed=1)
    assert "ndarray subclass" in comp(r, "layernorm").tests[0].output
    assert "dtype object" in comp(r, "gelu").tests[0].output
    assert "is a list, expected a NumPy array" in comp(r, "linear").tests[0].output
    assert r.score == 0


def test_npgpt_reference_layers_are_not_importable_from_a_submission():
    r = grade(os.path.join(HERE, "delegates.py"), seed=1)
    assert r.score == 0
    assert "npgpt.LayerNorm is not available while grading" in comp(r, "layernorm").problem


def test_fake_results_neither_change_the_score_nor_get_written(tmp_path, capsys, monkeypatch):
    results = tmp_path / "results.json"
    monkeypatch.chdir(tmp_path)
    status = main(
        [
            "grade",
            os.path.join(HERE, "fake_results.py"),
            "--format",
            "gradescope",
            "--results",
            str(results),
            "--seed",
            "2",
        ]
    )
    assert status == 0
    data = json.loads(results.read_text())
    assert data["score"] == 0 and all(t["score"] == 0 for t in data["tests"])
    assert all(t["max_score"] <= 2 for t in data["tests"])
    assert '"score": 1000.0' in data["output"]  # shown as the submission's output, never parsed
    # cwd is a private tmpfs (bwrap) or a read-only folder; RLIMIT_FSIZE = 0 stops the write anyway
    assert "could not write results.json: " in data["output"]
    assert "could not write ../results.json: " in data["output"]
    assert sorted(os.listdir(tmp_path)) == ["results.json"]


def test_grading_does_not_depend_on_the_submission_printing_nothing(tmp_path):
    src = open(os.path.join(HERE, "correct.py")).read()
    noisy = src.replace(
        "    def forward(self, x):\n        mean",
        "    def forward(self, x):\n        print('x' * 100000)\n        mean",
        1,
    )
    (tmp_path / "noisy.py").write_text(noisy)
    r = grade(str(tmp_path / "noisy.py"), only=["layernorm"], seed=1)
    assert r.score == 10.0
    assert "[... output truncated]" in r.components[0].stdout and len(r.components[0].stdout) < 9000


def test_result_frames_are_parsed_without_pickle():
    from npgpt.grade.frames import parse as _parse

    assert _parse(b"\x00\x00\x00\x05{bad}") == ([], "bad frame header: header is not JSON (JSONDecodeError)")
    import io
    import struct

    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([object()], dtype=object), allow_pickle=True)
    blob = buf.getvalue()
    head = json.dumps({"stage": "forward", "case": "main", "arrays": ["out"], "sizes": [len(blob)]}).encode()
    frames, problem = _parse(struct.pack(">I", len(head)) + head + blob)
    assert problem == ""
    assert frames and "out" not in frames[0][1] and "unreadable" in frames[0][0]["bad"][0]


# --- every byte from the child is checked before anything is allocated -----------------------


def _frame(header, *blobs):
    import struct

    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack(">I", len(raw)) + raw + b"".join(blobs)


def _npy(arr):
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _npy_header(descr, shape, data=b""):
    import struct

    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".ljust(118) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode() + data


def test_a_well_formed_frame_round_trips():
    from npgpt.grade.frames import parse as _parse

    a = np.arange(6.0).reshape(2, 3)
    blob = _npy(a)
    frames, problem = _parse(
        _frame({"case": "main", "stage": "forward", "arrays": ["out"], "sizes": [len(blob)]}, blob)
    )
    assert problem == "" and len(frames) == 1
    assert np.array_equal(frames[0][1]["out"], a), f"out: got {frames[0][1]['out']}, expected {a}"


def test_malformed_frames_stop_the_parse_with_a_reason():
    import struct

    from npgpt.grade.frames import HEADER_LIMIT
    from npgpt.grade.frames import parse as _parse

    ok = _frame({"case": "main", "stage": "forward", "arrays": [], "sizes": []})
    cases = {
        "negative length": (struct.pack(">i", -8) + b"{}", "declares a header of -8 bytes"),
        "huge length": (struct.pack(">I", 2**31 - 1) + b"{}", f"allowed 1..{HEADER_LIMIT}"),
        "cut short": (struct.pack(">I", 100) + b"{}", "cut short"),
        "deep JSON": (_frame(b"[" * 20000 + b"]" * 20000), "nested or listed too deeply"),
        "not an object": (_frame(b"[1, 2]"), "not a JSON object"),
        "unhashable case": (_frame({"case": ["main"], "stage": "forward"}), "case is not a short string"),
        "unknown stage": (_frame({"case": "main", "stage": {"a": 1}}), "unknown stage"),
        "negative size": (_frame({"stage": "forward", "arrays": ["out"], "sizes": [-1]}), "negative"),
        "bool size": (_frame({"stage": "forward", "arrays": ["out"], "sizes": [True]}), "not an integer"),
        "mismatched lists": (_frame({"stage": "forward", "arrays": ["a", "b"], "sizes": [1]}), "same length"),
        "error not text": (_frame({"stage": "forward", "error": ["x"]}), "error has the wrong type"),
    }
    for what, (raw, reason) in cases.items():
        frames, problem = _parse(ok + raw)
        assert len(frames) == 1, f"{what}: the good frame before it was lost: {frames}"
        assert reason in problem, f"{what}: problem {problem!r} does not say {reason!r}"


def test_array_headers_are_checked_before_allocating():
    from npgpt.grade.frames import parse as _parse

    cases = {
        "4 EiB declared": (_npy_header("<f8", "(576460752303423488,)", b"\0" * 8), "larger than"),
        "int64": (_npy(np.arange(3)), "dtype int64"),
        "object": (_npy_header("|O", "(1,)", b"\0" * 8), "dtype object"),
        "big-endian": (_npy(np.arange(3.0).astype(">f8")), "dtype >f8"),
        "short data": (_npy_header("<f8", "(4,)", b"\0" * 8), "8 bytes of data for shape (4,)"),
        "negative dim": (_npy_header("<f8", "(-1,)", b""), "unreadable"),
        "not npy": (b"hello world", "unreadable"),
    }
    for what, (blob, reason) in cases.items():
        frames, problem = _parse(
            _frame({"case": "main", "stage": "forward", "arrays": ["out"], "sizes": [len(blob)]}, blob)
        )
        assert problem == "" and len(frames) == 1, f"{what}: {problem}"
        header, arrays = frames[0]
        assert "out" not in arrays, f"{what}: an array was accepted"
        assert reason in " ".join(header["bad"]), f"{what}: {header['bad']} does not say {reason!r}"


def test_too_many_frames_are_refused():
    from npgpt.grade.frames import MAX_FRAMES
    from npgpt.grade.frames import parse as _parse

    one = _frame({"case": "main", "stage": "forward"})
    frames, problem = _parse(one * (MAX_FRAMES + 5))
    assert len(frames) == MAX_FRAMES and f"more than {MAX_FRAMES} frames" in problem


def test_control_characters_and_escape_sequences_are_stripped():
    from npgpt.grade.frames import clean

    raw = "a\x1b[2J\x1b[H\x1b]0;title\x07b\rc\x08d\x1b[31me\x00f\u202eg\tx\ny"
    assert clean(raw) == "abcdefg\tx\ny", repr(clean(raw))


# --- choosing the mode ----------------------------------------------------------------------------


def test_auto_falls_back_from_bwrap_to_a_uid_of_its_own_as_root_then_to_none(monkeypatch):
    import pytest

    from npgpt.grade import sandbox

    monkeypatch.setitem(sandbox._probe_cache, "bwrap", (False, "bwrap fails here: Operation not permitted"))
    with pytest.raises(
        sandbox.SandboxError, match="^--sandbox bwrap: bwrap fails here: Operation not permitted$"
    ):
        sandbox.choose("bwrap")
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    monkeypatch.setattr(sandbox, "interpreter", lambda bound: ("/usr/bin/python3", "/usr"))
    monkeypatch.setattr(sandbox, "others_can", lambda path, mode=0: False)  # the grader's files are private
    box = sandbox.choose("auto")
    assert (box.mode, box.isolated) == ("user", True), box
    assert "Operation not permitted" in box.detail
    monkeypatch.setattr(sandbox, "others_can", lambda path, mode=0: True)  # ... and now they are not
    box = sandbox.choose("auto")
    assert (box.mode, box.isolated) == ("user", False) and "NOT ISOLATED" in box.detail, box
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    box = sandbox.choose("auto")
    assert (box.mode, box.isolated) == ("none", False), box
    with pytest.raises(sandbox.SandboxError, match="needs the grader to run as root"):
        sandbox.choose("user")
    with pytest.raises(sandbox.SandboxError, match="must be one of auto, bwrap, user, none"):
        sandbox.choose("docker")


def test_user_mode_refuses_sockets_ptrace_and_io_uring():
    """The seccomp program as numbers (the kernel's syscall tables), then installed in a child."""
    import struct
    import subprocess
    import sys

    import pytest

    from npgpt.grade import sandbox

    # socket, ptrace, io_uring_setup, add_key, request_key, keyctl (the kernel's unistd tables)
    tables = {
        "x86_64": (0xC000003E, 41, 101, 425, 248, 249, 250),
        "aarch64": (0xC00000B7, 198, 117, 425, 217, 218, 219),
    }
    machine = os.uname().machine
    if machine not in tables:
        pytest.skip(f"no seccomp program for {machine}")
    code = sandbox._seccomp_program()
    prog = [struct.unpack("HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    arch, *denied = tables[machine]
    assert prog[1] == (0x15, 1, 0, arch), prog[1]
    assert [ins[3] for ins in prog[4:10]] == denied, prog[4:10]
    for i in range(4, 10):  # each match jumps to the last instruction: fail with EACCES (13)
        assert i + 1 + prog[i][1] == len(prog) - 1, prog[i]
    assert prog[-1] == (0x06, 0, 0, 0x00050000 | 13) and prog[-2] == (0x06, 0, 0, 0x7FFF0000)
    probe = (
        "import os, socket, sys\n"
        "from npgpt.grade import sandbox\n"
        "assert sandbox._install_seccomp(sandbox._seccomp_program())\n"
        "try:\n    socket.socket()\n    print('socket worked')\nexcept OSError as e:\n    print('socket', e.errno)\n"
        "r, w = os.pipe(); os.write(w, b'x'); print('pipe', os.read(r, 1))\n"
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True)\n"
        f"print('add_key', libc.syscall({denied[3]}, b'user', b'k', b'v', 1, -4), ctypes.get_errno())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.split("\n")[:3] == ["socket 13", "pipe b'x'", "add_key -1 13"], out.stdout + out.stderr
