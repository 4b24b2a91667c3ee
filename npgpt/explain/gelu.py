"""`npgpt explain gelu`: docs/gelu.md, eq. 1-5, step by step; `gelu_parts` serves the
feed-forward and block explainers too.
"""

import math

import numpy as np

from .steps import Explanation, Step, _diff, _dout, _floats


def gelu_parts(x):
    """u, t = tanh(u), GELU(x) and its derivative, from docs/gelu.md eqs. 1-5 (no clipping)."""
    x = np.asarray(x, dtype=np.float64)
    c = math.sqrt(2.0 / math.pi)
    u = c * (x + 0.044715 * x * x * x)
    t = np.tanh(u)
    du_dx = c * (1.0 + 3.0 * 0.044715 * x * x)
    return u, t, 0.5 * x * (1.0 + t), du_dx, 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx


def explain_gelu(x=None, seed=0, dout=None):
    from ..layers.gelu import GELU

    x = _floats("gelu", x, [-1.0, 0.0, 1.0], 0)
    u, t, out, du_dx, dgelu = gelu_parts(x)
    e = Explanation("gelu", "GELU() (tanh approximation)", "docs/gelu.md")
    e.forward = [
        Step("x", x, "", "input"),
        Step("u", u, "eq. 1", "sqrt(2/pi) * (x + 0.044715 x^3)"),
        Step("t", t, "eq. 2", "tanh(u)"),
        Step("out", out, "eq. 3", "0.5 * x * (1 + t)"),
    ]
    note = "upstream gradient" + (" (ones, so dx shows GELU'(x))" if dout is None else "")
    dout = np.ones_like(out) if dout is None else _dout(None, dout, out.shape, "gelu")
    dx = dout * dgelu
    e.backward = [
        Step("dout", dout, "", note),
        Step("du_dx", du_dx, "eq. 4", "sqrt(2/pi) * (1 + 3 * 0.044715 x^2)"),
        Step("1 - t^2", 1.0 - t * t, "eq. 5", "d tanh(u) / du"),
        Step("dgelu", dgelu, "eq. 5", "0.5 (1 + t) + 0.5 x (1 - t^2) du_dx"),
        Step("dx", dx, "eq. 5", "dout * dgelu"),
    ]
    m = GELU()
    e.checks.append(("npgpt.GELU.forward", _diff((m.forward(x), out))))
    e.checks.append(("npgpt.GELU.backward", _diff((m.backward(dout), dx))))
    return e
