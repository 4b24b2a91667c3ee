"""The hostile-submission suite: every attack in tests/grade/hostile/ is contained, in every mode.

One folder run per mode grades all of them (--jobs 2, LayerNorm and GELU each, --memory 512),
as the grader is run for real: from a copy of npgpt only root can read, with a secret in its
environment, canary files in its results folder and its home, and loopback TCP and UDP listeners.
Modes: "bwrap" and "user" as root, and the unprivileged case: the grader run by a user of its own
with a Python and a copy of npgpt and numpy that user can read (auto mode: bwrap in a user
namespace where the kernel allows it). Each attack file says what it tries; each test below says
what "contained" means for it. Every file also defines a correct LayerNorm, graded in a child of
its own, which must keep its 10 points: the attack costs only its own component.
"""

import csv
import hashlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata

import numpy as np
import pytest

from npgpt.grade import sandbox

HOSTILE = os.path.join(os.path.dirname(__file__), "hostile")
ATTACKS = sorted(f[:-3] for f in os.listdir(HOSTILE) if f.endswith(".py") and f != "honest_correct.py")
SECRET = "npgpt-test-secret-5b1f0c"
BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from npgpt.cli import main; sys.exit(main())"
TEST_USER = "npgpt-test"
ROOT = os.geteuid() == 0


class Listeners:
    """A loopback TCP listener and UDP socket that count what reaches them."""

    def __init__(self):
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.settimeout(0.2)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.2)
        self.hits, self.stop = [], False
        self.threads = [
            threading.Thread(target=self._serve, args=(s,), daemon=True) for s in (self.tcp, self.udp)
        ]
        for t in self.threads:
            t.start()

    def _serve(self, s):
        while not self.stop:
            try:
                if s.type == socket.SOCK_STREAM:
                    conn, _ = s.accept()
                    conn.close()
                    self.hits.append("tcp")
                else:
                    s.recvfrom(100)
                    self.hits.append("udp")
            except OSError:
                pass

    def close(self):
        self.stop = True
        for t in self.threads:
            t.join()
        self.tcp.close()
        self.udp.close()


def _readable_numpy(dest):
    """Symlinks in `dest` to a copy of numpy every user may read (the user-mode cache)."""
    for name, src in sandbox.numpy_dirs():
        os.symlink(src, os.path.join(dest, name))


def _prepare(base, as_user):
    grader = os.path.join(base, "grader")
    shutil.copytree(
        sandbox.NPGPT_DIR, os.path.join(grader, "npgpt"), ignore=shutil.ignore_patterns("__pycache__")
    )
    subs, out, home = (os.path.join(base, d) for d in ("subs", "out", "home"))
    shutil.copytree(HOSTILE, subs, ignore=shutil.ignore_patterns("__pycache__"))
    for d in (out, home):
        os.makedirs(d)
        with open(os.path.join(d, "canary.txt"), "w") as f:
            f.write("canary\n")
    if as_user:
        _readable_numpy(grader)
    else:
        real = os.path.realpath(os.path.dirname(np.__file__))
        os.symlink(real, os.path.join(grader, "numpy"))
        if os.path.isdir(os.path.join(os.path.dirname(real), "numpy.libs")):
            os.symlink(os.path.join(os.path.dirname(real), "numpy.libs"), os.path.join(grader, "numpy.libs"))
    return grader, subs, out, home


def _run_folder(base, mode, as_user=None):
    """Grade the hostile folder; returns a dict with everything the tests look at."""
    grader, subs, out, home = _prepare(base, as_user)
    listeners = Listeners()
    path = os.path.join(subs, "loopback.py")
    with open(path) as f:
        text = f.read()
    ports = {"tcp": [listeners.tcp.getsockname()[1]], "udp": [listeners.udp.getsockname()[1]]}
    with open(path, "w") as f:
        f.write(text.replace('GRADER_PORTS = {"tcp": [], "udp": []}', f"GRADER_PORTS = {ports!r}"))
    daemon = "npgptd-" + os.urandom(4).hex()  # this run's daemons (comm is at most 15 characters)
    tag = "npgpt-hostile-" + daemon[7:]  # and the files it makes
    with open(os.path.join(subs, "files.py")) as f:
        text = f.read()
    with open(os.path.join(subs, "files.py"), "w") as f:
        f.write(text.replace('TAG = "npgpt-hostile"', f"TAG = {tag!r}"))
    for name in ("daemon_mmap.py", "leftover_daemon.py"):
        with open(os.path.join(subs, name)) as f:
            text = f.read()
        with open(os.path.join(subs, name), "w") as f:
            f.write(text.replace('DAEMON_NAME = b"npgpthostiled"', f"DAEMON_NAME = {daemon.encode()!r}"))
    rubric = os.path.join(grader, "npgpt", "grade", "rubric.json")
    with open(rubric, "rb") as f:
        rubric_hash = hashlib.sha256(f.read()).hexdigest()
    python = sandbox.interpreter(False)[0] if as_user else os.path.realpath(sys._base_executable)
    cmd = [python, "-I", "-S", "-c", BOOT, grader, "grade", subs, "--jobs", "2", "--only", "gelu,layernorm"]
    cmd += ["--seed", "3", "--timeout", "6", "--memory", "512", "--sandbox", mode, "--results", out]
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "NPGPT_TEST_SECRET": SECRET, "LANG": "C.UTF-8"}
    if as_user:
        pw = pwd.getpwnam(as_user)
        for dirpath, dirnames, filenames in os.walk(base):
            for p in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
                os.lchown(p, pw.pw_uid, pw.pw_gid)
        os.chmod(base, 0o755)
        cmd = [_tool("runuser"), "-u", as_user, "--"] + cmd
    else:
        os.chmod(base, 0o700)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    finally:
        time.sleep(1.0)  # time for anything that escaped to act
        listeners.close()
    results = {}
    for name in ATTACKS + ["honest_correct"]:
        try:
            with open(os.path.join(out, f"{name}.json")) as f:
                results[name] = json.load(f)
        except (OSError, ValueError) as e:
            results[name] = {"missing": repr(e)}
    with open(rubric, "rb") as f:
        rubric_after = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(out, "grades.csv"), newline="") as f:
        grades = list(csv.DictReader(f))
    texts = {}
    for name in results:
        try:
            with open(os.path.join(out, f"{name}.txt"), encoding="utf-8", errors="replace") as f:
                texts[name] = f.read()
        except OSError:
            texts[name] = ""
    return {
        "mode": mode,
        "user": as_user,
        "proc": proc,
        "seconds": time.monotonic() - t0,
        "results": results,
        "texts": texts,
        "grades": grades,
        "rubric_changed": rubric_after != rubric_hash,
        "hits": list(listeners.hits),
        "ports": ports,
        "dirs": {"out": out, "home": home, "subs": subs, "grader": grader},
        "daemons": _named(daemon),
        "daemon": daemon,
        "tag": tag,
    }


def _named(comm):
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/comm") as f:
                if f.read().strip() == comm:
                    found.append(int(entry))
        except (OSError, ValueError):
            pass
    return found


def _tool(name):
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/bin:/bin")


def _ensure_user(name):
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True
        )
    return name


@pytest.fixture(scope="module", params=["bwrap", "user", "unprivileged"])
def run(request, tmp_path_factory):
    if not ROOT:
        pytest.skip(
            "the hostile suite runs the grader as root and as a user of its own: run it as root (CI does)"
        )
    mode = request.param
    if mode == "bwrap":
        try:
            sandbox.choose("bwrap")
        except sandbox.SandboxError as e:
            pytest.skip(f"bubblewrap cannot run here: {e} (.ci/run installs it)")
    if mode == "user" and sandbox.interpreter(False)[0] is None:
        pytest.skip("no Python another user may run (install the distribution's python3)")
    base = str(tmp_path_factory.mktemp(f"hostile-{mode}"))
    if mode == "unprivileged":
        if sandbox.interpreter(False)[0] is None or not _tool("runuser") or not _tool("useradd"):
            pytest.skip("no Python another user may run, or no runuser")
        user = _ensure_user(TEST_USER)
        probe = subprocess.run(
            [_tool("runuser"), "-u", user, "--", shutil.which("bwrap") or "bwrap", "--unshare-all"]
            + ["--ro-bind", "/", "/", "true"],
            capture_output=True,
            text=True,
        )
        if probe.returncode != 0:
            pytest.skip(f"bwrap cannot run as an unprivileged user here: {probe.stderr.strip()[-200:]}")
        base = os.path.join(tempfile.mkdtemp(prefix="npgpt-unpriv-"), "run")
        os.makedirs(base)
        os.chmod(os.path.dirname(base), 0o755)
        try:
            yield _run_folder(base, "bwrap", as_user=user)
        finally:
            shutil.rmtree(os.path.dirname(base), ignore_errors=True)
        return
    yield _run_folder(base, mode)


def gelu(data, name):
    return _comp(data, name, "gelu")


def layernorm(data, name):
    return _comp(data, name, "layernorm")


def _comp(data, name, key):
    r = data["results"][name]
    assert "components" in r, f"{data['mode']}: no results for {name}: {r} / {data['proc'].stderr[-800:]}"
    c = next(c for c in r["components"] if c["component"] == key)
    return c, sum(t["score"] for t in c["tests"])


def test_the_folder_run_completes_in_the_mode_asked_for(run):
    proc = run["proc"]
    assert proc.returncode == 0, f"{run['mode']}: exit {proc.returncode}: {proc.stderr[-1500:]}"
    assert sorted(r["submission"] for r in run["grades"]) == sorted(ATTACKS + ["honest_correct"])
    modes = {r["sandbox"]["mode"] for r in run["results"].values() if "sandbox" in r}
    expected = (
        {"bwrap"} if run["mode"] == "bwrap" else {"user"} if run["mode"] == "user" else {"bwrap", "none"}
    )
    assert len(modes) == 1 and modes <= expected, f"{run['mode']}: modes {modes}"
    isolated = {r["sandbox"]["isolated"] for r in run["results"].values() if "sandbox" in r}
    if modes != {"none"}:
        assert isolated == {True}, run["results"]["honest_correct"].get("sandbox")


def test_an_honest_submission_keeps_full_marks_beside_the_attacks(run):
    r = run["results"]["honest_correct"]
    assert r.get("score") == 20.0 and r.get("max_score") == 20.0, r


@pytest.mark.parametrize("name", ATTACKS)
def test_the_attack_costs_only_its_own_component(run, name):
    """LayerNorm, graded in a child of its own, keeps its 10 points whatever GELU's child did."""
    c, got = layernorm(run, name)
    assert got == 10.0, f"{run['mode']} {name}: LayerNorm scored {got}: {c['problem']}"
    assert "internal error" not in json.dumps(run["results"][name])


def no_credit(c):
    """The zeros GELU got nothing for its output or gradient."""
    return all(t["score"] == 0 for t in c["tests"] if t["name"] in ("GELU.forward: out", "GELU.backward: dx"))


def _reference_contained(run, c):
    """bwrap: nothing was loaded. User mode: never the grader's own copy; a copy that is
    world-readable on this machine (another checkout, a venv) may be: the documented limit."""
    marks = ("loaded the reference from", "real npgpt imported from")
    loaded = [
        ln.split(" from ", 1)[1].strip() for ln in c["stdout"].splitlines() if any(m in ln for m in marks)
    ]
    if run["mode"] != "user":
        assert not loaded and no_credit(c), f"{run['mode']}: {c['stdout'][-600:]}"
        return
    for path in loaded:
        assert not path.startswith(run["dirs"]["grader"]), f"the grader's own npgpt was loaded: {path}"
        assert sandbox.others_can(path), f"{path} is not world-readable, yet it was loaded"
    if not loaded:
        assert no_credit(c), c["stdout"][-600:]


@pytest.mark.parametrize("name", ["real_npgpt_sysmodules", "real_npgpt_by_path", "real_npgpt_anywhere"])
def test_the_reference_cannot_be_imported_or_loaded(run, name):
    c, got = gelu(run, name)
    assert "ATTACK" in c["stdout"], f"{name}: the attack did not run: {c['problem']}"
    _reference_contained(run, c)


def test_the_parent_memory_cannot_be_written_nor_traced(run):
    c, got = gelu(run, "proc_mem")
    assert no_credit(c), c["stdout"]
    assert "refused" in c["stdout"] and "patched" not in c["stdout"], c["stdout"]
    assert "<= 1e-06 (float64)" in run["texts"]["proc_mem"], "the reported thresholds changed"


def test_a_daemon_cannot_rewrite_the_results_after_the_grade(run):
    r = run["results"]["daemon_mmap"]
    c, got = gelu(run, "daemon_mmap")
    # 10 for the honest LayerNorm; the zeros GELU earns nothing, not even "repeatable" (its
    # forward is no attempt at GELU)
    assert no_credit(c) and r["score"] == 10.0, r["score"]
    row = next(g for g in run["grades"] if g["submission"] == "daemon_mmap")
    assert float(row["score"]) == 10.0, row
    assert not run["daemons"], f"daemons still alive: {run['daemons']}"


def test_the_rubric_cannot_be_edited(run):
    c, got = gelu(run, "edit_rubric")
    assert no_credit(c)
    assert not run["rubric_changed"], "rubric.json was changed"
    assert "rewrote" not in c["stdout"], c["stdout"]


@pytest.mark.parametrize("name", ["kill_parent", "leftover_daemon"])
def test_signals_and_daemons_neither_stop_the_grader_nor_outlive_it(run, name):
    c, got = gelu(run, name)
    assert got == 10.0, f"{run['mode']} {name}: {c['problem']} {c['stdout'][-500:]}"
    assert "signalled the parent" not in c["stdout"], c["stdout"]
    assert not run["daemons"], f"daemons still alive: {run['daemons']}"


@pytest.mark.parametrize(
    "name, why",
    [
        ("negative_frame", "declares a header of -8 bytes"),
        ("unhashable_case", "case is not a short string"),
        ("giant_npy", "larger than the 8 MiB allowed"),
        ("deep_json", "nested or listed too deeply"),
    ],
)
def test_malformed_results_fail_their_component_with_a_clear_message(run, name, why):
    c, got = gelu(run, name)
    assert no_credit(c) and why in json.dumps(c), (
        f"{name}: {c['problem']} / {[t['output'] for t in c['tests']][:2]}"
    )
    assert c["seconds"] < 6, f"{name}: the grader spent {c['seconds']} s on it"


def test_secrets_are_not_readable(run):
    c, got = gelu(run, "read_secrets")
    text = json.dumps(run["results"]["read_secrets"]) + run["texts"]["read_secrets"]
    assert "ATTACK" in c["stdout"] and no_credit(c)
    assert SECRET not in text, "the grader's environment leaked"
    assert "npgpt-hostile-honest-7d3e" not in text, "another submission leaked"
    assert '"repeat": 1e-9' not in text, "the rubric leaked"
    if run["mode"] == "user":
        return  # world-readable system files (/etc/passwd) stay readable in user mode (docs/grading.md)
    assert "root:x:0:0" not in text, "/etc/passwd leaked"


def test_loopback_network_is_unreachable(run):
    c, got = gelu(run, "loopback")
    assert "ATTACK" in c["stdout"] and no_credit(c)
    assert run["hits"] == [], f"{run['mode']}: the listeners got {run['hits']}: {c['stdout'][-600:]}"
    port = str(run["ports"]["tcp"][0])
    assert f"ATTACK tcp {port} " in c["stdout"] and "tcp connected" not in c["stdout"], c["stdout"]


def test_files_of_the_grader_and_its_home_cannot_be_changed(run):
    c, _ = gelu(run, "files")
    assert "ATTACK file changes that worked:" in c["stdout"], c["stdout"][-800:]
    worked = c["stdout"].split("ATTACK file changes that worked:", 1)[1].split(" in ")[0]
    # Only /tmp: the sandbox's private tmpfs (bwrap), or the world-writable /tmp (user mode), where
    # what the sandbox uid left is removed after the component; empty either way (RLIMIT_FSIZE 0).
    assert all(p.startswith(f"/tmp/{run['tag']}-") for p in worked.split("'") if p.startswith("/")), worked
    assert not [f for f in os.listdir("/tmp") if f.startswith(run["tag"])], "left in /tmp"
    for d in ("out", "home"):
        with open(os.path.join(run["dirs"][d], "canary.txt")) as f:
            assert f.read() == "canary\n", f"{d}/canary.txt changed"
        assert not [f for f in os.listdir(run["dirs"][d]) if f.startswith(run["tag"])]
    here = sorted(f for f in os.listdir(HOSTILE) if f.endswith(".py"))
    assert sorted(f for f in os.listdir(run["dirs"]["subs"]) if f != "__pycache__") == here


def test_memory_over_all_processes_is_capped(run):
    c, got = gelu(run, "hogs")
    if run["results"]["hogs"]["sandbox"]["memory"].startswith("RLIMIT_AS"):
        pytest.skip("no cgroup here: the cap is per process (documented); four children may hold 400 MB each")
    held = [ln for ln in c["stdout"].splitlines() if "statuses" in ln]
    if held:  # the worker survived: at most one child can have held its 400 MB at a time
        codes = json.loads(held[0].split(":", 1)[1].strip())
        assert sum(1 for k in codes if k != 0) >= 3, f"{run['mode']}: {held[0]}"
    else:
        assert "memory" in c["problem"] or "killed" in c["problem"], c["problem"]


def test_a_fork_bomb_is_capped_and_killed(run):
    c, got = gelu(run, "fork_bomb")
    assert no_credit(c) and "timed out" in c["problem"], c["problem"]


def test_escape_sequences_never_reach_a_report(run):
    c, _ = gelu(run, "escapes")
    assert "total: 70/70" in c["stdout"], "the output itself is kept, as text"
    for text in (json.dumps(run["results"]["escapes"]), run["texts"]["escapes"]):
        for ch in ("\\u001b", "\x1b", "\\r", "\r", "\\u0007", "\x07", "\\b", "\x08"):
            assert ch not in text, f"{ch!r} reached a report"


def _invisible(text):
    """The characters of `text` that are invisible or reorder what a reader sees."""
    return sorted({f"U+{ord(c):04X}" for c in text if unicodedata.category(c) in ("Cf", "Cs", "Zl", "Zp")})


def test_a_message_cannot_draw_a_fake_report(run):
    c, got = gelu(run, "fake_report")
    assert got == 0 and "ATTACK" in c["problem"], f"{run['mode']}: {got} {c['problem'][:300]}"
    text = run["texts"]["fake_report"]
    lines = text.splitlines()
    assert lines, f"{run['mode']}: no text report was written: {run['proc'].stderr[-500:]}"
    assert [ln for ln in lines if ln.startswith("total:")] == [lines[-1]], f"a fake total line:\n{text}"
    assert sum(ln.startswith("== GELU") for ln in lines) == 1, f"a fake component line:\n{text}"
    assert "total: 10/20" in lines[-1], lines[-1]
    for where, t in (
        ("report", text),
        ("results", json.dumps(run["results"]["fake_report"], ensure_ascii=False)),
    ):
        assert not _invisible(t), f"{run['mode']}: {where} holds {_invisible(t)}"
    row = next(g for g in run["grades"] if g["submission"] == "fake_report")
    assert float(row["score"]) == 10.0, row


def test_nan_gradients_earn_nothing(run):
    c, got = gelu(run, "nan_gradients")
    assert got == 0, f"{run['mode']}: {[(t['name'], t['score']) for t in c['tests'] if t['score']]}"
    rep = next(t for t in c["tests"] if "repeatable" in t["name"])
    assert "not finite" in rep["output"], rep["output"]


def test_a_deep_tree_left_in_tmp_is_removed(run):
    c, _ = gelu(run, "deep_tmp")
    assert "ATTACK made a tree" in c["stdout"] or "refused" in c["stdout"], c["stdout"][-400:]
    assert "grader failed" not in json.dumps(run["results"]["deep_tmp"])
    left = [f for f in os.listdir("/tmp") if f.startswith("npgpt-hostile-deep-")]
    assert not left, f"{run['mode']}: left in /tmp: {left}"


def _ipc_owned_by(uids):
    """The SysV IPC objects (shm, msg, sem) whose owner or creator is one of `uids`."""
    found = []
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as f:
            head, *rows = [line.split() for line in f]
        col = {n: i for i, n in enumerate(head)}
        found += [(kind, row[1]) for row in rows if {int(row[col["uid"]]), int(row[col["cuid"]])} & uids]
    return found


def test_shared_memory_does_not_outlive_the_sandbox(run):
    c, _ = gelu(run, "sysv_ipc")
    assert "ATTACK shm segments [" in c["stdout"], c["stdout"][-400:] + c["problem"]
    uids = set(range(sandbox.UID_BASE, sandbox.UID_BASE + sandbox.UID_SLOTS))
    if run["user"]:
        uids.add(pwd.getpwnam(run["user"]).pw_uid)
    left = _ipc_owned_by(uids)
    assert not left, f"{run['mode']}: SysV IPC objects outlived the sandbox: {left} ({c['stdout'][-200:]})"


def test_forged_frames_earn_at_most_the_self_consistency_points(run):
    c, got = gelu(run, "forged_frames")
    assert "ATTACK forged every frame" in c["stdout"], c["stdout"][-300:] + c["problem"]
    earned = {t["name"] for t in c["tests"] if t["score"]}
    own = {
        "GELU.backward: repeatable (backward twice)",
        "GELU.backward: vs finite differences of your forward",
    }
    assert earned <= own and got <= 2.0, f"{run['mode']}: the forger earned {earned} ({got})"
    assert "sent a result without arrays" in json.dumps(c), [t["output"] for t in c["tests"]]


def test_kernel_keyrings_are_closed(run):
    c, _ = gelu(run, "keyrings")
    out = c["stdout"]
    assert "ATTACK the user keyring refused: errno 13" in out, f"{run['mode']}: {out[-500:]}{c['problem']}"
    assert "ATTACK the session keyring refused: errno 13" in out, f"{run['mode']}: {out[-500:]}"
    assert "found a note" not in out and "stored a note" not in out, out[-500:]


def test_no_process_of_a_sandbox_is_left(run):
    leftover = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if run["dirs"]["grader"].encode() in cmd:
            leftover.append((entry, cmd[:200]))
    assert not leftover and not run["daemons"] and not _named(run["daemon"]), leftover
