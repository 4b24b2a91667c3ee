"""`npgpt explain feedforward`: docs/feedforward.md gate by gate (Linear, GELU, Linear and back,
eq. 1-6), checked against the reference module's caches, output and every parameter gradient.
`feedforward_gates` and `feedforward_backward_gates` serve the block and model explainers too.
"""

import numpy as np

from .gelu import gelu_backward_gates, gelu_gates
from .steps import Explanation, Step, _diff, _dout, _floats, _hand, _round_params


def feedforward_gates(x, P, prefix="layers."):
    """The forward gates g1-g3 by hand; P holds layers.0.weight, ... by name."""
    f = {"x": x}
    f["h"] = x @ P[prefix + "0.weight"].T + P[prefix + "0.bias"]  # (..., 4E)   g1
    f["gelu"] = gelu_gates(f["h"])
    f["g"] = f["gelu"]["out"]  # (..., 4E)   g2
    f["out"] = f["g"] @ P[prefix + "2.weight"].T + P[prefix + "2.bias"]  # (..., E)   g3
    return f


def feedforward_backward_gates(f, P, dout, prefix="layers."):
    """The backward gates g3-g1 by hand, in that order."""
    E, H = P[prefix + "2.weight"].shape
    b = {"dout": dout}
    b[f"d{prefix}2.weight"] = dout.reshape(-1, E).T @ f["g"].reshape(-1, H)  # (E, 4E)   g3
    b[f"d{prefix}2.bias"] = dout.reshape(-1, E).sum(0)  # (E,)
    b["dg"] = dout @ P[prefix + "2.weight"]  # (..., 4E)
    b["dh"] = gelu_backward_gates(f["gelu"], b["dg"])["dx"]  # (..., 4E)   g2
    b[f"d{prefix}0.weight"] = b["dh"].reshape(-1, H).T @ f["x"].reshape(-1, E)  # (4E, E)   g1
    b[f"d{prefix}0.bias"] = b["dh"].reshape(-1, H).sum(0)  # (4E,)
    b["dx"] = b["dh"] @ P[prefix + "0.weight"]  # (..., E)
    return b


def explain_feedforward(x=None, seed=0, dout=None, emb_dim=2):
    from ..layers.feedforward import FeedForward

    rng = np.random.default_rng(seed)
    x = _floats("feedforward", x, _hand(rng, (1, 2, emb_dim)), 1)
    ff = _round_params(FeedForward({"emb_dim": x.shape[-1]}, rng=rng))
    P = {name: p.data for name, p in ff.named_parameters()}
    f = feedforward_gates(x, P)
    e = Explanation(
        "feedforward", f"FeedForward(emb_dim={x.shape[-1]}): Linear, GELU, Linear", "docs/feedforward.md"
    )
    e.forward = [Step("x", x, "", "input (..., E)")]
    e.forward += [Step(name, value, "", "parameter") for name, value in P.items()]
    e.forward += [
        Step("h", f["h"], "g1", "x layers.0.weight^T + layers.0.bias (eq. 1)"),
        Step("g", f["g"], "g2", "GELU(h) (eq. 2)"),
        Step("out", f["out"], "g3", "g layers.2.weight^T + layers.2.bias (eq. 3)"),
    ]
    dout = _dout(rng, dout, f["out"].shape, "feedforward")
    b = feedforward_backward_gates(f, P, dout)
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dlayers.2.weight", b["dlayers.2.weight"], "g3", "dout^T g (eq. 4)"),
        Step("dlayers.2.bias", b["dlayers.2.bias"], "g3", "dout summed over positions"),
        Step("dg", b["dg"], "g3", "dout layers.2.weight (eq. 4)"),
        Step("dh", b["dh"], "g2", "GELU's gates g3-g1 on dg (eq. 5)"),
        Step("dlayers.0.weight", b["dlayers.0.weight"], "g1", "dh^T x (eq. 6)"),
        Step("dlayers.0.bias", b["dlayers.0.bias"], "g1", "dh summed over positions"),
        Step("dx", b["dx"], "g1", "dh layers.0.weight (eq. 6)"),
    ]
    out = ff.forward(x)
    lin0, gelu, lin2 = ff.layers
    e.checks.append(
        (
            "npgpt.FeedForward caches: x, GELU's t, g",
            _diff((lin0.cache, x), (gelu.cache.t, f["gelu"]["t"]), (lin2.cache, f["g"])),
        )
    )
    e.checks.append(("npgpt.FeedForward.forward", _diff((out, f["out"]))))
    dx_m = ff.backward(dout)
    pairs = [(dx_m, b["dx"])] + [(p.grad, b[f"d{name}"]) for name, p in ff.named_parameters()]
    e.checks.append(("npgpt.FeedForward.backward", _diff(*pairs)))
    return e
