"""Looks for the grader's npgpt package in the folders of its argv and the parent's command line,
beside numpy (and through an editable install's finder there), in every site-packages folder,
/opt, /autograder and /usr, then imports it as a package with the stub thrown out of sys.modules.
Contained: the grader's npgpt is not in the sandbox (bwrap) or not readable by its uid (user)."""

import glob
import importlib
import os
import re
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
    """Folders that hold an npgpt package, from where the grader is likely to be."""
    roots = grader_paths() | {os.path.dirname(os.path.dirname(os.path.realpath(np.__file__)))}
    sites = glob.glob("/usr/lib/python3*/*-packages") + glob.glob("/usr/local/lib/python3*/*-packages")
    sites += glob.glob(os.path.join(sys.base_prefix, "lib", "python3*", "*-packages"))
    roots |= set(sites) | {"/opt", "/autograder", "/usr/lib", "/usr/local/lib"}
    found = []
    for root in sorted(roots):
        for depth in range(4):
            for p in glob.glob(os.path.join(root, *["*"] * depth, "npgpt", "layers", "gelu.py")):
                found.append(os.path.dirname(os.path.dirname(os.path.dirname(p))))
        for finder in glob.glob(os.path.join(root, "__editable__*npgpt*finder.py")):  # editable installs
            try:
                with open(finder) as f:
                    found += [os.path.dirname(m) for m in re.findall(r"'(/[^']*/npgpt)'", f.read())]
            except OSError:
                pass
    return roots, found


def attack():
    roots, found = candidates()
    for root in found:
        try:
            npgpt = load_package(root)
            REAL.append(npgpt.GELU())
            print("ATTACK loaded the reference from", root)
            return
        except Exception as e:
            print("ATTACK found but could not load", root, type(e).__name__, e)
    print(f"ATTACK searched {len(roots)} folders, found {len(found)} npgpt packages, loaded none")


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
