"""`npgpt explain layernorm`: docs/layernorm.md, eq. 1-9, step by step, on the book's example."""

import numpy as np

from .steps import Explanation, Step, _diff, _dout, _floats

# The book's ch. 4 LayerNorm example: the 2x6 output of Linear(5, 6) + ReLU at torch seed 123.
BOOK_LAYERNORM_INPUT = [[0.2260, 0.3470, 0.0, 0.2216, 0.0, 0.0], [0.2133, 0.2394, 0.0, 0.5198, 0.3297, 0.0]]


def explain_layernorm(x=None, seed=0, dout=None, unbiased=False):
    from ..layers.layernorm import LayerNorm

    x = _floats("layernorm", x, BOOK_LAYERNORM_INPUT, 1)
    C = x.shape[-1]
    ln = LayerNorm(C, unbiased=unbiased)
    e = Explanation("layernorm", repr(ln), "docs/layernorm.md")
    g, b = ln.scale.data, ln.shift.data
    n = C - 1 if unbiased else C
    mu = x.sum(-1, keepdims=True) / C  # (..., 1)
    xmu = x - mu  # (..., C)
    var = (xmu * xmu).sum(-1, keepdims=True) / n  # (..., 1)
    rstd = 1.0 / np.sqrt(var + ln.eps)  # (..., 1)
    xhat = xmu * rstd  # (..., C)
    out = g * xhat + b  # (..., C)
    e.forward = [
        Step("x", x, "", "input" + (" (the book's ch. 4 example)" if C == 6 else "")),
        Step("mu", mu, "eq. 1", "mean of each row"),
        Step("xmu", xmu, "eq. 2", "x - mu"),
        Step("var", var, "eq. 2", f"sum(xmu^2) / n, n = {n} ({'C - 1' if unbiased else 'C'})"),
        Step("rstd", rstd, "eq. 3", f"1 / sqrt(var + eps), eps = {ln.eps:g}"),
        Step("xhat", xhat, "eq. 4", "xmu * rstd"),
        Step("out", out, "eq. 5", "scale * xhat + shift"),
    ]
    dout = _dout(np.random.default_rng(seed), dout, out.shape, "layernorm")
    dshift = dout.reshape(-1, C).sum(0)  # (C,)
    dscale = (dout * xhat).reshape(-1, C).sum(0)  # (C,)
    dxhat = dout * g  # (..., C)
    term1 = dxhat
    term2 = dxhat.sum(-1, keepdims=True) / C  # (..., 1)
    term3 = (dxhat * xhat).sum(-1, keepdims=True) / n  # (..., 1)
    dx = rstd * (term1 - term2 - xhat * term3)  # (..., C)
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dshift", dshift, "eq. 6", "dout summed over rows"),
        Step("dscale", dscale, "eq. 7", "dout * xhat summed over rows"),
        Step("dxhat", dxhat, "eq. 8", "dout * scale"),
        Step("term2", term2, "eq. 9", "mean(dxhat): the path through mu"),
        Step("term3", term3, "eq. 9", "sum(dxhat * xhat) / n: the path through var"),
        Step("dx", dx, "eq. 9", "rstd (dxhat - term2 - xhat term3); rows sum to 0"),
    ]
    got = ln.forward(x)
    e.checks.append(("npgpt.LayerNorm.forward", _diff((got, out))))
    dx_m = ln.backward(dout)
    e.checks.append(
        ("npgpt.LayerNorm.backward", _diff((dx_m, dx), (ln.scale.grad, dscale), (ln.shift.grad, dshift)))
    )
    return e
