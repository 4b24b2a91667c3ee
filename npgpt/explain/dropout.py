"""`npgpt explain dropout`: docs/dropout.md, gate g1 (eq. 1-2), with the mask the reference module
drew itself, checked against its cache, output and gradient."""

import numpy as np

from .steps import Explanation, Step, _diff, _dout, _floats, _hand


def explain_dropout(x=None, seed=0, dout=None, p=0.5):
    from ..layers.dropout import Dropout

    rng = np.random.default_rng(seed)
    x = _floats("dropout", x, _hand(rng, (2, 4)), 0)
    m = Dropout(p, rng=rng)
    got = m.forward(x)  # the module draws its own mask; the hand steps take it as an input
    mask = m.cache.mask if m.cache.mask is not None else np.ones(x.shape, bool)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    out = x * mask * scale
    e = Explanation("dropout", f"Dropout(p={p}), training mode", "docs/dropout.md")
    e.forward = [
        Step("x", x, "", "input"),
        Step("mask", mask.astype(np.int64), "g1", f"drawn by the module: 1 = keep (probability {1 - p:g})"),
        Step("scale", np.float64(scale), "g1", "1 / (1 - p)"),
        Step("out", out, "g1", "x * mask * scale (eq. 1)"),
    ]
    dout = _dout(rng, dout, out.shape, "dropout")
    dx = dout * mask * scale
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dx", dx, "g1", "dout * mask * scale (eq. 2)"),
    ]
    e.checks.append(("npgpt.Dropout.forward", _diff((got, out))))
    e.checks.append(("npgpt.Dropout.backward", _diff((m.backward(dout), dx))))
    return e
