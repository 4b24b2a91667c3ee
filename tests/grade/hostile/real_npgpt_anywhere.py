"""Walks the whole file system it can see (2 s, depth 7) for any npgpt package and imports the
first it can as a package, with the stub thrown out of sys.modules. Contained in bwrap mode: no
copy of npgpt is in the sandbox. In user mode only the grader's own copy is closed: a copy some
other user left world-readable (a checkout, a venv) is found and used. That is the documented
limit of user mode; the test checks that whatever was loaded is such a copy, never the grader's."""

import importlib
import os
import sys
import time

import numpy as np

from npgpt import Module, Parameter

REAL = []


def load_package(root):
    """The npgpt package in `root`, imported as a package (the stub thrown out first)."""
    for name in [m for m in sys.modules if m == "npgpt" or m.startswith("npgpt.")]:
        del sys.modules[name]
    sys.path.insert(0, root)
    try:
        return importlib.import_module("npgpt")
    finally:
        sys.path.remove(root)


def candidates():
    """Every folder holding npgpt/layers/gelu.py that a bounded walk from / can reach."""
    found, seen, t0 = [], 0, time.time()
    for dirpath, dirnames, filenames in os.walk("/"):
        depth = dirpath.count(os.sep)
        dirnames[:] = (
            []
            if depth >= 7 or time.time() - t0 > 2
            else [d for d in dirnames if dirpath != "/" or d not in ("proc", "sys", "dev")]
        )
        seen += 1
        if os.path.basename(dirpath) == "layers" and "gelu.py" in filenames:
            pkg = os.path.dirname(dirpath)
            if os.path.basename(pkg) == "npgpt" and os.path.exists(os.path.join(pkg, "grade", "scoring.py")):
                found.append(os.path.dirname(pkg))
    return seen, found


def attack():
    seen, found = candidates()
    for root in found:
        try:
            npgpt = load_package(root)
            REAL.append(npgpt.GELU())
            print("ATTACK loaded the reference from", root)
            return
        except Exception as e:
            print("ATTACK found but could not load", root, type(e).__name__, e)
    print(f"ATTACK walked {seen} folders, found {len(found)} npgpt packages, loaded none")


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
    """Zeros, unless the reference could be loaded (then full marks: the attack worked)."""

    def forward(self, x):
        attack_once()
        return REAL[0].forward(x) if REAL else np.zeros_like(x)

    def backward(self, dout):
        return REAL[0].backward(dout) if REAL else np.zeros_like(dout)
