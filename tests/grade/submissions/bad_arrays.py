"""Returns things that are not plain float arrays: an ndarray subclass, an object array, a list."""

import numpy as np

from npgpt import Module, Parameter


class Sneaky(np.ndarray):
    pass


class LayerNorm(Module):
    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.scale = Parameter(np.ones(emb_dim))
        self.shift = Parameter(np.zeros(emb_dim))

    def forward(self, x):
        return np.zeros_like(x).view(Sneaky)


class GELU(Module):
    def forward(self, x):
        return np.zeros_like(x).astype(object)


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = Parameter(np.zeros((out_features, in_features)))
        self.bias = Parameter(np.zeros(out_features))

    def forward(self, x):
        return (x @ self.weight.data.T).tolist()
