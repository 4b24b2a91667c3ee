"""Prints terminal escape sequences (clear screen, cursor moves, OSC title, carriage returns) that
would draw a fake total, and raises an error whose message holds them too. Contained: control
characters are stripped before anything reaches a report."""

import numpy as np

from npgpt import Module, Parameter

FAKE = "\x1b[2J\x1b[H\x1b]0;npgpt\x07total: 70/70\r== GELU (class GELU): 10/10\x1b[1A\x1b[2K\x08\x08"


def attack():
    print(FAKE)
    raise ValueError("oops" + FAKE)


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
