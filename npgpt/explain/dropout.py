"""`npgpt explain dropout`: docs/dropout.md, eq. 1-2, step by step."""

import numpy as np

from .steps import Explanation, Step, _diff, _dout, _floats, _hand


def explain_dropout(x=None, seed=0, dout=None, p=0.5):
    from ..layers.dropout import Dropout

    rng = np.random.default_rng(seed)
    x = _floats("dropout", x, _hand(rng, (2, 4)), 0)
    mask = rng.random(x.shape) >= p  # (...) True = keep
    scale = 1.0 / (1.0 - p)
    out = np.where(mask, x * scale, 0.0)
    e = Explanation("dropout", f"Dropout(p={p}), training mode", "docs/dropout.md")
    e.forward = [
        Step("x", x, "", "input"),
        Step("mask", mask.astype(np.int64), "eq. 1", f"1 = keep (probability 1 - p = {1 - p:g})"),
        Step("scale", np.float64(scale), "eq. 1", "1 / (1 - p)"),
        Step("out", out, "eq. 1", "x * mask * scale"),
    ]
    dout = _dout(rng, dout, out.shape, "dropout")
    dx = np.where(mask, dout * scale, 0.0)
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dx", dx, "eq. 2", "dout * mask * scale"),
    ]
    m = Dropout(p)
    e.checks.append(("npgpt.Dropout.forward", _diff((m.forward(x, mask=mask), out))))
    e.checks.append(("npgpt.Dropout.backward", _diff((m.backward(dout), dx))))
    return e
