"""CrossEntropyLoss: mean over the targets that are not `ignore_index` of -log softmax(logits)[target].

Math and the fused gradient softmax(logits) - onehot(target): docs/loss.md (equations 1-4).
"""

from collections import namedtuple

import numpy as np

from ._checks import cache_of, float_input, index_input
from .module import Module


class LossCache(namedtuple("LossCache", "logp y keep n shape")):
    """What backward reads: the log-probabilities logp (N, V), the targets y (N,), which rows
    count keep (N,), how many n, and the logits' shape. `probs()` is softmax(logits) (N, V)."""

    __slots__ = ()

    def probs(self):
        return np.exp(self.logp)


class CrossEntropyLoss(Module):
    """CrossEntropyLoss(ignore_index=-100); forward(logits, targets) -> Python float."""

    def __init__(self, ignore_index=-100):
        super().__init__()
        self.ignore_index = int(ignore_index)
        self.cache = None

    def _check_input(self, logits, targets):
        """(z (N, V), y (N,), keep (N,), n) from the logits and targets, or a clear error."""
        where = "CrossEntropyLoss.forward"
        logits = float_input(where, "logits", logits, None, ndim_min=2)
        if logits.ndim > 3:
            raise ValueError(f"{where}: logits must be (N, V) or (B, T, V), got shape {logits.shape}")
        targets = np.asarray(targets)
        if targets.shape != logits.shape[:-1]:
            raise ValueError(
                f"{where}: targets has shape {targets.shape}, expected {logits.shape[:-1]} "
                f"to match logits of shape {logits.shape}"
            )
        V = logits.shape[-1]
        y = targets.reshape(-1)  # (N,)
        keep = y != self.ignore_index  # (N,) bool
        y = index_input(where, "targets", np.where(keep, y, 0) if y.dtype.kind in "iu" else y, V)
        n = int(keep.sum())
        if n == 0:
            raise ValueError(
                f"{where}: every target is ignore_index ({self.ignore_index}); the mean is undefined"
            )
        return logits.reshape(-1, V), y, keep, n

    def forward(self, logits, targets):
        """logits: (N, V) or (B, T, V) float; targets: (N,) or (B, T) int -> mean loss (float)."""
        z, y, keep, n = self._check_input(logits, targets)  # (N, V), (N,), (N,), kept rows
        zmax = z.max(-1, keepdims=True)  # (N, 1)
        shifted = z - zmax  # (N, V), the max subtracted so exp cannot overflow
        logsumexp = np.log(np.exp(shifted).sum(-1, keepdims=True))  # (N, 1)
        logp = shifted - logsumexp  # (N, V)   eq. 1: log-softmax
        nll = -logp[np.arange(len(y)), y]  # (N,)   eq. 2
        loss = float(nll[keep].sum(dtype=np.float64) / n)  # eq. 3
        self.cache = LossCache(logp, y, keep, n, np.shape(logits))
        return loss

    def backward(self, dout=1.0):
        """dout: the scalar gradient of the final loss (1.0) -> dlogits, logits' shape."""
        logp, y, keep, n, shape = cache_of(self, self.cache)
        if np.ndim(dout) != 0:
            raise ValueError(f"CrossEntropyLoss.backward: dout must be a scalar, got shape {np.shape(dout)}")
        # eq. 4: dlogits = (softmax(logits) - onehot(target)) * dout / n on kept rows, 0 on ignored
        dlogits = np.exp(logp)  # (N, V) softmax
        dlogits[np.arange(len(y)), y] -= 1.0
        dlogits *= (keep * (float(dout) / n)).astype(logp.dtype)[:, None]
        return dlogits.reshape(shape)
