"""No math at all: every layer hands its input through and every backward hands dout back.

Such a submission is perfectly consistent with itself, so the tests that compare a submission
with itself (accumulation / repeatable, finite differences of your own forward) must not pay it.
"""

import numpy as np

from npgpt import Module, Parameter


class _PassThrough(Module):
    def forward(self, x):
        return x

    def backward(self, dout):
        for p in self.parameters():
            p.grad += np.ones_like(p.data)  # accumulates, so "+=" would be seen
        return dout


class LayerNorm(_PassThrough):
    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.scale = Parameter(np.ones(emb_dim))
        self.shift = Parameter(np.zeros(emb_dim))


class GELU(_PassThrough):
    pass


class Linear(_PassThrough):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = Parameter(np.zeros((out_features, in_features)))
        self.bias = Parameter(np.zeros(out_features)) if bias else None

    def forward(self, x):
        return np.zeros(x.shape[:-1] + (self.weight.data.shape[0],))

    def backward(self, dout):
        super().backward(dout)
        return np.zeros(dout.shape[:-1] + (self.weight.data.shape[1],))


class CrossEntropyLoss(Module):
    def __init__(self, ignore_index=-100):
        super().__init__()

    def forward(self, logits, targets):
        self.shape = logits.shape
        return 0.0

    def backward(self, dout=1.0):
        return np.zeros(self.shape)
