"""CrossEntropyLoss, fast: the same function as npgpt/loss.py (the reference, which a property
test holds this equal to), fused: exp(z - max) is computed in place in a buffer kept across
calls, block by block on the policy's threads, and the backward folds softmax's division into
one row scale.

The cache keeps exp(z - max) and its row sums instead of logp: softmax = expz / sumexp.
"""

from collections import namedtuple

import numpy as np

from .. import loss as reference
from .._checks import cache_of
from ._workspace import blockwise, buffer


class LossCache(namedtuple("LossCache", "expz sumexp y keep n shape")):
    """What backward reads: exp(z - max) (N, V) and its row sums (N, 1), the targets (N,), which
    rows count (N,), how many, and the logits' shape. `probs()` is softmax(logits) (N, V), as
    the reference's cache gives it."""

    __slots__ = ()

    def probs(self):
        return self.expz / self.sumexp


class CrossEntropyLoss(reference.CrossEntropyLoss):
    """CrossEntropyLoss(ignore_index=-100), fast; see npgpt/loss.py."""

    def forward(self, logits, targets):
        """logits: (N, V) or (B, T, V) float; targets: (N,) or (B, T) int -> mean loss (float)."""
        z, y, keep, n = self._check_input(logits, targets)  # (N, V), (N,), (N,), kept rows
        # exp(z - zmax) is computed in place in a buffer kept across calls (at V = 50257 each
        # fresh (N, V) array costs its page faults), block by block on every core, so the
        # passes over each block run in cache (_workspace.blockwise)
        expz = buffer(self, "expz", z.shape, z.dtype)  # (N, V)
        zmax = np.empty((len(z), 1), z.dtype)  # (N, 1)
        sumexp = np.empty((len(z), 1), z.dtype)  # (N, 1)

        def softmax_parts(z, expz, zmax, sumexp):  # a block of rows
            np.max(z, axis=-1, keepdims=True, out=zmax)
            np.subtract(z, zmax, out=expz)  # the max subtracted so exp cannot overflow
            np.exp(expz, out=expz)
            np.sum(expz, axis=-1, keepdims=True, out=sumexp)

        blockwise(softmax_parts, np.ascontiguousarray(z), expz, zmax, sumexp)
        rows = np.arange(len(y))
        logp_y = (z[rows, y] - zmax[:, 0]) - np.log(sumexp[:, 0])  # (N,)   eq. 1: log-softmax at y
        nll = -logp_y  # (N,)   eq. 2
        loss = float(nll[keep].sum(dtype=np.float64) / n)  # eq. 3
        # kept for backward: exp(z - zmax) and its row sums (softmax = expz / sumexp), the
        # targets, which rows count, and how many
        self.cache = LossCache(expz, sumexp, y, keep, n, np.shape(logits))
        return loss

    def backward(self, dout=1.0):
        """dout: the scalar gradient of the final loss (1.0) -> dlogits, logits' shape."""
        expz, sumexp, y, keep, n, shape = cache_of(self, self.cache)
        if np.ndim(dout) != 0:
            raise ValueError(f"CrossEntropyLoss.backward: dout must be a scalar, got shape {np.shape(dout)}")
        rowscale = (keep * (float(dout) / n)).astype(expz.dtype)[:, None]  # (N, 1): dout / n, 0 if ignored
        # eq. 4: dlogits = (softmax(logits) - onehot(target)) / n on kept rows, 0 on ignored rows;
        # softmax's division by sumexp is folded into the row scale: one pass over (N, V)
        dlogits = expz * (rowscale / sumexp)  # (N, V)   eq. 4
        dlogits[np.arange(len(y)), y] -= rowscale[:, 0]
        return dlogits.reshape(shape)
