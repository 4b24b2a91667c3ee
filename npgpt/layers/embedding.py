"""Embedding: a lookup table; out[..., :] = weight[idx[...], :].

Math: docs/embedding.md (equations 1-2). The backward is a scatter-add: a token id that
appears several times collects the gradient of every position it appears at.
"""

import numpy as np

from .._checks import cache_of, grad_output, index_input, size
from ..module import Module, Parameter


class Embedding(Module):
    """Embedding(num_embeddings, embedding_dim, rng=None): `weight` (num, dim), N(0, 1) init."""

    def __init__(self, num_embeddings, embedding_dim, rng=None):
        super().__init__()
        rng = np.random.default_rng(rng)
        num_embeddings = size("Embedding", "num_embeddings", num_embeddings)
        embedding_dim = size("Embedding", "embedding_dim", embedding_dim)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(rng.standard_normal((num_embeddings, embedding_dim)))
        self.cache = None

    def forward(self, idx):
        """idx: (...) integer ids in [0, num_embeddings) -> out: (..., dim)."""
        idx = index_input("Embedding.forward", "idx", idx, self.num_embeddings)
        out = self.weight.data[idx]  # (..., dim)   eq. 1
        # kept for backward: a copy of the ids, so a caller changing idx later cannot change dW
        self.cache = idx.copy()  # (...)
        return out

    def backward(self, dout):
        """dout: (..., dim) -> None (the input is integer ids); adds into weight.grad."""
        idx = cache_of(self, self.cache)
        dout = grad_output(self, dout, idx.shape + (self.embedding_dim,), self.dtype)
        # forward: out = weight[idx]; eq. 2: scatter-add, repeated ids accumulate
        np.add.at(self.weight.grad, idx.ravel(), dout.reshape(-1, self.embedding_dim))
        return None

    def __repr__(self):
        return f"Embedding({self.num_embeddings}, {self.embedding_dim})"
