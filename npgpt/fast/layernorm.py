"""LayerNorm, fast: the same function as npgpt/layers/layernorm.py (the reference, which a
property test holds this equal to), with its cache in buffers kept across calls and the row
passes run in place, block by block, on the policy's threads (_workspace.blockwise).

The cache has the reference's fields (xhat, rstd, n), but they live in this module's buffers:
the next forward overwrites them.
"""

import numpy as np

from .._checks import cache_of, float_input, grad_output
from ..layers import layernorm as reference
from ._workspace import blockwise, buffer


class LayerNorm(reference.LayerNorm):
    """LayerNorm(emb_dim, eps=1e-5, unbiased=False), fast; see npgpt/layers/layernorm.py."""

    def forward(self, x):
        """x: (..., C) float -> out: (..., C)."""
        x = float_input("LayerNorm.forward", "x", x, self.dtype, last_dim=self.emb_dim)
        C = x.shape[-1]
        n = C - 1 if self.unbiased else C  # the variance's divisor, eq. 2
        x = np.ascontiguousarray(x)
        scale, shift, eps = self.scale.data, self.shift.data, self.eps
        # speed: the cache lives in buffers kept across calls, and the row passes run in
        # place, in blocks of rows that stay in cache, on every core (_workspace.blockwise)
        xhat = buffer(self, "xhat", x.shape, x.dtype)  # (..., C)
        rstd = buffer(self, "rstd", x.shape[:-1] + (1,), x.dtype)  # (..., 1)
        out = np.empty_like(x)  # (..., C)

        def layernorm(x, xhat, rstd, out):  # a block of rows
            # row sums by einsum: one pass each, no (rows, C) temporary (x.mean and
            # (xhat * xhat).sum measured 1.3x slower here)
            mu = np.einsum("ij->i", x)[:, None] * (1.0 / C)  # (rows, 1)   eq. 1
            np.subtract(x, mu, out=xhat)
            # second pass: for rows far from zero (float32 values ~1e4) the first mean is off by
            # a few ulps of the offset; x - mu is exact there, so its mean recovers the lost digits
            xhat -= np.einsum("ij->i", xhat)[:, None] * (1.0 / C)
            var = np.einsum("ij,ij->i", xhat, xhat)[:, None] * (1.0 / n)  # (rows, 1)   eq. 2
            np.sqrt(var + eps, out=rstd)
            np.divide(1.0, rstd, out=rstd)  # eq. 3
            xhat *= rstd  # eq. 4
            np.multiply(xhat, scale, out=out)
            out += shift  # eq. 5

        blockwise(layernorm, x, xhat, rstd, out)
        # kept for backward: the normalized rows and the reciprocal standard deviations
        self.cache = reference.LayerNormCache(xhat, rstd, n)
        return out

    def backward(self, dout):
        """dout: (..., C) -> dx: (..., C); adds into scale.grad and shift.grad."""
        xhat, rstd, n = cache_of(self, self.cache)
        dout = np.ascontiguousarray(grad_output(self, dout, xhat.shape, xhat.dtype))
        scale, C = self.scale.data, xhat.shape[-1]
        dx = np.empty_like(dout)  # (..., C)

        def layernorm_backward(dout, xhat, rstd, dx):  # a block of rows
            # forward: out = xhat * scale + shift; eq. 6 and 7 summed over this block's rows
            dshift = np.einsum("ij->j", dout)  # (C,)   eq. 6
            p = dout * xhat  # (rows, C)
            dscale = np.einsum("ij->j", p)  # (C,)   eq. 7
            # eq. 8, dxhat = dout * scale, enters eq. 9 through its row mean and its row dot
            # product with xhat; both are taken from dout and p, before dxhat is formed
            # forward: xhat = (x - mean(x)) / sqrt(var + eps), var over n = C or C - 1
            # eq. 9: dx = rstd * (dxhat - mean(dxhat) - xhat * sum(dxhat * xhat) / n)
            #   term1 (dxhat) is the direct path, term2 the path through the mean,
            #   term3 the path through the variance
            term2 = np.einsum("ij,j->i", dout, scale)[:, None] * (1.0 / C)  # (rows, 1) mean(dxhat)
            term3 = np.einsum("ij,j->i", p, scale)[:, None] * (1.0 / n)  # (rows, 1) sum(dxhat xhat)/n
            np.multiply(dout, scale, out=dx)  # dxhat   eq. 8
            dx -= np.multiply(xhat, term3, out=p)  # p's memory reused
            dx -= term2
            dx *= rstd  # eq. 9
            return dshift, dscale

        for dshift, dscale in blockwise(layernorm_backward, dout, xhat, rstd, dx):
            self.shift.grad += dshift
            self.scale.grad += dscale
        return dx
