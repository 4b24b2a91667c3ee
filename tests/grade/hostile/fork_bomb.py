"""Forks without end (every child forks again). Contained by the process cap (a pids cgroup and
RLIMIT_NPROC on its own uid; its own PID namespace in bwrap) and the timeout, and every process is
killed afterwards. LayerNorm, graded in another child, keeps its points."""

import os
import time

import numpy as np

from npgpt import Module, Parameter


def attack():
    t0 = time.time()
    forks = 0
    while time.time() - t0 < 30:
        try:
            if os.fork() == 0:
                t0 = time.time()
                forks = 0
                continue
            forks += 1
        except OSError:
            time.sleep(0.01)


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
