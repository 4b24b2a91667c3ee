"""What went wrong at the first divergence: computed, never guessed.

The reference step is run again in float64 from the dump's parameters and inputs, with every
module call's inputs, output, dout and dx kept (record.py). For the diverging tensor, each
module call that produced it (an `act/`) or added into it (a `dact/`: the calls whose backward
finished just before it) is asked for its known mistakes: the same call's output or dx with one
step done wrong, mostly computed by the grader's own variants (npgpt/grade/variants.py). A
mistake is named when the other implementation's tensor agrees with the mistaken value and not
with the reference. Non-finite values are checked against what overflows: exp of the largest
attention score or logit in the other implementation's dtype.
"""

import math

import numpy as np

from ..grade import variants as V
from ..layers.attention import MultiHeadAttention
from ..layers.gelu import GELU
from ..layers.layernorm import LayerNorm
from ..layers.linear import Linear
from .dump import make_model, normwise
from .record import record_step

RECENT = 16  # how many backward calls before a dact/ tensor may have added into it


def rerun(ref, manifest):
    """The reference step again, in float64, keeping every call -> Recording (or None)."""
    cfg = dict(manifest["cfg"])
    keep = float(manifest.get("dropout") or 0.0) > 0.0
    model = make_model(
        cfg,
        int(manifest.get("seed", 0)) if keep else 0,
        keep_dropout=keep,
        tied=bool(manifest.get("tied_out_head")),
    )
    sd = {k[len("param/") :]: np.asarray(a, np.float64) for k, a in ref.items() if k.startswith("param/")}
    model.load_state_dict(sd, strict=False)
    rec = record_step(model, np.asarray(ref["input/ids"]), np.asarray(ref["input/targets"]), keep_calls=True)
    for name, a in ref.items():  # the dropout draws must be the dump's
        if name.startswith("mask/") and not np.array_equal(rec.tensors.get(name), a):
            return None
    return rec


# ---- each component's known mistakes: (description, kind, thunk) with kind "out" or "dx" --------
def _layernorm(call):
    x, dout = call.inputs[0], call.dout
    m = call.module
    scale, shift = m.scale.data, m.shift.data
    C = x.shape[-1]
    yield (
        "LayerNorm: eps added outside the square root (use 1/sqrt(var + eps))",
        "out",
        lambda: V._ln(x, scale, shift, eps_outside=True, eps=m.eps),
    )
    yield (
        "LayerNorm: the unbiased variance (divided by C - 1, LayerNorm divides by C)",
        "out",
        lambda: V._ln(x, scale, shift, C - 1, eps=m.eps),
    )
    yield "LayerNorm: no scale and shift applied", "out", lambda: V._ln(x, 1.0, 0.0, eps=m.eps)
    if dout is None:
        return
    xmu = x - x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt((xmu * xmu).mean(-1, keepdims=True) + m.eps)
    xhat, dxhat = xmu * rstd, dout * scale
    dx = call.dx
    yield (
        "LayerNorm backward: the mean term is missing (dx lacks - mean(dxhat) over the row)",
        "dx",
        lambda: dx + rstd * dxhat.mean(-1, keepdims=True),
    )
    yield (
        "LayerNorm backward: the variance term is missing (dx lacks - xhat * mean(dxhat * xhat) over the row)",
        "dx",
        lambda: dx + rstd * xhat * (dxhat * xhat).mean(-1, keepdims=True),
    )
    yield (
        "LayerNorm backward: dout not multiplied by scale (dxhat = dout * scale)",
        "dx",
        lambda: rstd * (dout - dout.mean(-1, keepdims=True) - xhat * (dout * xhat).mean(-1, keepdims=True)),
    )


def _gelu(call):
    x, dout = call.inputs[0], call.dout
    fwd, grad = V.gelu_forms(x)
    for desc, v in fwd.items():
        yield f"GELU: the {desc}", "out", lambda v=v: v
    if dout is None:
        return
    for desc, g in grad.items():
        yield f"GELU backward: {desc}", "dx", lambda g=g: dout * g
    t = np.tanh(V.S2PI * (x + 0.044715 * x * x * x))
    no3 = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * V.S2PI * (1.0 + 0.044715 * x * x)
    yield (
        "GELU backward: the factor 3 is missing from the cubic term's derivative "
        "(du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2))",
        "dx",
        lambda: dout * no3,
    )


def _linear(call):
    x, dout, m = call.inputs[0], call.dout, call.module
    W = m.weight.data
    if W.shape[0] != W.shape[1]:
        return  # a transposed non-square weight cannot be multiplied: the shapes say it
    b = m.bias.data if m.bias is not None else 0.0
    yield (
        f"Linear: the weight used transposed (out = x @ W + b; PyTorch's Linear is x @ W^T + b, W is {W.shape})",
        "out",
        lambda: x @ W + b,
    )
    if dout is not None:
        yield (
            "Linear backward: the weight used transposed (dx = dout @ W^T; it should be dout @ W)",
            "dx",
            lambda: dout @ W.T,
        )


def _attention(call):
    x, dout, m = call.inputs[0], call.dout, call.module
    nh, hs, E = m.num_heads, m.head_dim, m.d_out
    # the grader's attention() has no q/k/v bias: fold it in as a column of ones on x
    P = {}
    ones = np.ones(x.shape[:-1] + (1,))
    xb = np.concatenate([x, ones], -1)
    for name in ("W_query", "W_key", "W_value"):
        lin = getattr(m, name)
        bias = lin.bias.data if lin.bias is not None else np.zeros(lin.weight.data.shape[0])
        P[f"{name}.weight"] = np.concatenate([lin.weight.data, bias[:, None]], 1)
    P["out_proj.weight"], P["out_proj.bias"] = m.out_proj.weight.data, m.out_proj.bias.data
    d = dout if dout is not None else np.zeros(x.shape[:-1] + (E,))

    def run(P=P, **kw):
        return V.attention(xb, P, nh, d, **kw)

    def rescaled(factor):  # scores scaled by `factor` instead of 1/sqrt(hs): through W_query
        Q = dict(P, **{"W_query.weight": P["W_query.weight"] * factor})
        return run(Q, scale_fwd=False, scale_bwd=False)["out"]

    yield (
        "attention: the causal mask not applied (a token sees later tokens)",
        "out",
        lambda: run(mask_fwd=False, mask_bwd=False)["out"],
    )
    yield "attention: scores not scaled by 1/sqrt(head_dim)", "out", lambda: rescaled(1.0)
    yield (
        f"attention: scores scaled by 1/head_dim (1/{hs}), not 1/sqrt(head_dim)",
        "out",
        lambda: rescaled(1.0 / hs),
    )
    yield (
        f"attention: scores scaled by 1/sqrt(emb_dim) (1/sqrt({E})), not 1/sqrt(head_dim)",
        "out",
        lambda: rescaled(1.0 / math.sqrt(E)),
    )
    if dout is None:
        return
    for desc, kw in (
        (
            "softmax treated as elementwise in backward (att * (1 - att) instead of the Jacobian)",
            {"elementwise": True},
        ),
        ("the 1/sqrt(head_dim) scaling missing in backward", {"scale_bwd": False}),
        ("the causal mask ignored in backward (softmax of the unmasked scores)", {"mask_bwd": False}),
    ):
        yield f"attention backward: {desc}", "dx", lambda kw=kw: run(**kw)["dx"][..., :-1]


TABLE = {LayerNorm: _layernorm, GELU: _gelu, Linear: _linear, MultiHeadAttention: _attention}


def _variants(call):
    for cls, fn in TABLE.items():
        if isinstance(call.module, cls):
            return fn(call)
    return iter(())


def _max_score(call):
    """The largest attention score q.k / sqrt(hs) a token may see, from the reference's q and k."""
    m, x = call.module, call.inputs[0]
    B, T, _ = x.shape
    split = lambda t: t.reshape(B, T, m.num_heads, m.head_dim).transpose(0, 2, 1, 3)  # noqa: E731
    q = split(m.W_query.forward(x)) / math.sqrt(m.head_dim)
    k = split(m.W_key.forward(x))
    s = q @ k.swapaxes(-1, -2)  # (B, nh, T, T)
    return float(np.max(np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, s)))


def diagnose(name, theirs, ref, manifest, allowed):
    """-> a list of sentences about the first divergence `name` (theirs: its array)."""
    out = []
    r = np.asarray(ref[name], np.float64) if name in ref else None
    t = np.asarray(theirs)
    if r is None or t.dtype.kind not in "fiu":
        return out
    t = t.astype(np.float64)
    if t.shape != r.shape:
        if t.ndim == 2 and t.shape == r.T.shape and normwise(t.T, r) <= max(allowed, 1e-9):
            return [f"{name} is the transpose of the reference (shape {t.shape}, expected {r.shape})"]
        return [f"{name} has shape {t.shape}, expected {r.shape}"]
    if t.ndim == 2 and t.shape[0] == t.shape[1] and normwise(t.T, r) <= max(allowed, 1e-9) < normwise(t, r):
        out.append(f"{name} is the transpose of the reference")
    try:
        rec = rerun(ref, manifest)
    except (ValueError, KeyError, RuntimeError, TypeError):
        rec = None
    if rec is None:
        return (
            out
            + _factor(name, t, r, allowed)
            + ["(no component diagnosis: the reference step could not be replayed from the dump)"]
        )
    nonfinite = not np.all(np.isfinite(t)) and np.all(np.isfinite(r))
    big = math.log(np.finfo(np.float32 if np.asarray(theirs).dtype.itemsize <= 4 else np.float64).max)
    tried = []
    if name.startswith("act/") or name == "logits":
        tag = "out_head" if name == "logits" else name[4:]
        calls = [
            c
            for c in rec.calls.values()
            if np.array_equal(c.out, rec.tensors.get(f"act/{tag}"))
            and (c is rec.calls.get(tag) or tag.startswith(c.path + "."))
        ]
        tried += [(c, "out") for c in calls]
    elif name.startswith("dact/"):
        tag = name[5:]
        i = rec.timeline.index(("pre", tag)) if ("pre", tag) in rec.timeline else len(rec.timeline)
        done = [rec.calls[tg] for when, tg in rec.timeline[:i] if when == "post"][-RECENT:]
        tried += [(c, "dx") for c in reversed(done) if c.dx is not None and np.shape(c.dx) == r.shape]
    for call, kind in tried:
        if nonfinite and kind == "out" and isinstance(call.module, MultiHeadAttention):
            s = _max_score(call)
            if s > big:
                out.append(
                    f"attention in {call.path}: the softmax does not subtract the row max; the largest score is "
                    f"{s:.4g} and exp overflows above {big:.4g}"
                )
        for desc, k, thunk in _variants(call):
            if k != kind:
                continue
            with np.errstate(all="ignore"):
                alt = np.asarray(thunk(), np.float64)
            if kind == "dx":  # theirs = ref + (their dx - our dx) when only this call's dx is wrong
                alt = r + (alt - np.asarray(call.dx, np.float64))
            if alt.shape != t.shape:
                continue
            err_alt, err_ref = normwise(t, alt), normwise(t, r)
            if err_alt <= max(allowed, 1e-9) and err_alt < err_ref / 10:
                where = (
                    call.path
                    if call.k == 0 and f"{call.path}#1" not in rec.calls
                    else f"{call.path}#{call.k}"
                )
                out.append(
                    f"{desc} [in {where}: matches to {err_alt:.2g}, the reference is off by {err_ref:.2g}]"
                )
    if name in ("loss", "logits", "dact/out_head") and not np.all(np.isfinite(t)) and np.all(np.isfinite(r)):
        z = np.asarray(ref["logits"], np.float64)
        zmax = float(np.max(z))
        if np.any(np.isnan(t)) and zmax > big:
            out.append(
                f"cross-entropy: the softmax / log-sum-exp does not subtract the row max; the largest logit is "
                f"{zmax:.4g} and exp overflows above {big:.4g}"
            )
        elif name == "loss" and np.any(np.isinf(t)):
            y = np.asarray(ref["input/targets"])[..., None]
            gap = float(np.max(z.max(-1) - np.take_along_axis(z, y, -1)[..., 0]))
            out.append(
                "cross-entropy: the log of a softmax probability that underflowed to 0 (a target's logit is "
                f"{gap:.4g} below its row's max); take log-softmax as z - max - log(sum(exp(z - max)))"
            )
    return out or _factor(name, t, r, allowed)


def _factor(name, t, r, allowed):
    """Theirs = k * reference for a constant k (when nothing more specific was found)."""
    out = []
    rr = float(np.sum(r * r))
    k = float(np.sum(t * r)) / rr if rr > 0 and np.all(np.isfinite(t)) else 1.0
    if abs(k - 1.0) > 1e-9 and normwise(t, k * r) <= max(allowed, 1e-9):
        what = {-1.0: "-1 (the sign is wrong)", 2.0: "2 (counted twice?)", 0.5: "1/2"}.get(
            round(k, 9), f"{k:.9g}"
        )
        out.append(f"{name} is the reference times a constant factor {what}")
    return out
