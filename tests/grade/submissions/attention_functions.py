"""Causal attention in the CS231n function form, weights (in, out); with switchable mistakes.

MISTAKE is replaced by the tests' copies: "none", "elementwise" (softmax treated elementwise in
backward), "noscale" (no 1/sqrt(hs) in forward or backward), "nomask_bwd" (the backward uses the
softmax of the unmasked scores).
"""

import math

import numpy as np

MISTAKE = "none"


def softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def attention_forward(x, w_query, w_key, w_value, w_out, b_out, num_heads):
    B, T, _ = x.shape
    d = w_query.shape[1]
    hs = d // num_heads

    def split(t):
        return t.reshape(B, T, num_heads, hs).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_query), split(x @ w_key), split(x @ w_value)
    scale = 1.0 if MISTAKE == "noscale" else 1.0 / math.sqrt(hs)
    raw = q @ k.transpose(0, 1, 3, 2) * scale
    att = softmax(np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, raw))
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, d)
    cache = (x, q, k, v, att, softmax(raw), y, w_query, w_key, w_value, w_out, scale)
    return y @ w_out + b_out, cache


def attention_backward(dout, cache):
    x, q, k, v, att, att_unmasked, y, wq, wk, wv, wo, scale = cache
    B, T, d = y.shape
    nh, hs = q.shape[1], q.shape[3]

    def split(t):
        return t.reshape(B, T, nh, hs).transpose(0, 2, 1, 3)

    def merge(t):
        return t.transpose(0, 2, 1, 3).reshape(B, T, d)

    dwo = y.reshape(-1, d).T @ dout.reshape(-1, d)
    dbo = dout.reshape(-1, d).sum(0)
    dctx = split(dout @ wo.T)
    datt = dctx @ v.transpose(0, 1, 3, 2)
    dv = att.transpose(0, 1, 3, 2) @ dctx
    a = att_unmasked if MISTAKE == "nomask_bwd" else att
    if MISTAKE == "elementwise":
        ds = datt * a * (1.0 - a)
    else:
        ds = a * (datt - (datt * a).sum(-1, keepdims=True))
    ds = ds * scale
    dq, dk, dv = merge(ds @ k), merge(ds.transpose(0, 1, 3, 2) @ q), merge(dv)
    x2 = x.reshape(-1, x.shape[-1])
    dx = dq @ wq.T + dk @ wk.T + dv @ wv.T
    return dx, x2.T @ dq.reshape(-1, d), x2.T @ dk.reshape(-1, d), x2.T @ dv.reshape(-1, d), dwo, dbo
