"""CrossEntropyLoss: mean over the targets that are not `ignore_index` of -log softmax(logits)[target].

Math and the fused gradient softmax(logits) - onehot(target): docs/loss.md (equations 1-4).
"""

import numpy as np

from ._checks import cache_of, float_input, index_input
from .module import Module


class CrossEntropyLoss(Module):
    """CrossEntropyLoss(ignore_index=-100); forward(logits, targets) -> Python float."""

    def __init__(self, ignore_index=-100):
        super().__init__()
        self.ignore_index = int(ignore_index)
        self.cache = None

    def forward(self, logits, targets):
        """logits: (N, V) or (B, T, V) float; targets: (N,) or (B, T) int -> mean loss (float)."""
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
        z = logits.reshape(-1, V)  # (N, V)
        y = targets.reshape(-1)  # (N,)
        keep = y != self.ignore_index  # (N,) bool
        y = index_input(where, "targets", np.where(keep, y, 0) if y.dtype.kind in "iu" else y, V)
        n = int(keep.sum())
        if n == 0:
            raise ValueError(
                f"{where}: every target is ignore_index ({self.ignore_index}); the mean is undefined"
            )
        zmax = z.max(-1, keepdims=True)  # (N, 1)
        shifted = z - zmax  # (N, V), the max subtracted so exp cannot overflow
        logsumexp = np.log(np.exp(shifted).sum(-1, keepdims=True))  # (N, 1)
        logp = shifted - logsumexp  # (N, V)   eq. 1: log-softmax
        rows = np.arange(len(y))
        nll = -logp[rows, y]  # (N,)   eq. 2
        loss = float(nll[keep].sum(dtype=np.float64) / n)  # eq. 3
        # kept for backward: the log-probabilities, targets, which rows count, and how many
        self.cache = (logp, y, keep, n, logits.shape)
        return loss

    def backward(self, dout=1.0):
        """dout: the scalar gradient of the final loss (1.0) -> dlogits, logits' shape."""
        logp, y, keep, n, shape = cache_of(self, self.cache)
        if np.ndim(dout) != 0:
            raise ValueError(f"CrossEntropyLoss.backward: dout must be a scalar, got shape {np.shape(dout)}")
        # eq. 4: dlogits = (softmax(logits) - onehot(target)) / n on kept rows, 0 on ignored rows
        dlogits = np.exp(logp)  # (N, V)
        dlogits[np.arange(len(y)), y] -= 1.0
        dlogits *= (keep * (float(dout) / n)).astype(logp.dtype)[:, None]
        return dlogits.reshape(shape)
