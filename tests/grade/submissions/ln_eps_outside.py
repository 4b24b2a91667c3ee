"""LayerNorm with eps outside the square root: (x - mean) / (std + eps)."""

import numpy as np

from npgpt import Module, Parameter


class LayerNorm(Module):
    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.scale = Parameter(np.ones(emb_dim))
        self.shift = Parameter(np.zeros(emb_dim))

    def forward(self, x):
        mean = x.mean(-1, keepdims=True)
        self.std = np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True))
        self.xhat = (x - mean) / (self.std + self.eps)
        return self.xhat * self.scale.data + self.shift.data

    def backward(self, dout):
        C = dout.shape[-1]
        self.scale.grad += (dout * self.xhat).reshape(-1, C).sum(0)
        self.shift.grad += dout.reshape(-1, C).sum(0)
        g = dout * self.scale.data
        rstd = 1.0 / np.sqrt(self.std**2 + self.eps)
        return rstd * (g - g.mean(-1, keepdims=True) - self.xhat * (g * self.xhat).mean(-1, keepdims=True))
