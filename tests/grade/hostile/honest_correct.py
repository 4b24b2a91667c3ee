"""A correct submission of every component, written independently of npgpt's layers.

In the hostile suite: an honest neighbour (marker npgpt-hostile-honest-7d3e) that must keep its
full marks and whose text no other submission may read.

Only Module, Parameter and Sequential come from npgpt; each forward/backward is written out here.
"""

import math

import numpy as np

from npgpt import Module, Parameter, Sequential


class LayerNorm(Module):
    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.scale = Parameter(np.ones(emb_dim))
        self.shift = Parameter(np.zeros(emb_dim))

    def forward(self, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        self.rstd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (x - mean) * self.rstd
        return self.xhat * self.scale.data + self.shift.data

    def backward(self, dout):
        C = dout.shape[-1]
        self.scale.grad += (dout * self.xhat).reshape(-1, C).sum(0)
        self.shift.grad += dout.reshape(-1, C).sum(0)
        g = dout * self.scale.data
        return self.rstd * (
            g - g.mean(-1, keepdims=True) - self.xhat * (g * self.xhat).mean(-1, keepdims=True)
        )


class GELU(Module):
    def forward(self, x):
        c = math.sqrt(2.0 / math.pi)
        self.x = x
        self.t = np.tanh(c * (x + 0.044715 * x * x * x))
        return 0.5 * x * (1.0 + self.t)

    def backward(self, dout):
        c = math.sqrt(2.0 / math.pi)
        x, t = self.x, self.t
        return dout * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x))


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = Parameter(np.zeros((out_features, in_features)))
        self.bias = Parameter(np.zeros(out_features)) if bias else None

    def forward(self, x):
        self.x = x
        out = x @ self.weight.data.T
        return out + self.bias.data if self.bias is not None else out

    def backward(self, dout):
        d_out, d_in = self.weight.data.shape
        self.weight.grad += dout.reshape(-1, d_out).T @ self.x.reshape(-1, d_in)
        if self.bias is not None:
            self.bias.grad += dout.reshape(-1, d_out).sum(0)
        return dout @ self.weight.data


class FeedForward(Module):
    def __init__(self, cfg):
        super().__init__()
        E = cfg["emb_dim"]
        self.layers = Sequential(Linear(E, 4 * E), GELU(), Linear(4 * E, E))

    def forward(self, x):
        return self.layers.forward(x)

    def backward(self, dout):
        return self.layers.backward(dout)


class MultiHeadAttention(Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.nh, self.hs, self.d_out = num_heads, d_out // num_heads, d_out
        self.W_query = Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = Linear(d_out, d_out)

    def split(self, t):
        B, T, _ = t.shape
        return t.reshape(B, T, self.nh, self.hs).transpose(0, 2, 1, 3)

    def merge(self, t):
        B, _, T, _ = t.shape
        return t.transpose(0, 2, 1, 3).reshape(B, T, self.d_out)

    def forward(self, x):
        T = x.shape[1]
        q, k, v = self.split(self.W_query(x)), self.split(self.W_key(x)), self.split(self.W_value(x))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(self.hs)
        s = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, s)
        e = np.exp(s - s.max(-1, keepdims=True))
        att = e / e.sum(-1, keepdims=True)
        self.saved = (q, k, v, att)
        return self.out_proj(self.merge(att @ v))

    def backward(self, dout):
        q, k, v, att = self.saved
        dctx = self.split(self.out_proj.backward(dout))
        datt = dctx @ v.transpose(0, 1, 3, 2)
        dv = att.transpose(0, 1, 3, 2) @ dctx
        ds = att * (datt - (datt * att).sum(-1, keepdims=True)) / math.sqrt(self.hs)
        dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q
        dx = self.W_query.backward(self.merge(dq))
        dx = dx + self.W_key.backward(self.merge(dk))
        return dx + self.W_value.backward(self.merge(dv))


class Identity(Module):
    def forward(self, x):
        return x

    def backward(self, dout):
        return dout


class TransformerBlock(Module):
    def __init__(self, cfg):
        super().__init__()
        E = cfg["emb_dim"]
        self.att = MultiHeadAttention(
            E, E, cfg["context_length"], cfg["drop_rate"], cfg["n_heads"], cfg["qkv_bias"]
        )
        self.ff = FeedForward(cfg)
        self.norm1 = LayerNorm(E)
        self.norm2 = LayerNorm(E)
        self.drop_shortcut = Identity()  # drop_rate is 0 when graded

    def forward(self, x):
        x1 = x + self.att(self.norm1(x))
        return x1 + self.ff(self.norm2(x1))

    def backward(self, dout):
        dx1 = dout + self.norm2.backward(self.ff.backward(dout))
        return dx1 + self.norm1.backward(self.att.backward(dx1))


class CrossEntropyLoss(Module):
    def __init__(self, ignore_index=-100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits, targets):
        V = logits.shape[-1]
        z = logits.reshape(-1, V)
        y = targets.reshape(-1)
        keep = y != self.ignore_index
        y = np.where(keep, y, 0)
        z = z - z.max(-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        self.saved = (logp, y, keep, logits.shape)
        return float(-(logp[np.arange(len(y)), y] * keep).sum() / keep.sum())

    def backward(self, dout=1.0):
        logp, y, keep, shape = self.saved
        d = np.exp(logp)
        d[np.arange(len(y)), y] -= 1.0
        return (d * keep[:, None] * (float(dout) / int(keep.sum()))).reshape(shape)
