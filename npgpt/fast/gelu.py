"""GELU, fast: the same function as npgpt/layers/gelu.py (the reference, which a property test
holds this equal to), with t = tanh(u) in a buffer kept across calls and the passes run in
place, block by block, on the policy's threads (_workspace.blockwise).

The cache has the reference's fields (x, t); t lives in this module's buffer.
"""

import numpy as np

from .._checks import cache_of, float_input, grad_output
from ..layers import gelu as reference
from ..layers.gelu import COEF, SQRT_2_OVER_PI, X_SATURATED
from ._workspace import blockwise, buffer


class GELU(reference.GELU):
    """GELU(), fast; see npgpt/layers/gelu.py."""

    def forward(self, x):
        """x: (...) float -> out: (...) same shape and dtype."""
        x = float_input("GELU.forward", "x", x, None, ndim_min=0)
        x = np.ascontiguousarray(x)
        # speed: t lives in a buffer kept across calls (no fresh pages each step), the passes
        # run in place, block by block, on every core (_workspace.blockwise); x itself is kept
        # for backward, as Linear keeps its input, rather than a copy of it
        t = buffer(self, "t", x.shape, x.dtype)  # (...) tanh(u)
        out = np.empty_like(x)  # (...)

        def gelu(x, t, out):
            xc = np.clip(x, -X_SATURATED, X_SATURATED)  # (block) x clipped
            # u = sqrt(2/pi) * (x + 0.044715 x^3), as sqrt(2/pi) * x * (1 + 0.044715 x^2), in t
            np.multiply(xc, xc, out=t)
            t *= COEF
            t += 1.0
            t *= xc
            t *= SQRT_2_OVER_PI  # u   eq. 1
            np.tanh(t, out=t)  # t = tanh(u)   eq. 2
            # eq. 3, out = 0.5 * x * (1 + t), evaluated through a = |x| so that the identity
            # GELU(x) - GELU(-x) = x holds to the last bit: t and u are odd, so |t| = tanh(u(a))
            # and g = 0.5 * a * (1 + |t|) = GELU(a); for x < 0, GELU(x) = g + x = g - a, a subtraction
            # that is exact since a/2 <= g <= a (docs/gelu.md)
            np.abs(t, out=out)
            out += 1.0
            out *= 0.5  # before a: (1 + |t|) * a would overflow for x near the dtype's max
            a = np.abs(x, out=xc)  # (block), xc's memory reused
            out *= a  # g = GELU(|x|)
            np.minimum(x, 0.0, out=a)  # x where x < 0, else 0
            out += a  # out = 0.5 * x * (1 + t)   eq. 3: g - |x| for x < 0, g for x >= 0

        blockwise(gelu, x, t, out)
        # kept for backward: the input (a reference, as Linear keeps its input) and tanh(u)
        self.cache = reference.GELUCache(x, t)
        return out

    def backward(self, dout):
        """dout: (...) -> dx: (...)."""
        x, t = cache_of(self, self.cache)
        dout = grad_output(self, dout, x.shape, t.dtype)
        dout = np.ascontiguousarray(dout)
        dx = np.empty_like(dout)  # (...)

        def dgelu(dout, x, t, dx):
            # forward: out = 0.5 * x * (1 + t),  t = tanh(u),  u = sqrt(2/pi) * (x + 0.044715 x^3)
            xc = np.clip(x, -X_SATURATED, X_SATURATED)  # (block) as in forward: x^2 cannot overflow
            du_dx = np.multiply(xc, xc)  # (block)
            du_dx *= 3.0 * COEF
            du_dx += 1.0
            du_dx *= SQRT_2_OVER_PI  # du/dx = sqrt(2/pi) * (1 + 3 * 0.044715 x^2)   eq. 4
            # eq. 5: product rule; d tanh(u)/du = 1 - t^2. Where |x| was clipped, 1 - t^2 is 0.
            # dgelu = 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * du/dx, built in dx, then times dout
            np.multiply(t, t, out=dx)
            np.subtract(1.0, dx, out=dx)
            dx *= xc
            dx *= du_dx
            dx += t
            dx += 1.0
            dx *= 0.5  # dgelu   eq. 5
            dx *= dout

        blockwise(dgelu, dout, x, t, dx)
        return dx
