"""`npgpt explain linear`: docs/linear.md, gate g1 per position and its sum (eq. 1-4), checked
against the reference module's cache, output and gradients."""

import numpy as np

from .steps import Explanation, Step, _diff, _dout, _floats, _hand, _round_params


def explain_linear(x=None, seed=0, dout=None, out_features=2):
    from ..layers.linear import Linear

    rng = np.random.default_rng(seed)
    x = _floats("linear", x, _hand(rng, (2, 2, 3)), 1)
    lin = _round_params(Linear(x.shape[-1], out_features, rng=rng))
    W, b = lin.weight.data, lin.bias.data
    e = Explanation("linear", repr(lin), "docs/linear.md")
    out = np.einsum("...i,oi->...o", x, W) + b  # (..., out)
    e.forward = [
        Step("x", x, "", "input (..., in)"),
        Step("weight", W, "", "W (out, in)"),
        Step("bias", b, "", "b (out,)"),
        Step("out", out, "eq. 1", "x W^T + b"),
    ]
    dout = _dout(rng, dout, out.shape, "linear")
    x2 = x.reshape(-1, x.shape[-1])  # (N, in)
    dout2 = dout.reshape(-1, out_features)  # (N, out)
    outer = np.stack([np.outer(dout2[i], x2[i]) for i in range(len(x2))])  # (N, out, in), g1
    dW = outer.sum(0)  # (out, in): the sum over positions
    db = dout2.sum(0)  # (out,)
    dx = np.einsum("...o,oi->...i", dout, W)  # (..., in)
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("x2", x2, "eq. 2", "x with every leading axis flattened: N rows"),
        Step("dout2", dout2, "eq. 2", "dout flattened the same way"),
        Step("outer", outer, "g1", "outer(dout2[p], x2[p]), one per position p"),
        Step("dweight", dW, "eq. 2", "the sum of the outer products = dout2^T x2"),
        Step("dbias", db, "eq. 3", "dout2 summed over positions"),
        Step("dx", dx, "eq. 4", "dout W"),
    ]
    e.checks.append(("eq. 2 = the sum of the outer products", _diff((dout2.T @ x2, dW))))
    e.checks.append(("npgpt.Linear.forward", _diff((lin.forward(x), out))))
    e.checks.append(("npgpt.Linear cache: x", _diff((lin.cache, x))))
    dx_m = lin.backward(dout)
    e.checks.append(("npgpt.Linear.backward", _diff((dx_m, dx), (lin.weight.grad, dW), (lin.bias.grad, db))))
    return e
