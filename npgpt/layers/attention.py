"""Causal multi-head self-attention, as in the book's ch. 3 MultiHeadAttention.

    q, k, v = x Wq^T, x Wk^T, x Wv^T, split into nh heads of size hs = d_out / nh
    att = softmax(mask(q k^T / sqrt(hs))),  out = (dropout(att) v, heads merged) Wo^T + bo

Math, the softmax Jacobian-vector product and the mask's role in backward:
docs/attention.md (equations 1-14).
"""

import math
from collections import namedtuple

import numpy as np

from .._checks import cache_of, float_input, grad_output
from ..module import Module
from ._workspace import blockwise, buffer, scratch
from .dropout import Dropout
from .linear import Linear


class AttentionCache(namedtuple("AttentionCache", "q k v att att_d shape")):
    """What backward reads: the heads' (scaled) q, k, v (B, nh, T, hs), the attention weights
    (B, nh, T, T) before and after dropout, and the input's shape."""

    __slots__ = ()


class MultiHeadAttention(Module):
    """MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, rng=None)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, rng=None):
        super().__init__()
        if num_heads < 1 or d_out % num_heads != 0:
            raise ValueError(
                f"MultiHeadAttention: d_out ({d_out}) must be divisible by num_heads ({num_heads})"
            )
        rng = np.random.default_rng(rng)  # one stream for every part
        self.d_in, self.d_out, self.context_length = d_in, d_out, context_length
        self.num_heads, self.head_dim = num_heads, d_out // num_heads
        self.W_query = Linear(d_in, d_out, bias=qkv_bias, rng=rng)
        self.W_key = Linear(d_in, d_out, bias=qkv_bias, rng=rng)
        self.W_value = Linear(d_in, d_out, bias=qkv_bias, rng=rng)
        self.out_proj = Linear(d_out, d_out, rng=rng)
        self.dropout = Dropout(dropout, rng=rng)
        # as in the book: 1 above the diagonal marks the future positions a token may not see
        self.register_buffer("mask", np.triu(np.ones((context_length, context_length), np.float32), k=1))
        self.cache = None

    def _split_heads(self, t, B, T):
        return t.reshape(B, T, self.num_heads, self.head_dim).transpose(0, 2, 1, 3)  # (B, nh, T, hs)

    def _merge_heads(self, t, B, T):
        return t.transpose(0, 2, 1, 3).reshape(B, T, self.d_out)  # (B, T, d_out)

    def forward(self, x):
        """x: (B, T, d_in) with T <= context_length -> out: (B, T, d_out)."""
        x = float_input("MultiHeadAttention.forward", "x", x, self.dtype, last_dim=self.d_in)
        if x.ndim != 3:
            raise ValueError(f"MultiHeadAttention.forward: x must be (B, T, d_in), got shape {x.shape}")
        B, T, _ = x.shape
        if T > self.context_length:
            raise ValueError(
                f"MultiHeadAttention.forward: x has T = {T} tokens (shape {x.shape}), more than "
                f"context_length = {self.context_length}"
            )
        # speed (docs/bench.md): 1/sqrt(hs) scales q, T x hs, instead of the T x T scores; the
        # scores live in a buffer kept across calls; mask and softmax run in place, in row blocks
        # on every core; an identity dropout is skipped rather than copying the T x T weights
        q = self.W_query.forward(x)  # (B, T, d_out)   eq. 1
        q *= 1.0 / math.sqrt(self.head_dim)  # eq. 13, the scaling, moved onto q
        q = self._split_heads(q, B, T)  # (B, nh, T, hs), scaled
        k = self._split_heads(self.W_key.forward(x), B, T)  # (B, nh, T, hs)
        v = self._split_heads(self.W_value.forward(x), B, T)  # (B, nh, T, hs)
        att = buffer(self, "att", (B, self.num_heads, T, T), x.dtype)  # (B, nh, T, T)
        np.matmul(q, k.swapaxes(-2, -1), out=att)  # scores = q k^T / sqrt(hs)   eq. 2
        future = self.mask[:T, :T].astype(bool)  # (T, T)
        reach = self._reach(future)  # (T,)

        def masked_softmax(scores, pos):  # a block of rows of att and their query positions
            c = int(reach[pos[:, 0]].max())  # no row of the block sees a column past c:
            scores[:, c:] = 0.0  # eq. 3 there sets the weights to exactly 0, without exp and sums
            s = scores[:, :c]  # (rows, c)
            np.copyto(s, -np.inf, where=future[pos[:, 0], :c])  # eq. 3: the future gets zero weight
            s -= s.max(-1, keepdims=True)  # softmax, eq. 4, with the row max subtracted
            np.exp(s, out=s)
            s /= s.sum(-1, keepdims=True)

        blockwise(masked_softmax, att, self._positions(B, T))  # att: (B, nh, T, T)
        identity = not self.training or self.dropout.p == 0.0
        att_d = att if identity else self.dropout.forward(att)  # (B, nh, T, T)   eq. 5
        ctx = att_d @ v  # (B, nh, T, hs)   eq. 6
        out = self.out_proj.forward(self._merge_heads(ctx, B, T))  # (B, T, d_out)   eq. 7
        # kept for backward: the heads' (scaled) q, k, v and the attention weights before/after dropout
        self.cache = AttentionCache(q, k, v, att, att_d, x.shape)
        return out

    @staticmethod
    def _reach(future):
        """(T,) for each query position, 1 + the last key position the mask lets it see."""
        T = future.shape[-1]
        return T - np.argmax(~future[:, ::-1], axis=1)  # (T,); T for a row the mask hides entirely

    def _positions(self, B, T):
        """(B * nh * T, 1) query position of each row of att viewed as (B * nh * T, T)."""
        return np.tile(np.arange(T), B * self.num_heads)[:, None]

    def backward(self, dout):
        """dout: (B, T, d_out) -> dx: (B, T, d_in); adds into every Linear's gradients."""
        q, k, v, att, att_d, shape = cache_of(self, self.cache)
        B, T, _ = shape
        dout = grad_output(self, dout, (B, T, self.d_out), q.dtype)
        # forward: out = merge(ctx) @ Wo^T + bo
        dctx = self._split_heads(self.out_proj.backward(dout), B, T)  # (B, nh, T, hs)   eq. 8
        # forward: ctx = att_d @ v
        # one T x T scratch shared by every layer (it is dead when backward returns), reused
        datt_d = scratch("MultiHeadAttention.datt", att.shape, att.dtype)  # (B, nh, T, T)
        np.matmul(dctx, v.swapaxes(-2, -1), out=datt_d)  # eq. 9
        dv = att_d.swapaxes(-2, -1) @ dctx  # (B, nh, T, hs)
        datt = datt_d if att_d is att else self.dropout.backward(datt_d)  # (B, nh, T, T)   eq. 10
        reach = self._reach(self.mask[:T, :T].astype(bool))  # (T,)

        def softmax_backward(datt, att, pos):  # a block of rows; datt becomes dscores in place
            # forward: att = softmax(scores); eq. 11, the Jacobian-vector product:
            # dscores = att * (datt - sum_j(datt * att)); eq. 12: masked entries have att = 0,
            # so their gradient is exactly 0 and nothing flows to the future
            c = int(reach[pos[:, 0]].max())  # columns past c are masked for every row of the block
            datt[:, c:] = 0.0  # eq. 12
            d, a = datt[:, :c], att[:, :c]  # (rows, c)
            d -= (d * a).sum(-1, keepdims=True)
            d *= a  # eq. 11

        blockwise(softmax_backward, datt, att, self._positions(B, T))
        dscores = datt  # (B, nh, T, T)
        # forward: scores = q_scaled @ k^T with q_scaled = q / sqrt(hs)
        dq = dscores @ k  # (B, nh, T, hs)
        dq *= 1.0 / math.sqrt(self.head_dim)  # eq. 13, the scaling
        dk = dscores.swapaxes(-2, -1) @ q  # (B, nh, T, hs), q already scaled
        # eq. 14: x fed all three projections, so their input gradients add up
        dx = self.W_query.backward(self._merge_heads(dq, B, T))  # (B, T, d_in)
        dx += self.W_key.backward(self._merge_heads(dk, B, T))
        dx += self.W_value.backward(self._merge_heads(dv, B, T))
        return dx
