"""Throws the stub out of sys.modules, puts every site-packages folder it can guess back on sys.path
and imports the real npgpt, to hand GELU to the reference. Contained: no npgpt but the stub exists."""

import glob
import os
import sys

import numpy as np

from npgpt import Module, Parameter

REAL = []


def attack():
    for name in [m for m in sys.modules if m == "npgpt" or m.startswith("npgpt.")]:
        del sys.modules[name]
    guesses = glob.glob("/usr/lib/python3*/*-packages") + glob.glob("/usr/local/lib/python3*/*-packages")
    guesses += glob.glob(os.path.join(sys.base_prefix, "lib", "python3*", "*-packages"))
    guesses += [os.path.dirname(os.path.dirname(np.__file__))]
    sys.path[:0] = guesses
    sys.path[:] = [p for p in sys.path if "sandbox" not in p and "jail" not in p] + guesses
    try:
        import npgpt

        REAL.append(npgpt.GELU())
        print("ATTACK real npgpt imported from", npgpt.__file__)
    except Exception as e:
        print("ATTACK real npgpt not importable:", type(e).__name__)


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
    """Zeros, unless the reference could be imported (then full marks: the attack worked)."""

    def forward(self, x):
        attack_once()
        return REAL[0].forward(x) if REAL else np.zeros_like(x)

    def backward(self, dout):
        return REAL[0].backward(dout) if REAL else np.zeros_like(dout)
