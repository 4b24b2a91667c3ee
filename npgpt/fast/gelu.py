"""GELU, fast: the reference's operations (npgpt/layers/gelu.py), in the same order so the
results are the same bits, run in place, block by block, on the policy's threads
(_workspace.blockwise), with the cache in buffers kept across calls.

The cache has the reference's fields: x (clipped to [-30, 30], the module's own copy) and t,
both in this module's buffers (the next forward overwrites them).
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
        x = x if x.flags.c_contiguous else x.copy()  # (ascontiguousarray would make 0-d 1-d)
        # speed: t and the clipped x live in buffers kept across calls (no fresh pages each
        # step), the passes run in place, block by block, on every core (_workspace.blockwise).
        # The clipped x is the module's own copy, as the reference keeps: a caller changing x
        # after this forward cannot change the backward (and the backward needs no clip pass)
        t = buffer(self, "t", x.shape, x.dtype)  # (...) tanh(u)
        xc = buffer(self, "x", x.shape, x.dtype)  # (...) x clipped to [-30, 30]
        out = np.empty_like(x)  # (...)

        def gelu(x, xc, t, out):
            # the reference's operations in its order, in place: the same bits
            np.clip(x, -X_SATURATED, X_SATURATED, out=xc)  # (block) x clipped
            np.multiply(xc, xc, out=t)
            t *= xc
            t *= COEF
            t += xc
            t *= SQRT_2_OVER_PI  # u = sqrt(2/pi) * (x + 0.044715 x^3)   eq. 1
            np.tanh(t, out=t)  # t = tanh(u)   eq. 2
            np.multiply(x, 0.5, out=out)
            out *= t + 1.0  # out = 0.5 * x * (1 + t)   eq. 3

        blockwise(gelu, x, xc, t, out)
        # kept for backward: the clipped input and tanh(u), in this module's buffers
        self.cache = reference.GELUCache(xc, t)
        return out

    def backward(self, dout):
        """dout: (...) -> dx: (...)."""
        x, t = cache_of(self, self.cache)
        dout = grad_output(self, dout, x.shape, t.dtype)
        dout = dout if dout.flags.c_contiguous else dout.copy()
        dx = np.empty_like(dout)  # (...)

        def dgelu(dout, xc, t, dx):
            # forward: out = 0.5 * x * (1 + t),  t = tanh(u),  u = sqrt(2/pi) * (x + 0.044715 x^3);
            # xc is x clipped to [-30, 30] in forward: x^2 cannot overflow. The reference's
            # operations in its order, in place: the same bits
            du_dx = np.multiply(xc, xc)  # (block)
            du_dx *= 3.0 * COEF
            du_dx += 1.0
            du_dx *= SQRT_2_OVER_PI  # du/dx = sqrt(2/pi) * (1 + 3 * 0.044715 x^2)   eq. 4
            # eq. 5: dgelu = 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * du/dx, built in dx, then times dout
            np.multiply(xc, 0.5, out=dx)
            one_minus_t2 = np.multiply(t, t)  # (block)
            np.subtract(1.0, one_minus_t2, out=one_minus_t2)
            dx *= one_minus_t2
            dx *= du_dx
            half_1_plus_t = np.add(t, 1.0, out=du_dx)  # du_dx's memory reused
            half_1_plus_t *= 0.5
            dx += half_1_plus_t  # dgelu   eq. 5
            dx *= dout

        blockwise(dgelu, dout, x, t, dx)
        return dx
