"""FeedForward: Linear(E, 4E) -> GELU -> Linear(4E, E), the book's `layers` Sequential.

Math: docs/feedforward.md. The backward is the Sequential's: each layer's backward in reverse.
"""

import numpy as np

from ..module import Module, Sequential
from .gelu import GELU
from .linear import Linear


class FeedForward(Module):
    """FeedForward(cfg, rng=None) with cfg["emb_dim"] = E: `layers` = Sequential(Linear, GELU, Linear)."""

    def __init__(self, cfg, rng=None):
        super().__init__()
        E = cfg["emb_dim"]
        rng = np.random.default_rng(rng)  # one stream for both layers
        self.layers = Sequential(Linear(E, 4 * E, rng=rng), GELU(), Linear(4 * E, E, rng=rng))

    def forward(self, x):
        """x: (..., E) -> out: (..., E)."""
        return self.layers.forward(x)  # eq. 1-3: Linear, GELU, Linear

    def backward(self, dout):
        """dout: (..., E) -> dx: (..., E)."""
        return self.layers.backward(dout)  # eq. 4-6: the three backwards, in reverse
