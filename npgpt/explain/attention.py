"""`npgpt explain attention`: docs/attention.md, step by step (dropout off; docs/dropout.md and
`npgpt explain dropout` show it on its own).
"""

import math

import numpy as np

from .steps import Explanation, Step, _diff, _dout, _floats, _hand, _round_params


def explain_attention(x=None, seed=0, dout=None, d_out=4, num_heads=2, qkv_bias=False):
    from ..layers.attention import MultiHeadAttention

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
