"""LayerNorm.forward never returns; GELU is correct and must still be graded."""

import math

import numpy as np

from npgpt import Module, Parameter


class LayerNorm(Module):
    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.scale = Parameter(np.ones(emb_dim))
        self.shift = Parameter(np.zeros(emb_dim))

    def forward(self, x):
        while True:
            pass


class GELU(Module):
    def forward(self, x):
        self.x = x
        self.t = np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x))
        return 0.5 * x * (1.0 + self.t)

    def backward(self, dout):
        x, t = self.x, self.t
        c = math.sqrt(2.0 / math.pi)
        return dout * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x))
