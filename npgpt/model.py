"""GPTModel: the book's ch. 4 GPT-2, token ids in, next-token logits out.

    x = drop_emb(tok_emb(idx) + pos_emb(arange(T)))
    logits = out_head(final_norm(trf_blocks(x)))

Math: docs/model.md. The backward runs the same chain in reverse and ends in the two
embeddings' scatter-adds; its input is integer ids, so it returns None.
"""

import numpy as np

from ._checks import cache_of, grad_output, index_input, size
from .layers.block import TransformerBlock
from .layers.dropout import Dropout
from .layers.embedding import Embedding
from .layers.layernorm import LayerNorm
from .layers.linear import Linear
from .module import Module, Sequential

GPT_CONFIG_124M = {
    "vocab_size": 50257,  # vocabulary size
    "context_length": 1024,  # context length
    "emb_dim": 768,  # embedding dimension
    "n_heads": 12,  # number of attention heads
    "n_layers": 12,  # number of layers
    "drop_rate": 0.1,  # dropout rate
    "qkv_bias": False,  # query-key-value bias
}


class GPTModel(Module):
    """GPTModel(cfg, rng=None): `tok_emb`, `pos_emb`, `drop_emb`, `trf_blocks`, `final_norm`, `out_head`."""

    def __init__(self, cfg, rng=None):
        super().__init__()
        rng = np.random.default_rng(rng)
        missing = [k for k in GPT_CONFIG_124M if k != "qkv_bias" and k not in cfg]
        if missing:
            raise ValueError(f"GPTModel: cfg is missing key(s) {', '.join(missing)}")
        size("GPTModel", "cfg['n_layers']", cfg["n_layers"])
        V, E, L = cfg["vocab_size"], cfg["emb_dim"], cfg["context_length"]
        self.cfg = dict(cfg)
        self.tok_emb = Embedding(V, E, rng=rng)
        self.pos_emb = Embedding(L, E, rng=rng)
        self.drop_emb = Dropout(cfg["drop_rate"], rng=rng)
        self.trf_blocks = Sequential(*[TransformerBlock(cfg, rng=rng) for _ in range(cfg["n_layers"])])
        self.final_norm = LayerNorm(E)
        self.out_head = Linear(E, V, bias=False, rng=rng)
        self.cache = None

    def forward(self, in_idx):
        """in_idx: (B, T) integer token ids, T <= context_length -> logits: (B, T, V)."""
        V, L = self.cfg["vocab_size"], self.cfg["context_length"]
        in_idx = index_input("GPTModel.forward", "in_idx", in_idx, V, ndim=2)
        B, T = in_idx.shape
        if T > L:
            raise ValueError(
                f"GPTModel.forward: in_idx has T = {T} tokens (shape {in_idx.shape}), more than "
                f"context_length = {L}"
            )
        tok = self.tok_emb.forward(in_idx)  # (B, T, E)   eq. 1
        pos = self.pos_emb.forward(np.arange(T))  # (T, E)
        x = self.drop_emb.forward(tok + pos)  # (B, T, E)   eq. 1
        x = self.trf_blocks.forward(x)  # (B, T, E)   eq. 2
        logits = self.out_head.forward(self.final_norm.forward(x))  # (B, T, V)   eq. 3
        self.cache = logits.shape
        return logits

    def backward(self, dlogits):
        """dlogits: (B, T, V) -> None; adds into every parameter's gradient."""
        shape = cache_of(self, self.cache)
        dlogits = grad_output(self, dlogits, shape, self.dtype)
        dx = self.final_norm.backward(self.out_head.backward(dlogits))  # (B, T, E)
        dx = self.drop_emb.backward(self.trf_blocks.backward(dx))  # (B, T, E)   eq. 4: dh_0
        # forward: h_0 = tok + pos, pos broadcast over the batch, so its gradient sums over B
        self.tok_emb.backward(dx)  # eq. 5 (a tied out_head adds eq. 6's second part)
        self.pos_emb.backward(dx.sum(0))  # (T, E)   eq. 4-5
        return None
