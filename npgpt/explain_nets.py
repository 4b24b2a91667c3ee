"""`npgpt explain` for the composite components: feed-forward, causal attention, the block.

Same contract as npgpt/explain.py: each step is computed from its docs page's equations
(docs/feedforward.md, docs/attention.md, docs/block.md), then compared with the module.
Dropout is off (p = 0) here; docs/dropout.md and `npgpt explain dropout` show it on its own.
"""

import copy
import math

import numpy as np

from .explain import Explanation, Step, _diff, _dout, _floats, _hand, _round_params, gelu_parts


def explain_feedforward(x=None, seed=0, dout=None, emb_dim=2):
    from .layers.feedforward import FeedForward

    rng = np.random.default_rng(seed)
    x = _floats("feedforward", x, _hand(rng, (1, 2, emb_dim)), 1)
    ff = _round_params(FeedForward({"emb_dim": x.shape[-1]}, rng=rng))
    W1, b1, W2, b2 = (p.data for p in ff.parameters())
    h = x @ W1.T + b1  # (..., 4E)
    _, _, g, _, dgelu = gelu_parts(h)  # (..., 4E)
    out = g @ W2.T + b2  # (..., E)
    e = Explanation(
        "feedforward", f"FeedForward(emb_dim={x.shape[-1]}): Linear, GELU, Linear", "docs/feedforward.md"
    )
    e.forward = [
        Step("x", x, "", "input (..., E)"),
        Step("W1", W1, "", "layers.0.weight (4E, E)"),
        Step("b1", b1, "", "layers.0.bias"),
        Step("h", h, "eq. 1", "x W1^T + b1"),
        Step("g", g, "eq. 2", "GELU(h)"),
        Step("W2", W2, "", "layers.2.weight (E, 4E)"),
        Step("b2", b2, "", "layers.2.bias"),
        Step("out", out, "eq. 3", "g W2^T + b2"),
    ]
    dout = _dout(rng, dout, out.shape, "feedforward")
    dW2 = dout.reshape(-1, W2.shape[0]).T @ g.reshape(-1, W2.shape[1])  # (E, 4E)
    db2 = dout.reshape(-1, W2.shape[0]).sum(0)  # (E,)
    dg = dout @ W2  # (..., 4E)
    dh = dg * dgelu  # (..., 4E)
    dW1 = dh.reshape(-1, W1.shape[0]).T @ x.reshape(-1, W1.shape[1])  # (4E, E)
    db1 = dh.reshape(-1, W1.shape[0]).sum(0)  # (4E,)
    dx = dh @ W1  # (..., E)
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dW2", dW2, "eq. 4", "dout^T g, summed over positions"),
        Step("db2", db2, "eq. 4"),
        Step("dg", dg, "eq. 4", "dout W2"),
        Step("dh", dh, "eq. 5", "dg * GELU'(h)"),
        Step("dW1", dW1, "eq. 6", "dh^T x"),
        Step("db1", db1, "eq. 6"),
        Step("dx", dx, "eq. 6", "dh W1"),
    ]
    e.checks.append(("npgpt.FeedForward.forward", _diff((ff.forward(x), out))))
    dx_m = ff.backward(dout)
    grads = [p.grad for p in ff.parameters()]
    e.checks.append(("npgpt.FeedForward.backward", _diff((dx_m, dx), *zip(grads, (dW1, db1, dW2, db2)))))
    return e


def explain_attention(x=None, seed=0, dout=None, d_out=4, num_heads=2, qkv_bias=False):
    from .layers.attention import MultiHeadAttention

    rng = np.random.default_rng(seed)
    x = _floats("attention", x, _hand(rng, (1, 3, 4)), 3)
    B, T, d_in = x.shape
    mha = _round_params(MultiHeadAttention(d_in, d_out, T, 0.0, num_heads, qkv_bias=qkv_bias, rng=rng))
    nh, hs = num_heads, d_out // num_heads
    lin = {
        name: (m.weight.data, 0.0 if m.bias is None else m.bias.data)
        for name, m in (("q", mha.W_query), ("k", mha.W_key), ("v", mha.W_value), ("o", mha.out_proj))
    }

    def split(t):
        return t.reshape(B, T, nh, hs).transpose(0, 2, 1, 3)  # (B, nh, T, hs)

    def merge(t):
        return t.transpose(0, 2, 1, 3).reshape(B, T, d_out)  # (B, T, d_out)

    q, k, v = (split(x @ lin[n][0].T + lin[n][1]) for n in "qkv")  # (B, nh, T, hs) each
    qk = q @ k.transpose(0, 1, 3, 2)  # (B, nh, T, T)
    scores = qk / math.sqrt(hs)
    future = np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T)
    masked = np.where(future, -np.inf, scores)
    ex = np.exp(masked - masked.max(-1, keepdims=True))
    att = ex / ex.sum(-1, keepdims=True)  # (B, nh, T, T)
    ctx = att @ v  # (B, nh, T, hs)
    merged = merge(ctx)
    out = merged @ lin["o"][0].T + lin["o"][1]  # (B, T, d_out)
    e = Explanation(
        "attention",
        f"MultiHeadAttention(d_in={d_in}, d_out={d_out}, num_heads={nh}), dropout 0",
        "docs/attention.md",
    )
    e.forward = [
        Step("x", x, "", "input (B, T, d_in)"),
        Step("q", q, "eq. 1", "x W_query^T, split into heads"),
        Step("k", k, "eq. 1", "x W_key^T, split"),
        Step("v", v, "eq. 1", "x W_value^T, split"),
        Step("qk", qk, "eq. 2", "q k^T per head"),
        Step("scores", scores, "eq. 2", f"qk / sqrt(hs), hs = {hs}"),
        Step("masked", masked, "eq. 3", "-inf above the diagonal (the future)"),
        Step("att", att, "eq. 4", "softmax over each row"),
        Step("att_d", att, "eq. 5", "dropout(att) = att (p = 0)"),
        Step("ctx", ctx, "eq. 6", "att_d v"),
        Step("merged", merged, "eq. 7", "heads side by side (B, T, d_out)"),
        Step("out", out, "eq. 7", "merged W_out^T + b_out"),
    ]
    dout = _dout(rng, dout, out.shape, "attention")
    Wo = lin["o"][0]
    dWo = dout.reshape(-1, d_out).T @ merged.reshape(-1, d_out)  # (d_out, d_out)
    dctx = split(dout @ Wo)  # (B, nh, T, hs)
    datt = dctx @ v.transpose(0, 1, 3, 2)  # (B, nh, T, T)
    dv = att.transpose(0, 1, 3, 2) @ dctx  # (B, nh, T, hs)
    dscores = att * (datt - (datt * att).sum(-1, keepdims=True))  # (B, nh, T, T)
    dqk = dscores / math.sqrt(hs)
    dq, dk = dqk @ k, dqk.transpose(0, 1, 3, 2) @ q  # (B, nh, T, hs) each
    x2 = x.reshape(-1, d_in)
    dW = {n: merge(d).reshape(-1, d_out).T @ x2 for n, d in (("q", dq), ("k", dk), ("v", dv))}
    dx = sum(merge(d) @ lin[n][0] for n, d in (("q", dq), ("k", dk), ("v", dv)))  # (B, T, d_in)
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dW_out", dWo, "eq. 8", "dout^T merged (Linear eq. 2)"),
        Step("dctx", dctx, "eq. 8", "dout W_out, split into heads"),
        Step("datt_d", datt, "eq. 9", "dctx v^T"),
        Step("dv", dv, "eq. 9", "att_d^T dctx"),
        Step("datt", datt, "eq. 10", "= datt_d (p = 0)"),
        Step("dscores", dscores, "eq. 11", "att * (datt - sum(datt * att)); 0 above the diagonal (eq. 12)"),
        Step("dqk", dqk, "eq. 13", "dscores / sqrt(hs)"),
        Step("dq", dq, "eq. 13", "dqk k"),
        Step("dk", dk, "eq. 13", "dqk^T q"),
        Step("dx", dx, "eq. 14", "dq W_query + dk W_key + dv W_value (heads merged)"),
    ]
    e.checks.append(("npgpt.MultiHeadAttention.forward", _diff((mha.forward(x), out))))
    dx_m = mha.backward(dout)
    pairs = [
        (dx_m, dx),
        (mha.out_proj.weight.grad, dWo),
        (mha.W_query.weight.grad, dW["q"]),
        (mha.W_key.weight.grad, dW["k"]),
        (mha.W_value.weight.grad, dW["v"]),
    ]
    e.checks.append(("npgpt.MultiHeadAttention.backward", _diff(*pairs)))
    return e


def explain_block(x=None, seed=0, dout=None, emb_dim=4, n_heads=2):
    from .layers.block import TransformerBlock

    rng = np.random.default_rng(seed)
    x = _floats("block", x, _hand(rng, (1, 3, emb_dim)), 3)
    cfg = {
        "emb_dim": x.shape[-1],
        "context_length": x.shape[1],
        "n_heads": n_heads,
        "drop_rate": 0.0,
        "qkv_bias": False,
    }
    block = _round_params(TransformerBlock(cfg, rng=rng))
    own = copy.deepcopy(block)  # the branches, run one module at a time
    a1 = own.norm1.forward(x)
    h1 = own.att.forward(a1)
    x1 = x + h1  # (B, T, E)
    a2 = own.norm2.forward(x1)
    h2 = own.ff.forward(a2)
    out = x1 + h2  # (B, T, E)
    e = Explanation(
        "block", f"TransformerBlock(emb_dim={cfg['emb_dim']}, n_heads={n_heads}), dropout 0", "docs/block.md"
    )
    e.forward = [
        Step("x", x, "", "input (B, T, E)"),
        Step("a1", a1, "eq. 1", "norm1(x)"),
        Step("h1", h1, "eq. 1", "att(a1) (drop_shortcut is the identity at p = 0)"),
        Step("x1", x1, "eq. 1", "x + h1: the first shortcut"),
        Step("a2", a2, "eq. 2", "norm2(x1)"),
        Step("h2", h2, "eq. 2", "ff(a2)"),
        Step("out", out, "eq. 2", "x1 + h2: the second shortcut"),
    ]
    dout = _dout(rng, dout, out.shape, "block")
    dx1_branch = own.norm2.backward(own.ff.backward(dout))
    dx1 = dout + dx1_branch
    dx_branch = own.norm1.backward(own.att.backward(dx1))
    dx = dx1 + dx_branch
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dx1_branch", dx1_branch, "eq. 3", "norm2.backward(ff.backward(dout))"),
        Step("dx1", dx1, "eq. 3", "dout + dx1_branch: dout flows straight through"),
        Step("dx_branch", dx_branch, "eq. 4", "norm1.backward(att.backward(dx1))"),
        Step("dx", dx, "eq. 4", "dx1 + dx_branch"),
    ]
    e.checks.append(("npgpt.TransformerBlock.forward", _diff((block.forward(x), out))))
    dx_m = block.backward(dout)
    pairs = [(p.grad, q.grad) for p, q in zip(block.parameters(), own.parameters())]
    e.checks.append(("npgpt.TransformerBlock.backward", _diff((dx_m, dx), *pairs)))
    return e


EXPLAINERS = {"feedforward": explain_feedforward, "attention": explain_attention, "block": explain_block}
