"""`npgpt explain gelu`: docs/gelu.md gate by gate (g1-g3 and back), then the closed form
(eq. 4-5), checked against the reference module's cache, output and gradient; `gelu_parts`
serves the feed-forward, block and model explainers too.
"""

import math

import numpy as np

from .steps import Explanation, Step, _diff, _dout, _floats

C = math.sqrt(2.0 / math.pi)


def gelu_gates(x):
    """The forward gates g1-g3 of docs/gelu.md, by hand (no clipping)."""
    u = C * (x + 0.044715 * x * x * x)  # g1
    t = np.tanh(u)  # g2
    return {"x": x, "u": u, "t": t, "out": 0.5 * x * (1.0 + t)}  # g3


def gelu_backward_gates(f, dout):
    """The backward gates g3-g1 of docs/gelu.md, by hand, in that order."""
    x, t = f["x"], f["t"]
    b = {"dout": dout, "dt": dout * 0.5 * x}  # g3
    dx = dout * 0.5 * (1.0 + t)  # g3, first part
    b["du"] = b["dt"] * (1.0 - t * t)  # g2
    b["du_dx"] = C * (1.0 + 3.0 * 0.044715 * x * x)  # g1's local gradient, eq. 4
    b["dx"] = dx + b["du"] * b["du_dx"]  # g1, second part added
    return b


def gelu_parts(x):
    """u, t = tanh(u), GELU(x) and its derivative dgelu (docs/gelu.md eq. 1-5), by hand."""
    x = np.asarray(x, dtype=np.float64)
    f = gelu_gates(x)
    return f["u"], f["t"], f["out"], gelu_backward_gates(f, 1.0)["du_dx"], gelu_backward_gates(f, 1.0)["dx"]


def explain_gelu(x=None, seed=0, dout=None):
    from ..layers.gelu import GELU

    x = _floats("gelu", x, [-1.0, 0.0, 1.0], 0)
    f = gelu_gates(x)
    e = Explanation("gelu", "GELU() (tanh approximation)", "docs/gelu.md")
    e.forward = [
        Step("x", x, "", "input"),
        Step("u", f["u"], "g1", "sqrt(2/pi) * (x + 0.044715 x^3)"),
        Step("t", f["t"], "g2", "tanh(u)"),
        Step("out", f["out"], "g3", "0.5 * x * (1 + t)"),
    ]
    note = "upstream gradient" + (" (ones, so dx shows GELU'(x))" if dout is None else "")
    dout = np.ones_like(x) if dout is None else _dout(None, dout, x.shape, "gelu")
    b = gelu_backward_gates(f, dout)
    dgelu = 0.5 * (1.0 + f["t"]) + 0.5 * x * (1.0 - f["t"] * f["t"]) * b["du_dx"]  # eq. 5
    e.backward = [
        Step("dout", dout, "", note),
        Step("dt", b["dt"], "g3", "dout * 0.5 x"),
        Step("du", b["du"], "g2", "dt * (1 - t^2)"),
        Step("du_dx", b["du_dx"], "g1", "sqrt(2/pi) * (1 + 3 * 0.044715 x^2) (eq. 4)"),
        Step("dx", b["dx"], "g1", "dout 0.5 (1 + t) + du * du_dx (both parts)"),
        Step("dgelu", dgelu, "eq. 5", "0.5 (1 + t) + 0.5 x (1 - t^2) du_dx"),
    ]
    e.checks.append(("eq. 5 = the gates' dx", _diff((dout * dgelu, b["dx"]))))
    m = GELU()
    out = m.forward(x)
    e.checks.append(("npgpt.GELU cache: t", _diff((m.cache.t, f["t"]))))
    e.checks.append(("npgpt.GELU.forward", _diff((out, f["out"]))))
    e.checks.append(("npgpt.GELU.backward", _diff((m.backward(dout), b["dx"]))))
    return e
