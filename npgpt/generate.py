"""Sampling from a GPTModel with a key/value cache.

`KVCache` is an inference path through the model's own modules (docs/model.md): every module
runs its usual forward on the new positions only, and attention gets a `KeyValues` per layer
(npgpt/layers/attention.py), the keys and values of the tokens seen so far, to which its forward
appends the new ones. So a new token costs one position's work: its q, k, v, one row of
attention scores, one MLP row.

When the cache is full (context_length positions) the window slides: the cache is rebuilt
from the last context_length // 2 tokens, since the positional embeddings of every cached
token change when the window moves.
"""

import numpy as np

from .layers.attention import KeyValues


class KVCache:
    """One `KeyValues` per layer: the keys and values (B, nh, t, hs) of the t positions so far."""

    def __init__(self, model):
        self.model = model
        self.layers = [KeyValues() for _ in model.trf_blocks]
        self.length = 0

    def reset(self):
        self.layers = [KeyValues() for _ in self.layers]
        self.length = 0

    def forward(self, idx):
        """idx: (B, T) new token ids at positions length .. length + T - 1 -> logits (B, T, V)."""
        m = self.model
        idx = np.asarray(idx)
        B, T = idx.shape
        if self.length + T > m.cfg["context_length"]:
            raise ValueError(
                f"KVCache.forward: {self.length} cached + {T} new positions exceed context_length "
                f"{m.cfg['context_length']}"
            )
        pos = np.arange(self.length, self.length + T)  # (T,)
        x = m.tok_emb.forward(idx) + m.pos_emb.forward(pos)  # (B, T, E)
        for i, blk in enumerate(m.trf_blocks):
            x = x + blk.att.forward(blk.norm1.forward(x), kv=self.layers[i])  # (B, T, E)
            x = x + blk.ff.forward(blk.norm2.forward(x))  # (B, T, E)
        self.length += T
        return m.out_head.forward(m.final_norm.forward(x))  # (B, T, V)


def sample_next(logits, temperature, top_k, rng):
    """logits: (B, V) -> next ids (B,). temperature 0 is greedy; top_k keeps the k largest."""
    if temperature == 0.0:
        return logits.argmax(-1)
    z = logits.astype(np.float64) / temperature  # (B, V)
    if top_k is not None and top_k < z.shape[-1]:
        kth = np.partition(z, -top_k, axis=-1)[:, -top_k][:, None]  # (B, 1)
        z = np.where(z < kth, -np.inf, z)
    cdf = np.exp(z - z.max(-1, keepdims=True)).cumsum(-1)  # (B, V), unnormalized
    cdf /= cdf[:, -1:]  # ends at exactly 1
    u = 1.0 - rng.random((len(cdf), 1))  # (B, 1) in (0, 1]: inverse-CDF sampling
    return (cdf < u).sum(-1)  # the first id whose cdf reaches u; never one of probability 0


def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, rng=None, use_cache=True):
    """Yield (B,) arrays of new token ids, one per step, continuing the prompt ids (B, T)."""
    if temperature < 0.0:
        raise ValueError(f"generate: temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"generate: top_k must be >= 1, got {top_k}")
    rng = np.random.default_rng(rng)
    model.eval()
    L = model.cfg["context_length"]
    seq = np.asarray(idx, dtype=np.int64)
    if seq.ndim != 2 or seq.shape[1] == 0:
        raise ValueError(f"generate: idx must be (B, T) with T >= 1 prompt tokens, got shape {seq.shape}")
    cache = KVCache(model)
    pending = seq[:, -L:]  # what the cache has not seen yet
    for _ in range(max_new_tokens):
        if not use_cache:
            logits = model.forward(seq[:, -L:])[:, -1]  # (B, V)
        else:
            if cache.length + pending.shape[1] > L:  # slide the window
                cache.reset()
                pending = seq[:, -(L // 2 or 1) :]
            logits = cache.forward(pending)[:, -1]  # (B, V)
        nxt = sample_next(logits, temperature, top_k, rng)  # (B,)
        seq = np.concatenate([seq, nxt[:, None]], axis=1)  # (B, T + 1)
        pending = nxt[:, None]
        yield nxt
