"""LayerNorm: normalize each row over its last axis, then scale and shift.

Math and the derivation of the three-term gradient: docs/layernorm.md (equations 1-9).
Variance is the mean of squared deviations (biased, as in GPT-2 and the book); `unbiased=True`
divides by n-1 instead (`x.std(-1)` in *Learn Generative AI with PyTorch*, section 9.2.2).
"""

import numpy as np

from .._checks import cache_of, float_input, grad_output
from ..module import Module, Parameter


class LayerNorm(Module):
    """LayerNorm(emb_dim, eps=1e-5, unbiased=False): parameters `scale`, `shift` of shape (emb_dim,)."""

    def __init__(self, emb_dim, eps=1e-5, unbiased=False):
        super().__init__()
        if unbiased and emb_dim < 2:
            raise ValueError(f"LayerNorm: unbiased=True needs emb_dim >= 2, got {emb_dim}")
        if not eps > 0:
            raise ValueError(f"LayerNorm: eps must be positive, got {eps}")
        self.emb_dim, self.eps, self.unbiased = emb_dim, float(eps), bool(unbiased)
        self.scale = Parameter(np.ones(emb_dim))
        self.shift = Parameter(np.zeros(emb_dim))
        self.cache = None

    def forward(self, x):
        """x: (..., C) float -> out: (..., C)."""
        x = float_input("LayerNorm.forward", "x", x, self.dtype, last_dim=self.emb_dim)
        C = x.shape[-1]
        n = C - 1 if self.unbiased else C  # the variance's divisor, eq. 2
        mu = x.mean(-1, keepdims=True)  # (..., 1)   eq. 1
        xmu = x - mu  # (..., C)
        # second pass: for rows far from zero (float32 values ~1e4) the first mean is off by a
        # few ulps of the offset; x - mu is exact there, so its mean recovers the lost digits
        xmu -= xmu.mean(-1, keepdims=True)
        var = (xmu * xmu).sum(-1, keepdims=True) / n  # (..., 1)   eq. 2
        rstd = 1.0 / np.sqrt(var + self.eps)  # (..., 1)   eq. 3
        xhat = xmu * rstd  # (..., C)   eq. 4
        out = xhat * self.scale.data + self.shift.data  # (..., C)   eq. 5
        # kept for backward: the normalized rows and the reciprocal standard deviations
        self.cache = (xhat, rstd, n)
        return out

    def backward(self, dout):
        """dout: (..., C) -> dx: (..., C); adds into scale.grad and shift.grad."""
        xhat, rstd, n = cache_of(self, self.cache)
        dout = grad_output(self, dout, xhat.shape, xhat.dtype)
        C = xhat.shape[-1]
        # forward: out = xhat * scale + shift
        self.shift.grad += dout.reshape(-1, C).sum(0)  # (C,)   eq. 6
        self.scale.grad += (dout * xhat).reshape(-1, C).sum(0)  # (C,)   eq. 7
        dxhat = dout * self.scale.data  # (..., C)   eq. 8
        # forward: xhat = (x - mean(x)) / sqrt(var + eps), var over n = C or C - 1
        # eq. 9: dx = rstd * (dxhat - mean(dxhat) - xhat * sum(dxhat * xhat) / n)
        #   term 1 is the direct path, term 2 the path through the mean,
        #   term 3 the path through the variance
        term2 = dxhat.mean(-1, keepdims=True)  # (..., 1)
        term3 = (dxhat * xhat).sum(-1, keepdims=True) / n  # (..., 1)
        dx = (dxhat - term2 - xhat * term3) * rstd  # (..., C)
        return dx

    def __repr__(self):
        return f"LayerNorm({self.emb_dim}, eps={self.eps:g}, unbiased={self.unbiased})"
