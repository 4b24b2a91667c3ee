"""Linear whose bias gradient is not summed over batch and time."""

import numpy as np

from npgpt import Module, Parameter


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = Parameter(np.zeros((out_features, in_features)))
        self.bias = Parameter(np.zeros(out_features))

    def forward(self, x):
        self.x = x
        return x @ self.weight.data.T + self.bias.data

    def backward(self, dout):
        d_out, d_in = self.weight.data.shape
        self.weight.grad += dout.reshape(-1, d_out).T @ self.x.reshape(-1, d_in)
        self.bias.grad = self.bias.grad + dout
        return dout @ self.weight.data
