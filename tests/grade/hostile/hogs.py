"""Forks four children that each fill 400 MB and sleep, under --memory 512. Contained by a cgroup
over all its processes (the children are killed); with only RLIMIT_AS (no cgroups) each process
is capped, not their sum: see docs/grading.md."""

import os
import time

import numpy as np

from npgpt import Module, Parameter


def attack():
    kids = []
    for i in range(4):
        pid = os.fork()
        if pid == 0:
            try:
                block = np.ones(50_000_000)  # 400 MB, touched
                print(f"ATTACK child {i} holds {block.nbytes >> 20} MB", flush=True)
                time.sleep(3)
            except MemoryError:
                print(f"ATTACK child {i}: MemoryError", flush=True)
            os._exit(0)
        kids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in kids]
    print("ATTACK children exit statuses:", codes, flush=True)


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
