"""GELU, the tanh approximation used by GPT-2 and the book:

    out = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))

Math and the derivative: docs/gelu.md (equations 1-5).
"""

import math

import numpy as np

from .._checks import cache_of, float_input, grad_output
from ..module import Module

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)  # a Python float: keeps float32 arrays float32
COEF = 0.044715
# For |x| above this, tanh(u) is exactly +-1 in float32 and float64 (u > 170), so clipping x
# here changes no result and keeps x^3 from overflowing for huge inputs.
X_SATURATED = 30.0


class GELU(Module):
    """GELU() with the tanh approximation; no parameters. Runs in the input's float dtype."""

    def __init__(self):
        super().__init__()
        self.cache = None

    def forward(self, x):
        """x: (...) float -> out: (...) same shape and dtype."""
        x = float_input("GELU.forward", "x", x, None, ndim_min=0)
        xc = np.clip(x, -X_SATURATED, X_SATURATED)  # (...)
        u = SQRT_2_OVER_PI * (xc + COEF * (xc * xc * xc))  # (...)   eq. 1
        t = np.tanh(u)  # (...)   eq. 2
        out = 0.5 * x * (1.0 + t)  # (...)   eq. 3
        # kept for backward: the (clipped) input and tanh(u)
        self.cache = (xc, t, x.shape)
        return out

    def backward(self, dout):
        """dout: (...) -> dx: (...)."""
        xc, t, shape = cache_of(self, self.cache)
        dout = grad_output(self, dout, shape, t.dtype)
        # forward: out = 0.5 * x * (1 + t),  t = tanh(u),  u = sqrt(2/pi) * (x + 0.044715 x^3)
        du_dx = SQRT_2_OVER_PI * (1.0 + (3.0 * COEF) * (xc * xc))  # (...)   eq. 4
        # eq. 5: product rule; d tanh(u)/du = 1 - t^2. Where |x| was clipped, 1 - t^2 is 0.
        dgelu = 0.5 * (1.0 + t) + 0.5 * xc * (1.0 - t * t) * du_dx  # (...)
        dx = dout * dgelu  # (...)
        return dx
