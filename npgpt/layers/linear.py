"""Linear: out = x @ weight.T + bias, over any leading shape.

Math: docs/linear.md (equations 1-4). Initialization as PyTorch's nn.Linear:
weight and bias uniform in [-1/sqrt(in_features), 1/sqrt(in_features)].
"""

import math

import numpy as np

from .._checks import cache_of, float_input, grad_output, size
from ..module import Module, Parameter


class Linear(Module):
    """Linear(in_features, out_features, bias=True, rng=None): `weight` (out, in), `bias` (out,)."""

    def __init__(self, in_features, out_features, bias=True, rng=None):
        super().__init__()
        rng = np.random.default_rng(rng)
        in_features, out_features = (
            size("Linear", "in_features", in_features),
            size("Linear", "out_features", out_features),
        )
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = Parameter(rng.uniform(-bound, bound, (out_features, in_features)))
        self.bias = Parameter(rng.uniform(-bound, bound, out_features)) if bias else None
        self.cache = None

    def forward(self, x):
        """x: (..., in) -> out: (..., out)."""
        x = float_input("Linear.forward", "x", x, self.dtype, last_dim=self.in_features)
        N = math.prod(x.shape[:-1])  # all leading positions, as rows of one matrix
        out = x.reshape(N, self.in_features) @ self.weight.data.T  # (N, out)   eq. 1
        if self.bias is not None:
            out += self.bias.data
        out = out.reshape(x.shape[:-1] + (self.out_features,))  # (..., out)
        # kept for backward: a copy of the input, so a caller changing x later cannot change dW
        self.cache = x.copy()  # (..., in)
        return out

    def backward(self, dout):
        """dout: (..., out) -> dx: (..., in); adds into weight.grad and bias.grad."""
        x = cache_of(self, self.cache)
        dout = grad_output(self, dout, x.shape[:-1] + (self.out_features,), x.dtype)
        # forward: out = x @ weight.T + bias
        N = math.prod(x.shape[:-1])  # all leading positions
        dout2 = dout.reshape(N, self.out_features)  # (N, out)
        x2 = x.reshape(N, self.in_features)  # (N, in)
        self.weight.grad += dout2.T @ x2  # (out, in)   eq. 2: summed over batch and time
        if self.bias is not None:
            self.bias.grad += dout2.sum(0)  # (out,)   eq. 3
        dx = (dout2 @ self.weight.data).reshape(x.shape)  # (..., in)   eq. 4
        return dx

    def __repr__(self):
        return f"Linear({self.in_features}, {self.out_features}, bias={self.bias is not None})"
