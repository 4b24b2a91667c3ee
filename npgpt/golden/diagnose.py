"""What went wrong at the first divergence: computed, never guessed.

The reference step is run again in float64 from the dump's parameters and inputs, with every
module call's inputs, output, dout and dx kept (record.py). For the diverging tensor, each
module call that produced it (an `act/`) or added into it (a `dact/`: the calls whose backward
finished just before it) is asked for its known mistakes: the same call's output or dx from a
mutant, the reference class with one step overridden (the mistakes the grader recognizes). A
mistake is named when the other implementation's tensor agrees with the mistaken value and not
with the reference. Non-finite values are checked against what overflows: exp of the largest
attention score or logit in the other implementation's dtype.
"""

import copy
import math

import numpy as np

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


# ---- each component's known mistakes, as mutants of the reference -----------------------------
# A mutant is the reference class with one step overridden (npgpt/layers/*.py name their steps:
# LayerNorm.rstd, GELU.du_dx, MultiHeadAttention.scores, ...). It runs on a copy of the module
# the call used, on the call's own input (and dout): "out" mistakes change the forward output,
# "dx" mistakes the gradient the backward returns.
S2PI = math.sqrt(2.0 / math.pi)
COEF = 0.044715
_erf = np.vectorize(math.erf)


def _ln_input_grad(term2=True, term3=True, scaled=True):
    def input_grad(self, dxhat, xhat, rstd, n):
        if not scaled:  # dxhat = dout, the scale never multiplied in
            dxhat = dxhat / np.where(self.scale.data == 0, 1.0, self.scale.data)
        dx = dxhat.copy()
        if term2:
            dx -= dxhat.mean(-1, keepdims=True)
        if term3:
            dx -= xhat * (dxhat * xhat).sum(-1, keepdims=True) / n
        return dx * rstd

    return input_grad


def _ln_plain_forward(self, x):
    LayerNorm.forward(self, x)
    return self.cache.xhat.copy()


def _gelu_forward(f):
    def forward(self, x):
        GELU.forward(self, x)
        return f(np.asarray(x, np.float64))

    return forward


def _linear_t_forward(self, x):
    self.cache = x.copy()
    return x @ self.weight.data + (self.bias.data if self.bias is not None else 0.0)


def _linear_t_backward(self, dout):
    return dout @ self.weight.data.T


def _softmax_no_shift(self, masked):
    e = np.exp(masked)
    return e / e.sum(-1, keepdims=True)


MUTANTS = {  # class -> (description, "out" | "dx", {step: replacement} or a function of the module)
    LayerNorm: [
        ("LayerNorm: eps added outside the square root (use 1/sqrt(var + eps))", "out",
         {"rstd": lambda self, var: 1.0 / (np.sqrt(var) + self.eps)}),
        ("LayerNorm: the unbiased variance (divided by C - 1, LayerNorm divides by C)", "out",
         {"variance": lambda self, xmu, n: (xmu * xmu).sum(-1, keepdims=True) / (xmu.shape[-1] - 1)}),
        ("LayerNorm: no scale and shift applied", "out", {"forward": _ln_plain_forward}),
        ("LayerNorm backward: the mean term is missing (dx lacks - mean(dxhat) over the row)", "dx",
         {"input_grad": _ln_input_grad(term2=False)}),
        ("LayerNorm backward: the variance term is missing (dx lacks - xhat * mean(dxhat * xhat) over the row)",
         "dx", {"input_grad": _ln_input_grad(term3=False)}),
        ("LayerNorm backward: dout not multiplied by scale (dxhat = dout * scale)", "dx",
         {"input_grad": _ln_input_grad(scaled=False)}),
    ],
    GELU: [
        ("GELU: the exact erf GELU (GPT-2 uses the tanh approximation)", "out",
         {"forward": _gelu_forward(lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))))}),
        ("GELU: the 0.044715 x^3 term is missing", "out", {"u": lambda self, x: S2PI * x}),
        ("GELU: the sigmoid form x * sigmoid(1.702 x)", "out",
         {"forward": _gelu_forward(lambda x: x / (1.0 + np.exp(-1.702 * x)))}),
        ("GELU backward: the factor 3 is missing from the cubic term's derivative "
         "(du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2))", "dx",
         {"du_dx": lambda self, x: S2PI * (1.0 + COEF * (x * x))}),
        ("GELU backward: the cubic term's derivative is missing (du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2))",
         "dx", {"du_dx": lambda self, x: S2PI + 0.0 * x}),
        ("GELU backward: the 1 - tanh^2 factor is missing (d tanh(u)/du = 1 - tanh(u)^2)", "dx",
         {"local_grad": lambda self, x, t: 0.5 * (1.0 + t) + 0.5 * x * self.du_dx(x)}),
        ("GELU backward: the product rule's 0.5 (1 + tanh(u)) term is missing", "dx",
         {"local_grad": lambda self, x, t: 0.5 * x * (1.0 - t * t) * self.du_dx(x)}),
        ("GELU backward: the exact-erf derivative Phi(x) + x phi(x) instead of the tanh form's", "dx",
         {"local_grad": lambda self, x, t: 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))
          + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)}),
    ],
    Linear: [
        ("Linear: the weight used transposed (out = x @ W + b; a Linear computes x @ W^T + b)", "out",
         {"forward": _linear_t_forward}),
        ("Linear backward: the weight used transposed (dx = dout @ W^T; it should be dout @ W)", "dx",
         {"backward": _linear_t_backward}),
    ],
    MultiHeadAttention: [
        ("attention: the causal mask not applied (a token sees later tokens)", "out",
         lambda m: m.register_buffer("mask", np.zeros_like(m.mask))),
        ("attention: scores not scaled by 1/sqrt(head_dim)", "out",
         {"scores": lambda self, q, k: q @ k.swapaxes(-2, -1)}),
        ("attention: scores scaled by 1/head_dim, not 1/sqrt(head_dim)", "out",
         {"scores": lambda self, q, k: (q @ k.swapaxes(-2, -1)) / self.head_dim}),
        ("attention: scores scaled by 1/sqrt(emb_dim), not 1/sqrt(head_dim)", "out",
         {"scores": lambda self, q, k: (q @ k.swapaxes(-2, -1)) / math.sqrt(self.d_out)}),
        ("attention backward: softmax treated as elementwise (att * (1 - att) instead of the Jacobian)", "dx",
         {"softmax_backward": lambda self, datt, att: datt * att * (1.0 - att)}),
        ("attention backward: the 1/sqrt(head_dim) scaling missing", "dx",
         {"scores_backward": lambda self, ds, q, k: (ds @ k, ds.swapaxes(-2, -1) @ q)}),
    ],
}  # fmt: skip


def _mutant(module, change):
    """A copy of `module` (float64) as a subclass of its class with `change` applied."""
    m = copy.deepcopy(module)
    for _, sub in m.named_modules():  # no recording hooks in the copy
        sub.__dict__.pop("forward", None)
        sub.__dict__.pop("backward", None)
        sub.__dict__.pop("_hooks", None)
    if callable(change):
        change(m)
    else:
        m.__class__ = type(f"Mistaken{type(module).__name__}", (type(module),), dict(change))
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
