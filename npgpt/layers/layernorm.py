"""LayerNorm: normalize each row over its last axis, then scale and shift.

Math and the derivation of the three-term gradient: docs/layernorm.md (equations 1-9).
Variance is the mean of squared deviations (biased, as in GPT-2 and the book); `unbiased=True`
divides by n-1 instead (`x.std(-1)` in *Learn Generative AI with PyTorch*, section 9.2.2).
The steps `variance`, `rstd` and `input_grad` (with its `mean_term` and `variance_term`) are
methods so a variant can replace one of them (npgpt/mistakes.py).
"""

from collections import namedtuple

import numpy as np

from .._checks import cache_of, float_input, grad_output, size
from ..module import Module, Parameter

# what backward reads: the normalized rows xhat (..., C), rstd = 1/sqrt(var + eps) (..., 1) and
# the variance's divisor n (C, or C - 1 when unbiased)
LayerNormCache = namedtuple("LayerNormCache", "xhat rstd n")


class LayerNorm(Module):
    """LayerNorm(emb_dim, eps=1e-5, unbiased=False): parameters `scale`, `shift` of shape (emb_dim,)."""

    def __init__(self, emb_dim, eps=1e-5, unbiased=False):
        super().__init__()
        emb_dim = size("LayerNorm", "emb_dim", emb_dim)
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
        n = x.shape[-1] - 1 if self.unbiased else x.shape[-1]  # the variance's divisor, eq. 2
        mu = x.mean(-1, keepdims=True)  # (..., 1)   eq. 1
        xmu = x - mu  # (..., C)   eq. 2
        xmu -= xmu.mean(-1, keepdims=True)  # second pass: the digits float32 lost far from zero
        var = self.variance(xmu, n)  # (..., 1)   eq. 2
        rstd = self.rstd(var)  # (..., 1)   eq. 3
        xhat = xmu * rstd  # (..., C)   eq. 4
        out = xhat * self.scale.data + self.shift.data  # (..., C)   eq. 5
        self.cache = LayerNormCache(xhat, rstd, n)
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
        # forward: xhat = (x - mu) * rstd, rstd = 1 / sqrt(var + eps)
        dx = self.input_grad(dxhat, xhat, rstd, n)  # (..., C)   eq. 9
        return dx

    # ---- the steps ---------------------------------------------------------------------------
    def variance(self, xmu, n):
        """xmu: (..., C) centred rows -> var (..., 1) = sum(xmu^2) / n   eq. 2"""
        return (xmu * xmu).sum(-1, keepdims=True) / n

    def rstd(self, var):
        """var: (..., 1) -> 1 / sqrt(var + eps) (..., 1)   eq. 3"""
        return 1.0 / np.sqrt(var + self.eps)

    def input_grad(self, dxhat, xhat, rstd, n):
        """eq. 9: dx = rstd * (dxhat - mean(dxhat) - xhat * sum(dxhat * xhat) / n), (..., C)."""
        term2 = self.mean_term(dxhat)  # (..., 1) the path through the mean
        term3 = self.variance_term(dxhat, xhat, n)  # (..., 1) the path through the variance
        return (dxhat - term2 - xhat * term3) * rstd  # term1 = dxhat, the direct path

    def mean_term(self, dxhat):
        """term2 = mean(dxhat) over the row, (..., 1)   eq. 9"""
        return dxhat.mean(-1, keepdims=True)

    def variance_term(self, dxhat, xhat, n):
        """term3 = sum(dxhat * xhat) / n over the row, (..., 1)   eq. 9"""
        return (dxhat * xhat).sum(-1, keepdims=True) / n

    def __repr__(self):
        return f"LayerNorm({self.emb_dim}, eps={self.eps:g}, unbiased={self.unbiased})"
