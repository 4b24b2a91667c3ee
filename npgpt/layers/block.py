"""The pre-LayerNorm transformer block of GPT-2 and the book's ch. 4:

    x = x + drop_shortcut(att(norm1(x)))
    x = x + drop_shortcut(ff(norm2(x)))

Math: docs/block.md. A shortcut's gradient is the sum of the two paths: dout flows straight
through the identity and also back through the branch (equations 1-4).
"""

from collections import namedtuple

import numpy as np

from .._checks import cache_of, float_input, grad_output
from ..module import Module
from .attention import MultiHeadAttention
from .dropout import Dropout
from .feedforward import FeedForward
from .layernorm import LayerNorm


class BlockCache(namedtuple("BlockCache", "drop1 drop2 shape")):
    """What backward reads: the two dropout calls' caches (one module, applied twice) and x's shape."""

    __slots__ = ()


class TransformerBlock(Module):
    """TransformerBlock(cfg, rng=None): `att`, `ff`, `norm1`, `norm2`, `drop_shortcut`."""

    def __init__(self, cfg, rng=None):
        super().__init__()
        rng = np.random.default_rng(rng)
        E = cfg["emb_dim"]
        self.att = MultiHeadAttention(
            d_in=E,
            d_out=E,
            context_length=cfg["context_length"],
            dropout=cfg["drop_rate"],
            num_heads=cfg["n_heads"],
            qkv_bias=cfg.get("qkv_bias", False),
            rng=rng,
        )
        self.ff = FeedForward(cfg, rng=rng)
        self.norm1 = LayerNorm(E)
        self.norm2 = LayerNorm(E)
        self.drop_shortcut = Dropout(cfg["drop_rate"], rng=rng)
        self.emb_dim = E
        self.cache = None

    def forward(self, x):
        """x: (B, T, E) -> out: (B, T, E)."""
        x = float_input("TransformerBlock.forward", "x", x, self.dtype, last_dim=self.emb_dim)
        # the book applies one Dropout module twice, so the block keeps each call's mask
        h = self.drop_shortcut.forward(self.att.forward(self.norm1.forward(x)))  # (B, T, E)
        drop1 = self.drop_shortcut.cache
        x1 = x + h  # (B, T, E)   eq. 1
        h = self.drop_shortcut.forward(self.ff.forward(self.norm2.forward(x1)))  # (B, T, E)
        drop2 = self.drop_shortcut.cache
        out = x1 + h  # (B, T, E)   eq. 2
        self.cache = BlockCache(drop1, drop2, x.shape)
        return out

    def backward(self, dout):
        """dout: (B, T, E) -> dx: (B, T, E)."""
        drop1, drop2, shape = cache_of(self, self.cache)
        dout = grad_output(self, dout, shape, self.dtype)
        # forward: out = x1 + drop(ff(norm2(x1))); eq. 3: dx1 = dout + (branch's gradient)
        self.drop_shortcut.cache = drop2
        dh = self.drop_shortcut.backward(dout)
        dx1 = dout + self.norm2.backward(self.ff.backward(dh))  # (B, T, E)
        # forward: x1 = x + drop(att(norm1(x))); eq. 4
        self.drop_shortcut.cache = drop1
        dh = self.drop_shortcut.backward(dx1)
        dx = dx1 + self.norm1.backward(self.att.backward(dh))  # (B, T, E)
        return dx
