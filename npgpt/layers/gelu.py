"""GELU, the tanh approximation used by GPT-2 and the book:

    out = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))

Math and the derivative: docs/gelu.md (equations 1-5). The steps `u`, `du_dx` and `local_grad`
are methods so a variant can replace one of them.
"""

import math
from collections import namedtuple

import numpy as np

from .._checks import cache_of, float_input, grad_output
from ..module import Module

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)  # a Python float: keeps float32 arrays float32
COEF = 0.044715
# For |x| above this, tanh(u) is exactly +-1 in float32 and float64 (u > 170), so clipping x
# here changes no result and keeps x^3 (and x^2 in backward) from overflowing for huge inputs.
X_SATURATED = 30.0

# what backward reads: the input clipped to [-30, 30] (a new array) and t = tanh(u), x's shape
GELUCache = namedtuple("GELUCache", "x t")


class GELU(Module):
    """GELU() with the tanh approximation; no parameters. Runs in the input's float dtype."""

    def __init__(self):
        super().__init__()
        self.cache = None

    def forward(self, x):
        """x: (...) float -> out: (...) same shape and dtype."""
        x = float_input("GELU.forward", "x", x, None, ndim_min=0)
        xc = np.clip(x, -X_SATURATED, X_SATURATED)  # (...) a copy; no result changes
        t = np.tanh(self.u(xc))  # (...)   eq. 1, 2
        out = 0.5 * x * (1.0 + t)  # (...)   eq. 3
        self.cache = GELUCache(xc, t)
        return out

    def backward(self, dout):
        """dout: (...) -> dx: (...)."""
        x, t = cache_of(self, self.cache)
        dout = grad_output(self, dout, x.shape, t.dtype)
        # forward: out = 0.5 * x * (1 + t), t = tanh(u(x))
        dx = dout * self.local_grad(x, t)  # (...)   eq. 5
        return dx

    # ---- the steps ---------------------------------------------------------------------------
    def u(self, x):
        """u = sqrt(2/pi) * (x + 0.044715 x^3)   eq. 1"""
        return SQRT_2_OVER_PI * (x + COEF * (x * x * x))

    def du_dx(self, x):
        """du/dx = sqrt(2/pi) * (1 + 3 * 0.044715 x^2)   eq. 4"""
        return SQRT_2_OVER_PI * (1.0 + (3.0 * COEF) * (x * x))

    def local_grad(self, x, t):
        """d out / dx by the product rule, with d tanh(u)/du = 1 - t^2   eq. 5"""
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * self.du_dx(x)
