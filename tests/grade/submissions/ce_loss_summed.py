"""CrossEntropyLoss whose loss is the sum over the targets instead of their mean (the gradient is
right): its forward's diagnosis once made the grader raise KeyError ("internal error")."""

import numpy as np


def cross_entropy_forward(logits, targets, ignore_index):
    V = logits.shape[-1]
    z = logits.reshape(-1, V)
    y = targets.reshape(-1)
    keep = y != ignore_index
    y = np.where(keep, y, 0)
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    loss = float(-(logp[np.arange(len(y)), y] * keep).sum())
    return loss, (logp, y, keep, logits.shape)


def cross_entropy_backward(dout, cache):
    logp, y, keep, shape = cache
    d = np.exp(logp)
    d[np.arange(len(y)), y] -= 1.0
    return (d * keep[:, None] * (float(dout) / keep.sum())).reshape(shape)
