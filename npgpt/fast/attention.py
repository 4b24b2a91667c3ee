"""Causal multi-head self-attention, fast: the same function as npgpt/layers/attention.py (the
reference, which a property test holds this equal to), computed in tiles of query rows, each
against only the keys its rows may see (docs/attention.md, "Tiles"), with the weights in a
buffer kept across calls and mask and softmax run in place, in row blocks on the policy's
threads. A forward with a `KeyValues` (decoding) runs the reference's code.

The cache (`AttentionCache` below) keeps q scaled by 1/sqrt(hs) and the weights per tile;
`cache.weights()` gives them as the reference's (B, nh, T, T) array.
"""

import math
from collections import namedtuple

import numpy as np

from .._checks import cache_of, grad_output
from ..layers import attention as reference
from ._workspace import blockwise, buffer, scratch


class AttentionCache(namedtuple("AttentionCache", "q k v att att_d drop tiles shape")):
    """What backward reads: the heads' (scaled) q, k, v (B, nh, T, hs); the attention weights
    before and after dropout, one (B, nh, i1 - i0, c) array per tile of query rows (see
    MultiHeadAttention.forward); each tile's dropout cache (None without dropout); the tiles
    (i0, i1, lo, c); and the input's shape. `weights()` puts the tiles together."""

    __slots__ = ()

    def weights(self, dropped=False):
        """The attention weights as one (B, nh, T, T) array, 0 where masked (after dropout if `dropped`)."""
        B, T = self.shape[0], self.shape[1]
        tiles = self.att_d if dropped else self.att
        full = np.zeros((B, self.q.shape[1], T, T), self.q.dtype)  # (B, nh, T, T)
        for (i0, i1, _lo, c), a in zip(self.tiles, tiles):
            full[:, :, i0:i1, :c] = a
        return full


class MultiHeadAttention(reference.MultiHeadAttention):
    """MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, rng=None),
    fast; see npgpt/layers/attention.py."""

    tile_rows = 128  # query rows per tile (see forward); measured best here at T = 1024

    def forward(self, x, kv=None):
        """x: (B, T, d_in) with T <= context_length -> out: (B, T, d_out); kv as the reference's."""
        if kv is not None:  # decoding: short rows, nothing to differentiate
            return super().forward(x, kv)
        x = self._check_input(x, 0)
        B, T, _ = x.shape
        nh, hs = self.num_heads, self.head_dim
        # speed (docs/attention.md, "Tiles"): the weights are computed per tile of query rows,
        # each against only the keys its rows may see (about half of the T x T products and
        # memory at T = 1024), in one buffer kept across calls; 1/sqrt(hs) scales q, T x hs, not
        # the scores; mask and softmax run in place, in row blocks on every core
        q = self.W_query.forward(x)  # (B, T, d_out)   eq. 1
        q *= 1.0 / math.sqrt(hs)  # eq. 13, the scaling, moved onto q
        q = self._split_heads(q, B, T)  # (B, nh, T, hs), scaled
        k = self._split_heads(self.W_key.forward(x), B, T)  # (B, nh, T, hs)
        v = self._split_heads(self.W_value.forward(x), B, T)  # (B, nh, T, hs)
        future = self.mask[:T, :T].astype(bool)  # (T, T), True where eq. 3 masks
        tiles = self._tiles(future)
        att = self._tile_arrays(buffer(self, "att", (self._tiles_size(tiles, B),), x.dtype), tiles, B)
        att_d, drop = [], []
        # the dropout mask is drawn for all (B, nh, T, T) weights at once, as the reference's
        # dropout draws it, so one seed gives both the same mask; each tile takes its part
        keep = None if self._identity_dropout() else self.dropout.draw_mask((B, nh, T, T))
        ctx = np.empty((B, T, nh, hs), x.dtype)  # heads already merged: eq. 7 needs no copy
        for (i0, i1, lo, c), a in zip(tiles, att):  # rows i0:i1 see no key at or past c
            np.matmul(q[:, :, i0:i1], k[:, :, :c].swapaxes(-2, -1), out=a)  # (B, nh, rows, c)   eq. 2
            np.copyto(a[..., lo:], -np.inf, where=future[i0:i1, lo:c])  # eq. 3, the future masked
            blockwise(_softmax_rows, a)  # eq. 4
            a_d = a if keep is None else self.dropout.forward(a, mask=keep[:, :, i0:i1, :c])  # eq. 5
            att_d.append(a_d)
            drop.append(None if a_d is a else self.dropout.cache)
            np.matmul(a_d, v[:, :, :c], out=ctx.swapaxes(1, 2)[:, :, i0:i1])  # (B, nh, rows, hs)   eq. 6
        out = self.out_proj.forward(ctx.reshape(B, T, self.d_out))  # (B, T, d_out)   eq. 7
        # kept for backward: the heads' (scaled) q, k, v, the weights before/after dropout, per tile
        self.cache = AttentionCache(q, k, v, att, att_d, drop, tiles, x.shape)
        return out

    def _identity_dropout(self):
        return not self.training or self.dropout.p == 0.0  # skipped: no copy of the weights

    def _tiles(self, future):
        """(i0, i1, lo, c) for each tile of `tile_rows` query rows i0:i1: no row of it sees a key at
        or past c, and none is masked before key lo (for the causal mask: lo = i0 + 1, c = i1)."""
        T = future.shape[-1]
        if not (isinstance(self.tile_rows, int) and self.tile_rows >= 1):
            raise ValueError(f"MultiHeadAttention: tile_rows must be an int >= 1, got {self.tile_rows!r}")
        if T == 0:  # an empty sequence: no rows, no tiles
            return []
        reach = T - np.argmax(~future[:, ::-1], axis=1)  # (T,) 1 + the last key a row sees
        first = np.where(future.any(1), np.argmax(future, axis=1), T)  # (T,) its first masked key
        tiles = []
        for i0 in range(0, T, self.tile_rows):  # a few tiles (T / 128), not a loop over tokens
            i1 = min(i0 + self.tile_rows, T)
            c = int(reach[i0:i1].max())
            tiles.append((i0, i1, min(int(first[i0:i1].min()), c), c))
        return tiles

    def _tiles_size(self, tiles, B):
        return sum(B * self.num_heads * (i1 - i0) * c for i0, i1, _lo, c in tiles)

    def _tile_arrays(self, flat, tiles, B):
        """The tiles as C-contiguous (B, nh, i1 - i0, c) views, one after another in `flat`."""
        arrays, at = [], 0
        for i0, i1, _lo, c in tiles:
            shape = (B, self.num_heads, i1 - i0, c)
            arrays.append(flat[at : at + math.prod(shape)].reshape(shape))
            at += math.prod(shape)
        return arrays

    def backward(self, dout):
        """dout: (B, T, d_out) -> dx: (B, T, d_in); adds into every Linear's gradients."""
        q, k, v, att, att_d, drop, tiles, shape = cache_of(self, self.cache)
        B, T, _ = shape
        nh, hs = self.num_heads, self.head_dim
        dout = grad_output(self, dout, (B, T, self.d_out), q.dtype)
        # forward: out = merge(ctx) @ Wo^T + bo
        dctx = self._split_heads(self.out_proj.backward(dout), B, T)  # (B, nh, T, hs)   eq. 8
        # one scratch for the tiles' gradients, shared by every layer (dead when backward returns)
        size = self._tiles_size(tiles, B)
        datt = self._tile_arrays(scratch("MultiHeadAttention.datt", (size,), q.dtype), tiles, B)
        # dv, dq, dk: (B, T, nh, hs), heads merged, written through (B, nh, T, hs) views;
        # dv and dk sum the parts of every tile whose rows saw those keys
        dv, dk = np.zeros((B, T, nh, hs), q.dtype), np.zeros((B, T, nh, hs), q.dtype)
        dq = np.empty((B, T, nh, hs), q.dtype)
        # speed: a tile's part of dv or dk is written in that merged layout too, into one scratch,
        # so adding it is one contiguous pass; a fresh (B, nh, c, hs) product added through a
        # strided view, 64 elements at a time, took 2x as long (dv at T = 1024: 24 ms, now 10)
        part = scratch("MultiHeadAttention.part", (B, T, nh, hs), q.dtype)  # (B, T, nh, hs)
        for (i0, i1, _lo, c), a, a_d, d_cache, d in zip(tiles, att, att_d, drop, datt):
            # forward: ctx = att_d @ v
            np.matmul(dctx[:, :, i0:i1], v[:, :, :c].swapaxes(-2, -1), out=d)  # datt_d   eq. 9
            np.matmul(a_d.swapaxes(-2, -1), dctx[:, :, i0:i1], out=part.swapaxes(1, 2)[:, :, :c])  # eq. 9
            dv[:, :c] += part[:, :c]  # (B, c, nh, hs)
            if d_cache is not None:  # forward: att_d = dropout(att)
                self.dropout.cache = d_cache
                d = self.dropout.backward(d)  # datt   eq. 10
            # forward: att = softmax(scores); in place, datt becomes dscores   eq. 11-12
            blockwise(_softmax_backward_rows, d, a)
            # forward: scores = q_scaled @ k^T with q_scaled = q / sqrt(hs)
            np.matmul(d, k[:, :, :c], out=dq.swapaxes(1, 2)[:, :, i0:i1])
            np.matmul(d.swapaxes(-2, -1), q[:, :, i0:i1], out=part.swapaxes(1, 2)[:, :, :c])
            dk[:, :c] += part[:, :c]  # (B, c, nh, hs); q was already scaled
        dq *= 1.0 / math.sqrt(hs)  # eq. 13, the scaling
        # eq. 14: x fed all three projections, so their input gradients add up
        dx = self.W_query.backward(dq.reshape(B, T, self.d_out))  # (B, T, d_in)
        dx += self.W_key.backward(dk.reshape(B, T, self.d_out))
        dx += self.W_value.backward(dv.reshape(B, T, self.d_out))
        return dx


def _softmax_rows(s):
    """A block of rows of scores, in place: softmax over each row (masked entries are -inf)."""
    s -= s.max(-1, keepdims=True)  # softmax, eq. 4, with the row max subtracted
    np.exp(s, out=s)
    s /= np.einsum("ij->i", s)[:, None]  # row sums (einsum: measured 2x faster than s.sum(-1))


def _softmax_backward_rows(datt, att):
    """A block of rows, in place: datt becomes dscores."""
    # eq. 11, the Jacobian-vector product: dscores = att * (datt - sum_j(datt * att));
    # eq. 12: masked entries have att = 0, so their gradient is exactly 0
    datt -= np.einsum("ij,ij->i", datt, att)[:, None]  # row dot products, no (rows, c) temporary
    datt *= att
