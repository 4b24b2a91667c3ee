"""Looks for npgpt/layers/gelu.py in the folders of its argv and the parent's command line, beside
numpy, in every site-packages folder, /opt, /autograder, /work, /root and /home, then loads it by
path. Contained: the grader's npgpt is not in the sandbox (bwrap) or not readable (user)."""

import glob
import importlib.util
import os
import sys

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


REAL = []


def attack():
    roots = grader_paths() | {os.path.dirname(os.path.dirname(os.path.realpath(np.__file__)))}
    roots |= set(glob.glob("/usr/lib/python3*/*-packages") + glob.glob("/usr/local/lib/python3*/*-packages"))
    roots |= set(glob.glob(os.path.join(sys.base_prefix, "lib", "python3*", "*-packages")))
    roots |= {"/opt", "/autograder", "/work", "/root", "/home", "/srv"}
    seen = 0
    for root in sorted(roots):
        for depth in range(4):
            for p in glob.glob(os.path.join(root, *["*"] * depth, "npgpt", "layers", "gelu.py")):
                seen += 1
                try:
                    spec = importlib.util.spec_from_file_location("npgpt_ref_gelu", p)
                    mod = importlib.util.module_from_spec(spec)
                    spec.loader.exec_module(mod)
                    REAL.append(mod.GELU())
                    print("ATTACK loaded the reference from", p)
                    return
                except Exception as e:
                    print("ATTACK found but could not load", p, type(e).__name__)
    print(f"ATTACK searched {len(roots)} folders, found {seen} candidate files, loaded none")


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
