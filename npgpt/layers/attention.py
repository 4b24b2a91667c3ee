"""Causal multi-head self-attention, as in the book's ch. 3 MultiHeadAttention.

    q, k, v = x Wq^T, x Wk^T, x Wv^T, split into nh heads of size hs = d_out / nh
    att = softmax(mask(q k^T / sqrt(hs))),  out = (dropout(att) v, heads merged) Wo^T + bo

Math, the softmax Jacobian-vector product and the mask's role in backward:
docs/attention.md (equations 1-14). The steps `scores`, `softmax` (with its `row_max`),
`softmax_backward` and `scores_backward` are methods so a variant can replace one of them
(npgpt/mistakes.py).

Decoding one token at a time (npgpt/generate.py) passes a `KeyValues` to `forward`: the keys
and values of the positions seen before, to which this call's are appended.
"""

import math
from collections import namedtuple

import numpy as np

from .._checks import cache_of, float_input, grad_output, size
from ..module import Module
from .dropout import Dropout
from .linear import Linear


class AttentionCache(namedtuple("AttentionCache", "q k v att att_d shape")):
    """What backward reads: the heads' q, k, v (B, nh, T, hs), the attention weights before and
    after dropout (B, nh, T, T), and x's shape."""

    __slots__ = ()

    def weights(self, dropped=False):
        """The attention weights (B, nh, T, T), 0 where masked (after dropout if `dropped`)."""
        return self.att_d if dropped else self.att


class KeyValues:
    """The keys and values (B, nh, t, hs) of the t positions a decoder has seen so far."""

    def __init__(self):
        self.k = self.v = None

    def __len__(self):
        return 0 if self.k is None else self.k.shape[2]


class MultiHeadAttention(Module):
    """MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, rng=None)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, rng=None):
        super().__init__()
        d_in, d_out = size("MultiHeadAttention", "d_in", d_in), size("MultiHeadAttention", "d_out", d_out)
        context_length = size("MultiHeadAttention", "context_length", context_length, low=1)
        num_heads = size("MultiHeadAttention", "num_heads", num_heads, low=1)
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

    def _check_input(self, x, past):
        x = float_input("MultiHeadAttention.forward", "x", x, self.dtype, last_dim=self.d_in)
        if x.ndim != 3:
            raise ValueError(f"MultiHeadAttention.forward: x must be (B, T, d_in), got shape {x.shape}")
        if past + x.shape[1] > self.context_length:
            raise ValueError(
                f"MultiHeadAttention.forward: x has T = {x.shape[1]} tokens (shape {x.shape})"
                + (f" after {past} cached" if past else "")
                + f", more than context_length = {self.context_length}"
            )
        return x

    def forward(self, x, kv=None):
        """x: (B, T, d_in) with T <= context_length -> out: (B, T, d_out).

        kv: None for training. For decoding, a `KeyValues` holding the t earlier positions:
        x is then positions t .. t + T - 1, attends to all of them, and its keys and values are
        appended to kv. No backward follows such a call (inference only).
        """
        t0 = 0 if kv is None else len(kv)  # positions before x
        x = self._check_input(x, t0)
        B, T, _ = x.shape
        q = self._split_heads(self.W_query.forward(x), B, T)  # (B, nh, T, hs)   eq. 1
        k = self._split_heads(self.W_key.forward(x), B, T)  # (B, nh, T, hs)
        v = self._split_heads(self.W_value.forward(x), B, T)  # (B, nh, T, hs)
        if kv is not None and t0 > 0:  # the earlier positions' keys and values come first
            k = np.concatenate([kv.k, k], axis=2)  # (B, nh, t0 + T, hs)
            v = np.concatenate([kv.v, v], axis=2)  # (B, nh, t0 + T, hs)
        scores = self.scores(q, k)  # (B, nh, T, t0 + T)   eq. 2
        future = self.mask[t0 : t0 + T, : t0 + T].astype(bool)  # (T, t0 + T), True where s > t
        masked = np.where(future, -np.inf, scores)  # (B, nh, T, t0 + T)   eq. 3
        att = self.softmax(masked)  # (B, nh, T, t0 + T)   eq. 4
        att_d = self.dropout.forward(att)  # (B, nh, T, t0 + T)   eq. 5
        ctx = att_d @ v  # (B, nh, T, hs)   eq. 6
        out = self.out_proj.forward(self._merge_heads(ctx, B, T))  # (B, T, d_out)   eq. 7
        if kv is None:  # kept for backward: q, k, v and the weights before/after dropout
            self.cache = AttentionCache(q, k, v, att, att_d, x.shape)
        else:
            kv.k, kv.v = k, v
            self.cache = None  # decoding: nothing to differentiate
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
        dv = att_d.swapaxes(-2, -1) @ dctx  # (B, nh, T, hs)   eq. 9
        # forward: att_d = dropout(att)
        datt = self.dropout.backward(datt_d)  # (B, nh, T, T)   eq. 10
        # forward: att = softmax(masked); masked entries get 0 (eq. 12)
        dscores = self.softmax_backward(datt, att)  # (B, nh, T, T)   eq. 11
        # forward: scores = q @ k^T / sqrt(hs)
        dq, dk = self.scores_backward(dscores, q, k)  # (B, nh, T, hs) each   eq. 13
        # eq. 14: x fed all three projections, so their input gradients add up; eq. 15: each
        # projection's backward adds its own weight (and bias) gradient
        dx = self.W_query.backward(self._merge_heads(dq, B, T))  # (B, T, d_in)
        dx += self.W_key.backward(self._merge_heads(dk, B, T))
        dx += self.W_value.backward(self._merge_heads(dv, B, T))
        return dx

    # ---- the steps ---------------------------------------------------------------------------
    def scores(self, q, k):
        """q (B, nh, T, hs), k (B, nh, S, hs) -> q k^T / sqrt(hs) (B, nh, T, S)   eq. 2"""
        return (q @ k.swapaxes(-2, -1)) / math.sqrt(self.head_dim)

    def softmax(self, masked):
        """Softmax over the last axis, the row max subtracted so exp cannot overflow   eq. 4"""
        e = np.exp(masked - self.row_max(masked))  # exp(-inf) = 0: the future
        return e / e.sum(-1, keepdims=True)

    def row_max(self, masked):
        """The largest score of each row (B, nh, T, 1), subtracted before exp   eq. 4"""
        return masked.max(-1, keepdims=True, initial=-np.inf)  # (initial: T = 0 has no max)

    def softmax_backward(self, datt, att):
        """dscores = att * (datt - sum_s(datt * att)), the Jacobian-vector product   eq. 11"""
        return att * (datt - (datt * att).sum(-1, keepdims=True))

    def scores_backward(self, dscores, q, k):
        """(dq, dk) from dscores (B, nh, T, S): dqk = dscores / sqrt(hs), dq = dqk k, dk = dqk^T q   eq. 13"""
        dqk = dscores / math.sqrt(self.head_dim)  # (B, nh, T, S)
        return dqk @ k, dqk.swapaxes(-2, -1) @ q
