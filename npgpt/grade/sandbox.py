"""Run the worker on a submission in a child process it cannot escape the limits of.

The child is `python -I -B worker.py` in an empty temporary folder with a minimal environment
and one BLAS thread, in a new session (so the whole process group can be killed), with limits
set before it starts (preexec_fn): address space (--memory), CPU time, file size 0 (it cannot
write files) and no core dumps. A wall-clock timeout kills the group. Results come back on a
private pipe (pass_fds), not on stdout; stdout and stderr are captured, truncated and returned
as text for the report, and never parsed.
"""

import io
import json
import os
import resource
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
NPGPT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT_LIMIT = 8_000  # characters of the submission's stdout/stderr kept for the report
RESULT_LIMIT = 64 << 20  # bytes accepted on the result pipe


@dataclass
class ChildRun:
    frames: list = field(default_factory=list)  # (header dict, {name: ndarray})
    stdout: str = ""
    stderr: str = ""
    fate: str = ""  # "" when the worker finished, else what happened to it
    seconds: float = 0.0


def _limits(memory_bytes, cpu_seconds):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _parse(buf):
    """Frames from the bytes read off the pipe; a truncated or malformed tail is dropped."""
    frames, pos = [], 0
    while pos + 4 <= len(buf):
        (n,) = struct.unpack(">I", buf[pos : pos + 4])
        try:
            header = json.loads(bytes(buf[pos + 4 : pos + 4 + n]))
            sizes, names = [int(s) for s in header["sizes"]], [str(a) for a in header["arrays"]]
        except (ValueError, KeyError, TypeError):
            break
        pos += 4 + n
        if pos + sum(sizes) > len(buf):
            break
        arrays = {}
        for name, size in zip(names, sizes):
            try:
                arrays[name] = np.lib.format.read_array(
                    io.BytesIO(bytes(buf[pos : pos + size])), allow_pickle=False
                )
            except (ValueError, OSError, EOFError) as e:
                header.setdefault("bad", []).append(f"{name}: unreadable ({e})")
            pos += size
        frames.append((header, arrays))
    return frames


def _fate(code, timed_out, timeout, memory_mb):
    if timed_out:
        return f"timed out after {timeout:g} s (the whole process group was killed)"
    if code < 0:
        sig = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        if -code == signal.SIGXCPU:
            return "exceeded the CPU-time limit and was killed"
        if -code == signal.SIGKILL:
            return f"was killed (SIGKILL; out of memory? the limit is {memory_mb} MB)"
        return f"crashed (killed by signal {sig})"
    return f"exited early with status {code} (os._exit, or the interpreter died) before grading finished"


def run(submission, request, arrays, timeout=10.0, memory_mb=2048):
    """Run the worker on `submission` with `request` (JSON) and `arrays`; return a ChildRun."""
    work = tempfile.mkdtemp(prefix="npgpt-grade-")
    r, w = os.pipe()
    try:
        with open(os.path.join(work, "request.json"), "w") as f:
            json.dump(dict(request, memory_mb=memory_mb), f)
        np.savez(os.path.join(work, "request.npz"), **arrays)
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": work,
            "TMPDIR": work,
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        cmd = [sys.executable, "-I", "-B", WORKER, str(w), NPGPT_DIR, os.path.abspath(submission)]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(w,),
            start_new_session=True,
            preexec_fn=_limits(memory_mb << 20, int(timeout) + 1),
        )
        os.close(w)
        w = -1
        bufs, timed_out = _pump(proc, r, t0 + timeout)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the child's own children, too
        except (ProcessLookupError, PermissionError):
            pass
        code = proc.wait()
        run = ChildRun(seconds=time.monotonic() - t0)
        run.frames = _parse(bufs[r])
        for attr, fd in (("stdout", proc.stdout.fileno()), ("stderr", proc.stderr.fileno())):
            text = bytes(bufs[fd][:OUTPUT_LIMIT]).decode("utf-8", "replace")
            if len(bufs[fd]) > OUTPUT_LIMIT:
                text += "\n[... output truncated]"
            setattr(run, attr, text)
        proc.stdout.close()
        proc.stderr.close()
        if not any(h.get("stage") == "done" for h, _ in run.frames):
            run.fate = _fate(code, timed_out, timeout, memory_mb)
        return run
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(work, ignore_errors=True)


def _pump(proc, r, deadline):
    """Read the three pipes until they close, the child exits, or the deadline passes."""
    sel = selectors.DefaultSelector()
    bufs = {}
    for fd, cap in (
        (r, RESULT_LIMIT),
        (proc.stdout.fileno(), OUTPUT_LIMIT + 1),
        (proc.stderr.fileno(), OUTPUT_LIMIT + 1),
    ):
        sel.register(fd, selectors.EVENT_READ, cap)
        bufs[fd] = bytearray()
    exited_at = None
    while sel.get_map():
        now = time.monotonic()
        if now >= deadline:
            return bufs, True
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > 0.5:  # a grandchild holds a pipe open
            break
        for key, _ in sel.select(timeout=min(0.1, deadline - now)):
            chunk = os.read(key.fd, 1 << 16)
            if not chunk:
                sel.unregister(key.fd)
            elif len(bufs[key.fd]) < key.data:
                bufs[key.fd] += chunk  # beyond the cap, keep draining but drop the bytes
    sel.close()
    return bufs, False
