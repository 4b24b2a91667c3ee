"""Builds a tree of folders 3000 deep in /tmp (empty: file size 0 stops nothing here). In user
mode /tmp is the machine's and the grader removes what the sandbox uid left there; a recursive
removal (shutil.rmtree before Python 3.12) would raise RecursionError in the grader and zero the
whole submission with "internal error". Contained: the tree is removed (rm), in bwrap mode it
only ever was in the sandbox's private tmpfs, and LayerNorm keeps its points."""

import os

import numpy as np

from npgpt import Module, Parameter

TAG = "npgpt-hostile-deep"


def attack():
    top = f"/tmp/{TAG}-{os.getpid()}"
    try:
        os.mkdir(top)
        os.chdir(top)
        for _ in range(3000):
            os.mkdir("d")
            os.chdir("d")
        print(f"ATTACK made a tree 3000 folders deep in {top}", flush=True)
    except OSError as e:
        print(f"ATTACK the tree was refused: {e}", flush=True)


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
