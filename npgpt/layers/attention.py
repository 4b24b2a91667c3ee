"""Causal multi-head self-attention, as in the book's ch. 3 MultiHeadAttention.

    q, k, v = x Wq^T, x Wk^T, x Wv^T, split into nh heads of size hs = d_out / nh
    att = softmax(mask(q k^T / sqrt(hs))),  out = (dropout(att) v, heads merged) Wo^T + bo

Math, the softmax Jacobian-vector product and the mask's role in backward:
docs/attention.md (equations 1-14).
"""

import math

import numpy as np

from .._checks import cache_of, float_input, grad_output
from ..module import Module
from .dropout import Dropout
from .linear import Linear


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
        q = self._split_heads(self.W_query.forward(x), B, T)  # (B, nh, T, hs)   eq. 1
        k = self._split_heads(self.W_key.forward(x), B, T)  # (B, nh, T, hs)
        v = self._split_heads(self.W_value.forward(x), B, T)  # (B, nh, T, hs)
        att = q @ k.swapaxes(-2, -1)  # (B, nh, T, T)   eq. 2
        att *= 1.0 / math.sqrt(self.head_dim)
        future = self.mask[:T, :T].astype(bool)  # (T, T)
        att[..., future] = -np.inf  # eq. 3: the future gets zero weight
        att -= att.max(-1, keepdims=True)  # softmax, eq. 4, with the row max subtracted
        np.exp(att, out=att)
        att /= att.sum(-1, keepdims=True)  # (B, nh, T, T)
        att_d = self.dropout.forward(att)  # (B, nh, T, T)   eq. 5
        ctx = att_d @ v  # (B, nh, T, hs)   eq. 6
        out = self.out_proj.forward(self._merge_heads(ctx, B, T))  # (B, T, d_out)   eq. 7
        # kept for backward: the heads' q, k, v and the attention weights before/after dropout
        self.cache = (q, k, v, att, att_d, x.shape)
        return out

    def backward(self, dout):
        """dout: (B, T, d_out) -> dx: (B, T, d_in); adds into every Linear's gradients."""
        q, k, v, att, att_d, shape = cache_of(self, self.cache)
        B, T, _ = shape
        dout = grad_output(self, dout, (B, T, self.d_out), q.dtype)
        # forward: out = merge(ctx) @ Wo^T + bo
        dctx = self._split_heads(self.out_proj.backward(dout), B, T)  # (B, nh, T, hs)   eq. 8
        # forward: ctx = att_d @ v
        datt_d = dctx @ v.swapaxes(-2, -1)  # (B, nh, T, T)   eq. 9
        dv = att_d.swapaxes(-2, -1) @ dctx  # (B, nh, T, hs)
        datt = self.dropout.backward(datt_d)  # (B, nh, T, T)   eq. 10
        # forward: att = softmax(scores); eq. 11, the Jacobian-vector product:
        # dscores = att * (datt - sum_j(datt * att)); eq. 12: masked entries have att = 0,
        # so their gradient is exactly 0 and nothing flows to the future
        dscores = datt
        dscores -= (datt * att).sum(-1, keepdims=True)  # in place: datt is not used again
        dscores *= att  # (B, nh, T, T)
        dscores *= 1.0 / math.sqrt(self.head_dim)  # eq. 13, the scaling
        # forward: scores = q @ k^T
        dq = dscores @ k  # (B, nh, T, hs)
        dk = dscores.swapaxes(-2, -1) @ q  # (B, nh, T, hs)
        # eq. 14: x fed all three projections, so their input gradients add up
        dx = self.W_query.backward(self._merge_heads(dq, B, T))  # (B, T, d_in)
        dx += self.W_key.backward(self._merge_heads(dk, B, T))
        dx += self.W_value.backward(self._merge_heads(dv, B, T))
        return dx
