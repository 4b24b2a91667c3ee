"""PyTorch twins for `npgpt bench --torch-twin benchmarks/torch_twin.py` (needs torch; never
imported by npgpt itself, which has no torch dependency: the benchmark loads this file by path).

`book=True` is the book's ch. 3-4 module code (LayerNorm and GELU written out, the attention
mask and softmax by hand); `book=False` swaps in PyTorch's fused ops: F.layer_norm (what
nn.LayerNorm runs), F.gelu(approximate="tanh") and F.scaled_dot_product_attention. Both keep
the book's parameter names, so an npgpt state_dict loads into either.
"""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class LayerNorm(nn.Module):
    def __init__(self, emb_dim, book):
        super().__init__()
        self.eps, self.book = 1e-5, book
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x):
        if not self.book:
            return F.layer_norm(x, x.shape[-1:], self.scale, self.shift, self.eps)
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        return self.scale * ((x - mean) / torch.sqrt(var + self.eps)) + self.shift


class GELU(nn.Module):
    def __init__(self, book):
        super().__init__()
        self.book = book

    def forward(self, x):
        if not self.book:
            return F.gelu(x, approximate="tanh")
        return (
            0.5
            * x
            * (1 + torch.tanh(torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))))
        )


class FeedForward(nn.Module):
    def __init__(self, cfg, book):
        super().__init__()
        E = cfg["emb_dim"]
        self.layers = nn.Sequential(nn.Linear(E, 4 * E), GELU(book), nn.Linear(4 * E, E))

    def forward(self, x):
        return self.layers(x)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias, book):
        super().__init__()
        self.d_out, self.num_heads, self.head_dim, self.book = d_out, num_heads, d_out // num_heads, book
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, T, _ = x.shape
        q, k, v = (
            lin(x).view(b, T, self.num_heads, self.head_dim).transpose(1, 2)
            for lin in (self.W_query, self.W_key, self.W_value)
        )  # (b, nh, T, hs)
        if self.book:
            scores = q @ k.transpose(2, 3)
            scores.masked_fill_(self.mask.bool()[:T, :T], -torch.inf)
            att = self.dropout(torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1))
            ctx = att @ v
        else:
            p = self.dropout.p if self.training else 0.0
            ctx = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.out_proj(ctx.transpose(1, 2).contiguous().view(b, T, self.d_out))


class TransformerBlock(nn.Module):
    def __init__(self, cfg, book):
        super().__init__()
        E = cfg["emb_dim"]
        self.att = MultiHeadAttention(
            E, E, cfg["context_length"], cfg["drop_rate"], cfg["n_heads"], cfg["qkv_bias"], book
        )
        self.ff = FeedForward(cfg, book)
        self.norm1, self.norm2 = LayerNorm(E, book), LayerNorm(E, book)
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x):
        x = x + self.drop_shortcut(self.att(self.norm1(x)))
        return x + self.drop_shortcut(self.ff(self.norm2(x)))


class GPTModel(nn.Module):
    def __init__(self, cfg, book):
        super().__init__()
        V, E = cfg["vocab_size"], cfg["emb_dim"]
        self.tok_emb = nn.Embedding(V, E)
        self.pos_emb = nn.Embedding(cfg["context_length"], E)
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg, book) for _ in range(cfg["n_layers"])])
        self.final_norm = LayerNorm(E, book)
        self.out_head = nn.Linear(E, V, bias=False)

    def forward(self, idx):
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1]))
        return self.out_head(self.final_norm(self.trf_blocks(self.drop_emb(x))))


def like(np_module, cfg, book):
    """The torch twin of an npgpt component or GPTModel, with its weights, in float32."""
    name = type(np_module).__name__
    E = cfg["emb_dim"]
    if name == "MultiHeadAttention":
        m = MultiHeadAttention(
            E, E, cfg["context_length"], cfg["drop_rate"], cfg["n_heads"], cfg["qkv_bias"], book
        )
    else:
        m = {
            "LayerNorm": lambda: LayerNorm(E, book),
            "GELU": lambda: GELU(book),
            "FeedForward": lambda: FeedForward(cfg, book),
            "TransformerBlock": lambda: TransformerBlock(cfg, book),
            "GPTModel": lambda: GPTModel(cfg, book),
        }[name]()
    with torch.no_grad():
        m.load_state_dict(
            {
                k: torch.from_numpy(np.ascontiguousarray(v, np.float32))
                for k, v in np_module.state_dict().items()
            }
        )
    return m.float().train(np_module.training)


def fwd_bwd(module, x, dout):
    xt = torch.from_numpy(x).requires_grad_(True)
    dt = torch.from_numpy(dout)

    def fn():
        module(xt).backward(dt)
        xt.grad = None

    return fn


def step_fn(model, idx, targets):
    it, tt = torch.from_numpy(idx), torch.from_numpy(targets)

    def fn():
        logits = model(it)
        loss = F.cross_entropy(logits.flatten(0, 1), tt.flatten())
        loss.backward()
        return float(loss.detach())

    return fn


def info():
    return f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
