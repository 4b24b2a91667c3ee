"""LayerNorm.forward allocates far more than the memory limit; GELU grows a list until it fails."""

import numpy as np

from npgpt import Module, Parameter


class LayerNorm(Module):
    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.scale = Parameter(np.ones(emb_dim))
        self.shift = Parameter(np.zeros(emb_dim))

    def forward(self, x):
        big = np.ones((1 << 30,))  # 8 GiB
        return x + big[0]


class GELU(Module):
    def forward(self, x):
        hoard = []
        while True:
            hoard.append(bytearray(1 << 24))
