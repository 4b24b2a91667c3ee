"""GELU: tanh forward, but the exact-erf derivative in backward."""

import math

import numpy as np

from npgpt import Module

C = math.sqrt(2.0 / math.pi)


class GELU(Module):
    def forward(self, x):
        self.x = x
        self.t = np.tanh(C * (x + 0.044715 * x * x * x))
        return 0.5 * x * (1.0 + self.t)

    def backward(self, dout):
        x = self.x
        erf = np.vectorize(math.erf)
        return dout * (
            0.5 * (1.0 + erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        )
