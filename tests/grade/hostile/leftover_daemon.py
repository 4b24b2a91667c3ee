"""Leaves a daemon behind (double fork, setsid, SIGHUP/SIGTERM ignored) that would keep running
for a minute, then grades honestly. Contained: every process of the sandbox is killed before
the grade returns; this correct GELU keeps its 10 points."""

import ctypes
import os
import signal
import time

import numpy as np

from npgpt import Module, Parameter

DAEMON_NAME = b"npgpthostiled"  # the test writes a name of its run here


def attack():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            libc = ctypes.CDLL(None)
            libc.prctl(15, DAEMON_NAME, 0, 0, 0)  # PR_SET_NAME: the test looks for it
            for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
                signal.signal(s, signal.SIG_IGN)
            time.sleep(60)
        os._exit(0)
    os.wait()
    print("ATTACK daemon left behind")


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
    """Correct: after the attack it must still be graded, 10/10."""

    def forward(self, x):
        attack_once()
        c = 0.7978845608028654
        self.x = x
        self.t = np.tanh(c * (x + 0.044715 * x * x * x))
        return 0.5 * x * (1.0 + self.t)

    def backward(self, dout):
        c, x, t = 0.7978845608028654, self.x, self.t
        return dout * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x))
