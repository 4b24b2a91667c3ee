"""`npgpt explain attention`: docs/attention.md gate by gate (g1-g10 and back, the softmax taken
apart into exp, sum and quotient), dropout on with its mask, then the closed forms (eq. 11,
15), checked against the reference module's cache, output and every parameter gradient.
`attention_gates` and `attention_backward_gates` serve the block and model explainers too.
"""

import math

import numpy as np

from .steps import Explanation, Step, _diff, _dout, _floats, _hand, _keep_mask, _round_params

PROJ = ("W_query", "W_key", "W_value")


def attention_params(mha):
    """The module's parameters by their names: W_query.weight, ..., out_proj.bias."""
    return {name: p.data for name, p in mha.named_parameters()}


def _split(t, nh):
    B, T, d = t.shape
    return t.reshape(B, T, nh, d // nh).transpose(0, 2, 1, 3)  # (B, nh, T, hs)


def _merge(t):
    B, nh, T, hs = t.shape
    return t.transpose(0, 2, 1, 3).reshape(B, T, nh * hs)  # (B, T, d_out)


def attention_gates(x, P, nh, keep, p_drop):
    """The forward gates g1-g10 of docs/attention.md, by hand. P: the parameters by name;
    keep: the dropout keep-mask (B, nh, T, T), an input like x."""
    f = {"x": x}
    for name, key in zip(PROJ, "qkv"):  # g1
        bias = P.get(f"{name}.bias", 0.0)
        f[key] = _split(x @ P[f"{name}.weight"].T + bias, nh)  # (B, nh, T, hs)
    hs = f["q"].shape[-1]
    T = x.shape[1]
    f["qk"] = f["q"] @ f["k"].transpose(0, 1, 3, 2)  # (B, nh, T, T)   g2
    f["scores"] = f["qk"] / math.sqrt(hs)  # g3
    future = np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T)
    f["masked"] = np.where(future, -np.inf, f["scores"])  # g4
    f["e"] = np.exp(f["masked"] - f["masked"].max(-1, keepdims=True))  # g5
    f["sumexp"] = f["e"].sum(-1, keepdims=True)  # (B, nh, T, 1)   g6
    f["att"] = f["e"] / f["sumexp"]  # g7
    f["scale"] = 0.0 if p_drop == 1.0 else 1.0 / (1.0 - p_drop)
    f["keep"] = keep
    f["att_d"] = f["att"] * keep * f["scale"]  # g8
    f["ctx"] = f["att_d"] @ f["v"]  # (B, nh, T, hs)   g9
    f["merged"] = _merge(f["ctx"])  # (B, T, d_out)   g10
    f["out"] = f["merged"] @ P["out_proj.weight"].T + P["out_proj.bias"]
    return f


def attention_backward_gates(f, P, dout):
    """The backward gates g10-g1 of docs/attention.md, by hand, in that order."""
    nh, hs = f["q"].shape[1], f["q"].shape[-1]
    d_out = dout.shape[-1]
    x2 = f["x"].reshape(-1, f["x"].shape[-1])  # (N, d_in)
    b = {"dout": dout}
    b["dout_proj.weight"] = dout.reshape(-1, d_out).T @ f["merged"].reshape(-1, d_out)  # g10
    b["dout_proj.bias"] = dout.reshape(-1, d_out).sum(0)
    b["dctx"] = _split(dout @ P["out_proj.weight"], nh)  # (B, nh, T, hs)
    b["datt_d"] = b["dctx"] @ f["v"].transpose(0, 1, 3, 2)  # (B, nh, T, T)   g9
    b["dv"] = f["att_d"].transpose(0, 1, 3, 2) @ b["dctx"]  # (B, nh, T, hs)
    b["datt"] = b["datt_d"] * f["keep"] * f["scale"]  # g8
    de = b["datt"] / f["sumexp"]  # g7, first part
    b["dsumexp"] = -(b["datt"] * f["e"]).sum(-1, keepdims=True) / (f["sumexp"] * f["sumexp"])
    b["de"] = de + b["dsumexp"]  # g6, second part (the same for every s)
    b["dmasked"] = b["de"] * f["e"]  # g5
    b["dmax"] = -b["dmasked"].sum(-1, keepdims=True)  # g5: the max's gradient, 0
    b["dscores"] = np.where(np.isneginf(f["masked"]), 0.0, b["dmasked"])  # g4
    b["dqk"] = b["dscores"] / math.sqrt(hs)  # g3
    b["dq"] = b["dqk"] @ f["k"]  # g2
    b["dk"] = b["dqk"].transpose(0, 1, 3, 2) @ f["q"]
    dx = 0.0
    for name, key in zip(PROJ, ("dq", "dk", "dv")):  # g1
        g = _merge(b[key])  # (B, T, d_out)
        b[f"d{name}.weight"] = g.reshape(-1, d_out).T @ x2  # (d_out, d_in)
        if f"{name}.bias" in P:
            b[f"d{name}.bias"] = g.reshape(-1, d_out).sum(0)
        dx = dx + g @ P[f"{name}.weight"]
    b["dx"] = dx  # (B, T, d_in)
    return b


def explain_attention(x=None, seed=0, dout=None, d_out=4, num_heads=2, qkv_bias=False, dropout=0.5):
    from ..layers.attention import MultiHeadAttention

    rng = np.random.default_rng(seed)
    x = _floats("attention", x, _hand(rng, (1, 3, 4)), 3)
    B, T, d_in = x.shape
    mha = MultiHeadAttention(d_in, d_out, T, dropout, num_heads, qkv_bias=qkv_bias, rng=rng)
    mha = _round_params(mha)
    P = attention_params(mha)
    out_m = mha.forward(x)  # the reference first: its dropout draws the mask
    cache = mha.cache
    att_m, att_d_m = cache.weights(), cache.weights(dropped=True)
    keep = _keep_mask(att_m, att_d_m)
    f = attention_gates(x, P, num_heads, keep, dropout)
    hs = d_out // num_heads
    e = Explanation(
        "attention",
        f"MultiHeadAttention(d_in={d_in}, d_out={d_out}, num_heads={num_heads}"
        f"{', qkv_bias=True' if qkv_bias else ''}), dropout {dropout:g}",
        "docs/attention.md",
    )
    e.forward = [Step("x", x, "", "input (B, T, d_in)")]
    e.forward += [Step(name, value, "", "parameter") for name, value in P.items()]
    e.forward += [
        Step("q", f["q"], "g1", "x W_query^T" + (" + b" if qkv_bias else "") + ", split into heads"),
        Step("k", f["k"], "g1", "x W_key^T, split"),
        Step("v", f["v"], "g1", "x W_value^T, split"),
        Step("qk", f["qk"], "g2", "q k^T per head"),
        Step("scores", f["scores"], "g3", f"qk / sqrt(hs), hs = {hs}"),
        Step("masked", f["masked"], "g4", "-inf above the diagonal (the future)"),
        Step("e", f["e"], "g5", "exp(masked - row max)"),
        Step("sumexp", f["sumexp"], "g6", "row sums of e"),
        Step("att", f["att"], "g7", "e / sumexp: softmax over each row"),
        Step("keep", keep.astype(np.int64), "g8", f"the module's dropout mask, p = {dropout:g}"),
        Step("att_d", f["att_d"], "g8", f"att * keep * {f['scale']:g}"),
        Step("ctx", f["ctx"], "g9", "att_d v"),
        Step("merged", f["merged"], "g10", "heads side by side (B, T, d_out)"),
        Step("out", f["out"], "g10", "merged out_proj^T + out_proj.bias"),
    ]
    dout = _dout(rng, dout, f["out"].shape, "attention")
    b = attention_backward_gates(f, P, dout)
    notes = {
        "dout_proj.weight": ("g10", "dout^T merged (eq. 8)"),
        "dout_proj.bias": ("g10", "dout summed over positions (eq. 8)"),
        "dctx": ("g10", "dout out_proj, split into heads (eq. 8)"),
        "datt_d": ("g9", "dctx v^T (eq. 9)"),
        "dv": ("g9", "att_d^T dctx (eq. 9)"),
        "datt": ("g8", "datt_d * keep * scale (eq. 10)"),
        "dsumexp": ("g7", "-sum(datt * e) / sumexp^2"),
        "de": ("g6", "datt / sumexp + dsumexp (both parts)"),
        "dmasked": ("g5", "de * e"),
        "dmax": ("g5", "-sum(dmasked): the max's gradient, 0"),
        "dscores": ("g4", "dmasked, 0 above the diagonal (eq. 12)"),
        "dqk": ("g3", "dscores / sqrt(hs) (eq. 13)"),
        "dq": ("g2", "dqk k (eq. 13)"),
        "dk": ("g2", "dqk^T q (eq. 13)"),
    }
    e.backward = [Step("dout", dout, "", f"upstream gradient (seed {seed})")]
    e.backward += [Step(k, b[k], *notes[k]) for k in notes]
    for name in PROJ:
        e.backward.append(Step(f"d{name}.weight", b[f"d{name}.weight"], "g1", "merge(d..)^T x (eq. 15)"))
        if qkv_bias:
            e.backward.append(Step(f"d{name}.bias", b[f"d{name}.bias"], "g1", "merge(d..) summed (eq. 15)"))
    e.backward.append(Step("dx", b["dx"], "g1", "the three projections' dx added (eq. 14)"))
    a = f["att"]
    dscores11 = a * (b["datt"] - (b["datt"] * a).sum(-1, keepdims=True))  # eq. 11
    e.checks.append(("eq. 11 = the gates' dscores", _diff((dscores11, b["dscores"]))))
    e.checks.append(
        (
            "npgpt.MultiHeadAttention cache: q k v att att_d",
            _diff(
                (cache.q, f["q"]),
                (cache.k, f["k"]),
                (cache.v, f["v"]),
                (att_m, f["att"]),
                (att_d_m, f["att_d"]),
            ),
        )
    )
    e.checks.append(("npgpt.MultiHeadAttention.forward", _diff((out_m, f["out"]))))
    dx_m = mha.backward(dout)
    pairs = [(dx_m, b["dx"])] + [(p.grad, b[f"d{name}"]) for name, p in mha.named_parameters()]
    e.checks.append(("npgpt.MultiHeadAttention.backward", _diff(*pairs)))
    return e
