"""Known mistakes, computed: what each component returns when one classic error is made.

`variants(key, tensor, case, params)` yields (description, thunk) pairs; the thunk computes the
mistaken answer for that case in float64, here in the grader's process. diagnose.py names a
variant when the submission's answer matches it and not the correct one.
"""

import math

import numpy as np

from ..gradcheck import numerical_gradient

S2PI = math.sqrt(2.0 / math.pi)
_erf = np.vectorize(math.erf)


def _ln(x, scale, shift, n=None, eps_outside=False, eps=1e-5):
    xmu = x - x.mean(-1, keepdims=True)  # (..., C)
    var = (xmu * xmu).sum(-1, keepdims=True) / (n or x.shape[-1])  # (..., 1)
    std = np.sqrt(var) + eps if eps_outside else np.sqrt(var + eps)  # (..., 1)
    return xmu / std * scale + shift


def _layernorm(tensor, case, P):
    x, dout, scale, shift = case.inputs[0], case.dout, P["scale"], P["shift"]
    C = x.shape[-1]
    if tensor == "out":
        yield (
            "the unbiased variance (divided by C - 1; LayerNorm divides by C)",
            lambda: _ln(x, scale, shift, C - 1),
        )
        yield (
            "eps added outside the square root (use 1/sqrt(var + eps))",
            lambda: _ln(x, scale, shift, eps_outside=True),
        )
        yield "no scale and shift applied", lambda: _ln(x, 1.0, 0.0)
        return
    xmu = x - x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt((xmu * xmu).mean(-1, keepdims=True) + 1e-5)
    xhat = xmu * rstd
    if tensor == "dx":
        # a missing mean or variance term is found from the residual's shape (diagnose.py)
        yield (
            "the gradient with dout not multiplied by scale",
            lambda: (
                rstd * (dout - dout.mean(-1, keepdims=True) - xhat * (dout * xhat).mean(-1, keepdims=True))
            ),
        )
        for desc, kw in (
            ("of the unbiased-variance LayerNorm (divide by C, not C - 1)", {"n": C - 1}),
            ("of a LayerNorm with eps outside the square root", {"eps_outside": True}),
        ):
            yield (
                f"the gradient {desc}",
                lambda kw=kw: numerical_gradient(lambda z: _ln(z, scale, shift, **kw), x.copy(), dout),
            )
    elif tensor == "grad/scale":
        yield "sum(dout * x) (use the normalized xhat, not x)", lambda: (dout * x).reshape(-1, C).sum(0)
        yield "sum(dout) (the xhat factor is missing)", lambda: dout.reshape(-1, C).sum(0)


def gelu_forms(x):
    """(name -> forward, name -> derivative) of the tanh GELU and its classic misreadings."""
    u = S2PI * (x + 0.044715 * x * x * x)
    t = np.tanh(u)
    du = S2PI * (1.0 + 3.0 * 0.044715 * x * x)
    phi = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    fwd = {
        "exact erf GELU (the assignment uses the tanh approximation)": 0.5
        * x
        * (1.0 + _erf(x / math.sqrt(2.0))),
        "GELU without the 0.044715 x^3 term": 0.5 * x * (1.0 + np.tanh(S2PI * x)),
        "sigmoid GELU x * sigmoid(1.702 x)": x / (1.0 + np.exp(-1.702 * x)),
    }
    grad = {
        "the derivative missing the 1 - tanh^2 factor (d tanh(u)/du = 1 - tanh(u)^2)": 0.5 * (1.0 + t)
        + 0.5 * x * du,
        "the derivative missing the cubic term's derivative (du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2))": 0.5
        * (1.0 + t)
        + 0.5 * x * (1.0 - t * t) * S2PI,
        "the exact-erf GELU derivative Phi(x) + x phi(x) instead of the tanh form's": 0.5
        * (1.0 + _erf(x / math.sqrt(2.0)))
        + x * phi,
        "the derivative missing the product rule's 0.5 (1 + tanh(u)) term": 0.5 * x * (1.0 - t * t) * du,
    }
    return fwd, grad


def _gelu(tensor, case, P):
    x, dout = case.inputs[0], case.dout
    fwd, grad = gelu_forms(x)
    if tensor == "out":
        for desc, v in fwd.items():
            yield desc, lambda v=v: v
    elif tensor == "dx":
        for desc, g in grad.items():
            yield desc, lambda g=g: dout * g
        t = np.tanh(S2PI * (x + 0.044715 * x * x * x))
        exact = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * S2PI * (1.0 + 3.0 * 0.044715 * x * x)
        yield "the local derivative not multiplied by dout", lambda: exact + 0.0 * dout


def attention(
    x, P, nh, dout, scale_fwd=True, scale_bwd=True, elementwise=False, mask_fwd=True, mask_bwd=True
):
    """Causal attention forward and backward in float64 with switchable mistakes; returns a dict."""
    Wq, Wk, Wv, Wo, bo = (
        P[k] for k in ("W_query.weight", "W_key.weight", "W_value.weight", "out_proj.weight", "out_proj.bias")
    )
    B, T, _ = x.shape
    d = Wq.shape[0]
    hs = d // nh
    split = lambda t: t.reshape(B, T, nh, hs).transpose(0, 2, 1, 3)  # noqa: E731  (B, nh, T, hs)
    merge = lambda t: t.transpose(0, 2, 1, 3).reshape(B, T, d)  # noqa: E731  (B, T, d)
    q, k, v = split(x @ Wq.T), split(x @ Wk.T), split(x @ Wv.T)
    raw = q @ k.swapaxes(-1, -2) * (1.0 / math.sqrt(hs) if scale_fwd else 1.0)  # (B, nh, T, T)
    future = np.triu(np.ones((T, T), bool), 1)

    def softmax(s, masked):
        s = np.where(future, -np.inf, s) if masked else s
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    att = softmax(raw, mask_fwd)  # (B, nh, T, T)
    y = merge(att @ v)  # (B, T, d)
    res = {"out": y @ Wo.T + bo}
    dout2 = dout.reshape(-1, d)
    res["grad/out_proj.weight"], res["grad/out_proj.bias"] = dout2.T @ y.reshape(-1, d), dout2.sum(0)
    dctx = split(dout @ Wo)
    datt, dv = dctx @ v.swapaxes(-1, -2), att.swapaxes(-1, -2) @ dctx
    a = att if mask_bwd == mask_fwd else softmax(raw, mask_bwd)
    ds = datt * a * (1.0 - a) if elementwise else a * (datt - (datt * a).sum(-1, keepdims=True))
    ds = ds * (1.0 / math.sqrt(hs) if scale_bwd else 1.0)
    dq, dk = merge(ds @ k), merge(ds.swapaxes(-1, -2) @ q)
    x2 = x.reshape(-1, x.shape[-1])
    res["dx"] = dq @ Wq + dk @ Wk + merge(dv) @ Wv
    for name, g in (("W_query", dq), ("W_key", dk), ("W_value", merge(dv))):
        res[f"grad/{name}.weight"] = g.reshape(-1, d).T @ x2
    return res


def _attention(tensor, case, P):
    x, dout = case.inputs[0], case.dout
    runs = {
        "the causal mask not applied in forward": {"mask_fwd": False, "mask_bwd": False},
        "scores not scaled by 1/sqrt(head_dim)": {"scale_fwd": False, "scale_bwd": False},
    }
    if tensor != "out":
        runs.update(
            {
                "softmax treated as elementwise in backward (att * (1 - att) instead of the Jacobian)": {
                    "elementwise": True
                },
                "the 1/sqrt(head_dim) scaling missing in backward": {"scale_bwd": False},
                "the mask ignored in backward (softmax of the unmasked scores)": {"mask_bwd": False},
            }
        )
    for desc, kw in runs.items():
        yield desc, lambda kw=kw: attention(x, P, 2, dout, **kw)[tensor]


def _feedforward(tensor, case, P):
    x, dout = case.inputs[0], case.dout
    W1, b1, W2, b2 = (P[k] for k in ("layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias"))
    h = x @ W1.T + b1
    fwd, grad = gelu_forms(h)
    if tensor == "out":
        for desc, g in fwd.items():
            yield f"a FeedForward using the {desc}", lambda g=g: g @ W2.T + b2
    elif tensor in ("dx", "grad/layers.0.weight", "grad/layers.0.bias"):
        dh0 = dout @ W2
        for desc, g in grad.items():
            dh = dh0 * g
            res = {
                "dx": dh @ W1,
                "grad/layers.0.weight": dh.reshape(-1, h.shape[-1]).T @ x.reshape(-1, x.shape[-1]),
                "grad/layers.0.bias": dh.reshape(-1, h.shape[-1]).sum(0),
            }
            yield f"a FeedForward whose GELU uses {desc}", lambda res=res: res[tensor]


def _crossentropy(tensor, case, P):
    logits, targets = case.inputs
    keep = targets.reshape(-1) != -100
    n, N = int(keep.sum()), keep.size
    exp = case.expected[tensor]
    if tensor == "out":
        yield f"the sum over the {n} targets instead of the mean", lambda: exp * n
        if n != N:
            yield "the mean over all rows, ignored ones included", lambda: exp * n / N
    else:
        yield f"the gradient not divided by N = {n} (the number of counted targets)", lambda: exp * n
        if n != N:
            yield f"the gradient divided by all {N} rows, ignored ones included", lambda: exp * n / N
        z = logits.reshape(-1, logits.shape[-1])
        p = np.exp(z - z.max(-1, keepdims=True))
        p = (p / p.sum(-1, keepdims=True)) * keep[:, None] / n
        yield "softmax / N without subtracting the one-hot target", lambda: p.reshape(logits.shape)


TABLE = {
    "layernorm": _layernorm,
    "gelu": _gelu,
    "attention": _attention,
    "feedforward": _feedforward,
    "crossentropy": _crossentropy,
}


def variants(key, tensor, case, params):
    fn = TABLE.get(key)
    return fn(tensor, case, params) if fn else iter(())
