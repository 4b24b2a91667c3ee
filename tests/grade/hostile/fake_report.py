"""Fails to import in GELU's child only (it reads which class is asked for), with an exception
whose message is a fake report: "== GELU (class GELU): 10/10" and "total: 20/20" on lines of
their own, bidirectional overrides, zero-width spaces, a line separator (U+2028) and a lone
surrogate (which no report file can encode). Contained: every line of a message the child wrote
is indented under the line that quotes it, invisible Unicode is stripped, and the report is
written."""

import json
import os
import sys

import numpy as np

from npgpt import Module, Parameter

FAKE = (
    "\n\n== GELU (class GELU): 10/10\n  PASS     3/3    GELU.forward: out\n\ntotal: 20/20  (0.9 s)"
    "\n\u2028total: 20/20\u202d\u202b\u200b\u2069\u200f\ufeff lone \ud800 surrogate"
)

with open(os.path.join(sys.argv[-1], "request.json")) as f:
    if json.load(f).get("cls") == "GELU":
        print("ATTACK\u2028total: 20/20\u202e02/0", flush=True)
        raise ImportError("ATTACK" + FAKE)


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
        return np.zeros_like(x)

    def backward(self, dout):
        return np.zeros_like(dout)
