"""Dropout, inverted: keep each element with probability 1 - p and scale it by 1 / (1 - p),
so the expected output equals the input and eval mode needs no rescaling.

Math: docs/dropout.md (equations 1-2).
"""

from collections import namedtuple

import numpy as np

from .._checks import cache_of, float_input, grad_output
from ..module import Module


class DropoutCache(namedtuple("DropoutCache", "mask scale shape dtype")):
    """What backward reads: the keep-mask (None for the identity), the scale 1/(1-p), x's shape and dtype."""

    __slots__ = ()


class Dropout(Module):
    """Dropout(p, rng=None); the identity in eval() mode and when p == 0. No parameters."""

    def __init__(self, p, rng=None):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = float(p)
        self.rng = np.random.default_rng(rng)
        self.cache = None

    def forward(self, x, mask=None):
        """x: (...) float -> out: (...). `mask` (x's shape, True = keep) replaces the random draw."""
        x = float_input("Dropout.forward", "x", x, None, ndim_min=0)
        if mask is None and (not self.training or self.p == 0.0):
            self.cache = DropoutCache(None, 0.0, x.shape, x.dtype)  # identity: nothing to keep
            return x.copy()
        if mask is None:
            mask = self.draw_mask(x.shape)  # (...) bool, True = keep
        else:
            mask = np.asarray(mask)
            if mask.shape != x.shape:
                raise ValueError(f"Dropout.forward: mask has shape {mask.shape}, x has {x.shape}")
            mask = mask.astype(bool)
        scale = 0.0 if self.p == 1.0 else 1.0 / (1.0 - self.p)  # a Python float keeps x's dtype
        out = x * mask * scale  # (...)   eq. 1
        # kept for backward: the keep-mask and the scale
        self.cache = DropoutCache(mask, scale, x.shape, x.dtype)
        return out

    def draw_mask(self, shape):
        """A keep-mask of `shape`: True with probability 1 - p, from this module's generator."""
        return self.rng.random(shape) >= self.p

    def backward(self, dout):
        """dout: (...) -> dx: (...), through the same mask as the last forward."""
        mask, scale, shape, dtype = cache_of(self, self.cache)
        dout = grad_output(self, dout, shape, dtype)
        if mask is None:
            return dout.copy()
        # forward: out = x * mask * scale
        dx = dout * mask * scale  # (...)   eq. 2
        return dx

    def __repr__(self):
        return f"Dropout(p={self.p})"
