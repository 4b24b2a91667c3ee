"""What went wrong at the first divergence: computed, never guessed.

The reference step is run again in float64 from the dump's parameters and inputs, with every
module call's inputs, output, dout and dx kept (record.py). For the diverging tensor, each
module call that produced it (an `act/`) or added into it (a `dact/`: the calls whose backward
finished just before it) is asked for its known mistakes: the same call's output or dx from a
mutant, the reference class with one step overridden (npgpt/mistakes.py, the catalogue the
grader reads too). A mistake is named when the other implementation's tensor agrees with the
mistaken value and not with the reference. Non-finite values are checked against what overflows: exp of the largest
attention score or logit in the other implementation's dtype.
"""

import copy
import math

import numpy as np

from .. import mistakes
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


# ---- each component's known mistakes, from npgpt/mistakes.py (shared with the grader) -----------
# A mutant is the reference class with one step overridden (npgpt/layers/*.py name their steps:
# LayerNorm.rstd, LayerNorm.mean_term, GELU.du_dx, MultiHeadAttention.scores, ...) or the
# reference with one setting changed. It runs on a copy of the module the call used, on the
# call's own input (and dout): "out" mistakes change the forward output, "dx" mistakes the
# gradient the backward returns. `npgpt grade` and `npgpt compare` recognize the same mistakes in
# the same way.
# class -> (description, "out" | "dx", a mistake class, or a change to a copy of the module)
MUTANTS = {
    LayerNorm: [
        ("LayerNorm: eps added outside the square root (use 1/sqrt(var + eps))", "out", mistakes.EpsOutsideTheRoot),
        ("LayerNorm: the unbiased variance (divided by C - 1, LayerNorm divides by C)", "out",
         mistakes.unbiased_variance),
        ("LayerNorm: no scale and shift applied", "out", mistakes.unit_norm),
        ("LayerNorm backward: the mean term is missing (dx lacks - mean(dxhat) over the row)", "dx",
         mistakes.NoMeanTerm),
        ("LayerNorm backward: the variance term is missing (dx lacks - xhat * mean(dxhat * xhat) over the row)",
         "dx", mistakes.NoVarianceTerm),
        ("LayerNorm backward: dout not multiplied by scale (dxhat = dout * scale)", "dx", mistakes.unit_scale),
    ],
    GELU: [
        *((f"GELU: the {desc}", "out", cls) for desc, cls in mistakes.GELU_FORWARDS.items()),
        ("GELU backward: the factor 3 is missing from the cubic term's derivative "
         "(du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2))", "dx", mistakes.NoThree),
        *((f"GELU backward: {desc}", "dx", cls) for desc, cls in mistakes.GELU_BACKWARDS.items()),
    ],
    Linear: [
        ("Linear: the weight used transposed (out = x @ W + b; a Linear computes x @ W^T + b)", "out",
         mistakes.transposed_weight),
        ("Linear backward: the weight used transposed (dx = dout @ W^T; it should be dout @ W)", "dx",
         mistakes.transposed_weight),
    ],
    MultiHeadAttention: [
        ("attention: the causal mask not applied (a token sees later tokens)", "out", mistakes.no_mask),
        ("attention: scores not scaled by 1/sqrt(head_dim)", "out", mistakes.NoScaleForward),
        ("attention: scores scaled by 1/head_dim, not 1/sqrt(head_dim)", "out", mistakes.ScoresOverHeadDim),
        ("attention: scores scaled by 1/sqrt(emb_dim), not 1/sqrt(head_dim)", "out",
         mistakes.ScoresOverSqrtEmbDim),
        ("attention backward: softmax treated as elementwise (att * (1 - att) instead of the Jacobian)", "dx",
         mistakes.ElementwiseSoftmax),
        ("attention backward: the 1/sqrt(head_dim) scaling missing", "dx", mistakes.NoScaleBackward),
        ("attention backward: the mask ignored (softmax of the unmasked scores)", "dx",
         mistakes.UnmaskedSoftmaxBackward),
    ],
}  # fmt: skip


def _mutant(module, change):
    """A copy of `module` (float64) as a subclass of its class with `change` applied."""
    m = copy.deepcopy(module)
    for _, sub in m.named_modules():  # no recording hooks in the copy
        sub.__dict__.pop("forward", None)
        sub.__dict__.pop("backward", None)
        sub.__dict__.pop("_hooks", None)
    if isinstance(change, type):
        m.__class__ = change  # a subclass of the reference class with one step overridden
    else:
        change(m)  # other parameter values or buffers
    return m


def _variants(call):
    """(description, kind, thunk) for each known mistake of the call's module."""
    for cls, mutants in MUTANTS.items():
        if not isinstance(call.module, cls):
            continue
        for desc, kind, change in mutants:
            if kind == "dx" and call.dout is None:
                continue
            if cls is Linear and call.module.weight.data.shape[0] != call.module.weight.data.shape[1]:
                continue  # a transposed non-square weight cannot be multiplied: the shapes say so

            def thunk(change=change, kind=kind):
                m = _mutant(call.module, change)
                out = m.forward(call.inputs[0])
                return out if kind == "out" else m.backward(call.dout)

            yield desc, kind, thunk


def _max_score(call):
    """The largest attention score q.k / sqrt(hs) a token may see: the row max that a softmax
    without the max shift leaves out (the reference's own scores, mask and row max)."""
    m = _mutant(call.module, mistakes.NoMaxShift)
    with np.errstate(all="ignore"):
        m.forward(call.inputs[0])
    return m.skipped


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
            try:
                with np.errstate(all="ignore"):
                    alt = np.asarray(thunk(), np.float64)
            except (ValueError, TypeError, IndexError, FloatingPointError):
                continue  # a mistake that cannot even run on this call's shapes is not this one
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
