"""`npgpt explain layernorm`: docs/layernorm.md gate by gate (g1-g7 and back), then the closed
form (eq. 9), checked against the reference module's cache, output and gradients."""

import numpy as np

from .steps import Explanation, Step, _diff, _dout, _floats

# The book's ch. 4 LayerNorm example: the 2x6 output of Linear(5, 6) + ReLU at torch seed 123.
BOOK_LAYERNORM_INPUT = [[0.2260, 0.3470, 0.0, 0.2216, 0.0, 0.0], [0.2133, 0.2394, 0.0, 0.5198, 0.3297, 0.0]]


def layernorm_gates(x, scale, shift, eps, n):
    """The forward gates g1-g7 of docs/layernorm.md, by hand: a dict of every intermediate."""
    C = x.shape[-1]
    f = {"x": x}
    f["mu"] = x.sum(-1, keepdims=True) / C  # (..., 1)   g1
    f["xmu"] = x - f["mu"]  # (..., C)   g2
    f["xmu2"] = f["xmu"] * f["xmu"]  # (..., C)   g3
    f["var"] = f["xmu2"].sum(-1, keepdims=True) / n  # (..., 1)   g4
    f["rstd"] = 1.0 / np.sqrt(f["var"] + eps)  # (..., 1)   g5
    f["xhat"] = f["xmu"] * f["rstd"]  # (..., C)   g6
    f["out"] = scale * f["xhat"] + shift  # (..., C)   g7
    return f


def layernorm_backward_gates(f, scale, n, dout):
    """The backward gates g7-g1 of docs/layernorm.md, by hand, in that order."""
    C = dout.shape[-1]
    b = {"dout": dout}
    b["dshift"] = dout.reshape(-1, C).sum(0)  # (C,)   g7
    b["dscale"] = (dout * f["xhat"]).reshape(-1, C).sum(0)  # (C,)
    b["dxhat"] = dout * scale  # (..., C)
    b["drstd"] = (b["dxhat"] * f["xmu"]).sum(-1, keepdims=True)  # (..., 1)   g6
    dxmu = b["dxhat"] * f["rstd"]  # (..., C) first part
    b["dvar"] = -0.5 * f["rstd"] * f["rstd"] * f["rstd"] * b["drstd"]  # (..., 1)   g5
    b["dxmu2"] = np.broadcast_to(b["dvar"] / n, dout.shape)  # (..., C)   g4
    b["dxmu"] = dxmu + 2.0 * f["xmu"] * b["dxmu2"]  # (..., C)   g3: both parts
    b["dmu"] = -b["dxmu"].sum(-1, keepdims=True)  # (..., 1)   g2
    b["dx"] = b["dxmu"] + b["dmu"] / C  # (..., C)   g1: both parts
    return b


FORWARD = [
    ("mu", "g1", "sum(x) / C, each row"),
    ("xmu", "g2", "x - mu"),
    ("xmu2", "g3", "xmu^2"),
    ("var", "g4", "sum(xmu2) / n"),
    ("rstd", "g5", "(var + eps)^(-1/2)"),
    ("xhat", "g6", "xmu * rstd"),
    ("out", "g7", "scale * xhat + shift"),
]
BACKWARD = [
    ("dshift", "g7", "dout summed over rows (eq. 6)"),
    ("dscale", "g7", "dout * xhat summed over rows (eq. 7)"),
    ("dxhat", "g7", "dout * scale (eq. 8)"),
    ("drstd", "g6", "sum(dxhat * xmu) over the row"),
    ("dvar", "g5", "-0.5 rstd^3 drstd"),
    ("dxmu2", "g4", "dvar / n, every j"),
    ("dxmu", "g3", "dxhat rstd + 2 xmu dxmu2 (both parts)"),
    ("dmu", "g2", "-sum(dxmu) over the row"),
    ("dx", "g1", "dxmu + dmu / C; each row sums to 0"),
]


def explain_layernorm(x=None, seed=0, dout=None, unbiased=False):
    from ..layers.layernorm import LayerNorm

    rng = np.random.default_rng(seed)
    x = _floats("layernorm", x, BOOK_LAYERNORM_INPUT, 1)
    C = x.shape[-1]
    ln = LayerNorm(C, unbiased=unbiased)
    ln.scale.data = np.round(rng.uniform(0.5, 1.5, C), 2)  # not 1 and 0: their role shows
    ln.shift.data = np.round(0.5 * rng.standard_normal(C), 2)
    scale, shift = ln.scale.data, ln.shift.data
    n = C - 1 if unbiased else C
    e = Explanation("layernorm", repr(ln), "docs/layernorm.md")
    f = layernorm_gates(x, scale, shift, ln.eps, n)
    e.forward = [
        Step("x", x, "", "input" + (" (the book's ch. 4 example)" if C == 6 else "")),
        Step("scale", scale, "", "parameter (C,)"),
        Step("shift", shift, "", "parameter (C,)"),
    ]
    e.forward += [Step(k, f[k], g, note) for k, g, note in FORWARD]
    e.forward[6].note += f", n = {n} ({'C - 1' if unbiased else 'C'})"
    e.forward[7].note += f", eps = {ln.eps:g}"
    dout = _dout(rng, dout, x.shape, "layernorm")
    b = layernorm_backward_gates(f, scale, n, dout)
    term2 = b["dxhat"].sum(-1, keepdims=True) / C  # (..., 1)
    term3 = (b["dxhat"] * f["xhat"]).sum(-1, keepdims=True) / n  # (..., 1)
    dx9 = f["rstd"] * (b["dxhat"] - term2 - f["xhat"] * term3)  # (..., C)   eq. 9
    e.backward = [Step("dout", dout, "", f"upstream gradient (seed {seed})")]
    e.backward += [Step(k, b[k], g, note) for k, g, note in BACKWARD]
    e.backward += [
        Step("term2", term2, "eq. 9", "mean(dxhat): the path through mu"),
        Step("term3", term3, "eq. 9", "sum(dxhat * xhat) / n: the path through var"),
    ]
    e.checks.append(("eq. 9 = the gates' dx", _diff((dx9, b["dx"]))))
    out = ln.forward(x)
    cache = ln.cache
    e.checks.append(
        ("npgpt.LayerNorm cache: xhat, rstd", _diff((cache.xhat, f["xhat"]), (cache.rstd, f["rstd"])))
    )
    e.checks.append(("npgpt.LayerNorm.forward", _diff((out, f["out"]))))
    dx_m = ln.backward(dout)
    e.checks.append(
        (
            "npgpt.LayerNorm.backward",
            _diff((dx_m, b["dx"]), (ln.scale.grad, b["dscale"]), (ln.shift.grad, b["dshift"])),
        )
    )
    return e
