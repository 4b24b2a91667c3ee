"""`npgpt explain feedforward`: docs/feedforward.md, eq. 1-6, step by step (dropout off)."""

import numpy as np

from .gelu import gelu_parts
from .steps import Explanation, Step, _diff, _dout, _floats, _hand, _round_params


def explain_feedforward(x=None, seed=0, dout=None, emb_dim=2):
    from ..layers.feedforward import FeedForward

    rng = np.random.default_rng(seed)
    x = _floats("feedforward", x, _hand(rng, (1, 2, emb_dim)), 1)
    ff = _round_params(FeedForward({"emb_dim": x.shape[-1]}, rng=rng))
    W1, b1, W2, b2 = (p.data for p in ff.parameters())
    h = x @ W1.T + b1  # (..., 4E)
    _, _, g, _, dgelu = gelu_parts(h)  # (..., 4E)
    out = g @ W2.T + b2  # (..., E)
    e = Explanation(
        "feedforward", f"FeedForward(emb_dim={x.shape[-1]}): Linear, GELU, Linear", "docs/feedforward.md"
    )
    e.forward = [
        Step("x", x, "", "input (..., E)"),
        Step("W1", W1, "", "layers.0.weight (4E, E)"),
        Step("b1", b1, "", "layers.0.bias"),
        Step("h", h, "eq. 1", "x W1^T + b1"),
        Step("g", g, "eq. 2", "GELU(h)"),
        Step("W2", W2, "", "layers.2.weight (E, 4E)"),
        Step("b2", b2, "", "layers.2.bias"),
        Step("out", out, "eq. 3", "g W2^T + b2"),
    ]
    dout = _dout(rng, dout, out.shape, "feedforward")
    dW2 = dout.reshape(-1, W2.shape[0]).T @ g.reshape(-1, W2.shape[1])  # (E, 4E)
    db2 = dout.reshape(-1, W2.shape[0]).sum(0)  # (E,)
    dg = dout @ W2  # (..., 4E)
    dh = dg * dgelu  # (..., 4E)
    dW1 = dh.reshape(-1, W1.shape[0]).T @ x.reshape(-1, W1.shape[1])  # (4E, E)
    db1 = dh.reshape(-1, W1.shape[0]).sum(0)  # (4E,)
    dx = dh @ W1  # (..., E)
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dW2", dW2, "eq. 4", "dout^T g, summed over positions"),
        Step("db2", db2, "eq. 4"),
        Step("dg", dg, "eq. 4", "dout W2"),
        Step("dh", dh, "eq. 5", "dg * GELU'(h)"),
        Step("dW1", dW1, "eq. 6", "dh^T x"),
        Step("db1", db1, "eq. 6"),
        Step("dx", dx, "eq. 6", "dh W1"),
    ]
    e.checks.append(("npgpt.FeedForward.forward", _diff((ff.forward(x), out))))
    dx_m = ff.backward(dout)
    grads = [p.grad for p in ff.parameters()]
    e.checks.append(("npgpt.FeedForward.backward", _diff((dx_m, dx), *zip(grads, (dW1, db1, dW2, db2)))))
    return e
