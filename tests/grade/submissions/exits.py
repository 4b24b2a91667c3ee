"""Leaves early in three ways, one per component; CrossEntropyLoss is correct and still graded."""

import ctypes
import os
import sys

import numpy as np

from npgpt import Module, Parameter


class LayerNorm(Module):
    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.scale = Parameter(np.ones(emb_dim))
        self.shift = Parameter(np.zeros(emb_dim))

    def forward(self, x):
        sys.exit(3)


class GELU(Module):
    def forward(self, x):
        os._exit(0)


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = Parameter(np.zeros((out_features, in_features)))
        self.bias = Parameter(np.zeros(out_features))

    def forward(self, x):
        ctypes.string_at(0)  # a real segmentation fault (a signal it sends itself is ignored: pid 1)


class CrossEntropyLoss(Module):
    def __init__(self, ignore_index=-100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits, targets):
        V = logits.shape[-1]
        z, y = logits.reshape(-1, V), targets.reshape(-1)
        keep = y != self.ignore_index
        y = np.where(keep, y, 0)
        z = z - z.max(-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        self.saved = (logp, y, keep, logits.shape)
        return float(-(logp[np.arange(len(y)), y] * keep).sum() / keep.sum())

    def backward(self, dout=1.0):
        logp, y, keep, shape = self.saved
        d = np.exp(logp)
        d[np.arange(len(y)), y] -= 1.0
        return (d * keep[:, None] * (float(dout) / int(keep.sum()))).reshape(shape)
