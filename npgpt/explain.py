"""Every intermediate of a component's forward and backward, computed step by step from the
equations of its docs page (docs/<component>.md), in the order a student computes them by hand,
then compared with the module's own forward and backward.

`explain(component, x=None, seed=0, dout=None, **options)` returns an `Explanation`; the
`npgpt explain` command prints it. Weights, `dout` and default inputs are drawn from `seed` and
rounded to 2 decimals, so every number can be checked with a pencil.
"""

import math
from dataclasses import dataclass, field

import numpy as np

# The book's ch. 4 LayerNorm example: the 2x6 output of Linear(5, 6) + ReLU at torch seed 123.
BOOK_LAYERNORM_INPUT = [[0.2260, 0.3470, 0.0, 0.2216, 0.0, 0.0], [0.2133, 0.2394, 0.0, 0.5198, 0.3297, 0.0]]
TOL = 1e-10  # hand steps and the module agree to float64 rounding


@dataclass
class Step:
    """One named intermediate: `name` as in the code and the docs, `eq` its equation label."""

    name: str
    value: np.ndarray
    eq: str = ""
    note: str = ""


@dataclass
class Explanation:
    """The steps of one forward and backward and how they compare with the module."""

    component: str
    title: str
    page: str
    forward: list = field(default_factory=list)
    backward: list = field(default_factory=list)
    checks: list = field(default_factory=list)  # (what, max |diff|)

    @property
    def passed(self):
        return all(d <= TOL for _, d in self.checks)

    def step(self, name):
        """The value of the step called `name` (forward or backward)."""
        for s in self.forward + self.backward:
            if s.name == name:
                return s.value
        raise KeyError(f"{self.component}: no step named {name!r}")


def _hand(rng, shape, decimals=2):
    return np.round(rng.standard_normal(shape), decimals)  # (shape) hand-friendly numbers


def _floats(where, x, default, min_ndim):
    x = np.asarray(default if x is None else x, dtype=np.float64)
    if x.ndim < min_ndim:
        raise ValueError(
            f"explain {where}: the input must have at least {min_ndim} dimension(s), got shape {x.shape}"
        )
    return x


def _round_params(module):
    for p in module.parameters():
        p.data = np.round(p.data, 2)
    return module


def _diff(*pairs):
    return max(float(np.max(np.abs(np.asarray(a, np.float64) - b), initial=0.0)) for a, b in pairs)


def _dout(rng, dout, shape, where):
    if dout is None:
        return _hand(rng, shape)
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != tuple(shape):
        raise ValueError(f"explain {where}: dout has shape {dout.shape}, the output has shape {tuple(shape)}")
    return dout


def explain_layernorm(x=None, seed=0, dout=None, unbiased=False):
    from .layers.layernorm import LayerNorm

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


def gelu_parts(x):
    """u, t = tanh(u), GELU(x) and its derivative, from docs/gelu.md eqs. 1-5 (no clipping)."""
    x = np.asarray(x, dtype=np.float64)
    c = math.sqrt(2.0 / math.pi)
    u = c * (x + 0.044715 * x * x * x)
    t = np.tanh(u)
    du_dx = c * (1.0 + 3.0 * 0.044715 * x * x)
    return u, t, 0.5 * x * (1.0 + t), du_dx, 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx


def explain_gelu(x=None, seed=0, dout=None):
    from .layers.gelu import GELU

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


def explain_linear(x=None, seed=0, dout=None, out_features=2):
    from .layers.linear import Linear

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
    dW = sum(np.outer(dout2[i], x2[i]) for i in range(len(x2)))  # one outer product per position
    db = dout2.sum(0)  # (out,)
    dx = np.einsum("...o,oi->...i", dout, W)  # (..., in)
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("x2", x2, "eq. 2", "x with every leading axis flattened: N rows"),
        Step("dout2", dout2, "eq. 2", "dout flattened the same way"),
        Step("dweight", dW, "eq. 2", "dout2^T x2 = sum over positions of outer(dout, x)"),
        Step("dbias", db, "eq. 3", "dout2 summed over positions"),
        Step("dx", dx, "eq. 4", "dout W"),
    ]
    e.checks.append(("npgpt.Linear.forward", _diff((lin.forward(x), out))))
    dx_m = lin.backward(dout)
    e.checks.append(("npgpt.Linear.backward", _diff((dx_m, dx), (lin.weight.grad, dW), (lin.bias.grad, db))))
    return e


def explain_dropout(x=None, seed=0, dout=None, p=0.5):
    from .layers.dropout import Dropout

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


def explain_embedding(x=None, seed=0, dout=None, num_embeddings=4, embedding_dim=3):
    from .layers.embedding import Embedding

    rng = np.random.default_rng(seed)
    idx = np.asarray([[1, 3, 1, 0]] if x is None else x)
    if idx.dtype.kind not in "iu" or idx.size == 0 or idx.min() < 0:
        raise ValueError(f"explain embedding: the input must be non-negative integer ids, got {idx!r}")
    num_embeddings = max(num_embeddings, int(idx.max()) + 1)
    emb = _round_params(Embedding(num_embeddings, embedding_dim, rng=rng))
    W = emb.weight.data
    onehot = (idx[..., None] == np.arange(num_embeddings)).astype(np.float64)  # (..., num)
    out = onehot @ W  # (..., dim): a row lookup written as a product
    e = Explanation("embedding", repr(emb), "docs/embedding.md")
    e.forward = [
        Step("idx", idx, "", "token ids"),
        Step("weight", W, "", "the table (num, dim)"),
        Step("out", out, "eq. 1", "weight[idx]: one row per id"),
    ]
    dout = _dout(rng, dout, out.shape, "embedding")
    dW = onehot.reshape(-1, num_embeddings).T @ dout.reshape(-1, embedding_dim)  # (num, dim)
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dweight", dW, "eq. 2", "scatter-add: row v sums dout where idx == v"),
    ]
    e.checks.append(("npgpt.Embedding.forward", _diff((emb.forward(idx), out))))
    emb.backward(dout)
    e.checks.append(("npgpt.Embedding.backward", _diff((emb.weight.grad, dW))))
    return e


def explain_loss(x=None, seed=0, dout=None, targets=None):
    from .loss import CrossEntropyLoss

    rng = np.random.default_rng(seed)
    logits = _floats("loss", x, _hand(rng, (3, 4)), 2)
    V = logits.shape[-1]
    y = np.asarray(rng.integers(0, V, logits.shape[:-1]) if targets is None else targets)
    if y.shape != logits.shape[:-1] or y.dtype.kind not in "iu" or y.min() < 0 or y.max() >= V:
        raise ValueError(f"explain loss: targets must be ids in [0, {V}) of shape {logits.shape[:-1]}")
    z, yf = logits.reshape(-1, V), y.reshape(-1)
    zmax = z.max(-1, keepdims=True)  # (N, 1)
    lse = zmax + np.log(np.exp(z - zmax).sum(-1, keepdims=True))  # (N, 1)
    logp = z - lse  # (N, V)
    nll = -logp[np.arange(len(yf)), yf]  # (N,)
    loss = nll.mean()
    e = Explanation("loss", "CrossEntropyLoss()", "docs/loss.md")
    e.forward = [
        Step("logits", z, "", "(N, V)"),
        Step("targets", yf, "", "one id per row"),
        Step("logsumexp", lse, "eq. 1", "max + log(sum(exp(logits - max)))"),
        Step("logp", logp, "eq. 1", "logits - logsumexp"),
        Step("nll", nll, "eq. 2", "-logp[target]"),
        Step("loss", np.float64(loss), "eq. 3", "mean(nll)"),
    ]
    probs = np.exp(logp)
    onehot = (yf[:, None] == np.arange(V)).astype(np.float64)
    d = 1.0 if dout is None else float(np.asarray(dout))
    dlogits = d * (probs - onehot) / len(yf)
    e.backward = [
        Step("softmax", probs, "eq. 4", "exp(logp)"),
        Step("onehot", onehot, "eq. 4", "1 at the target"),
        Step("dlogits", dlogits, "eq. 4", f"dout * (softmax - onehot) / N, dout = {d:g}"),
    ]
    m = CrossEntropyLoss()
    e.checks.append(("npgpt.CrossEntropyLoss.forward", abs(m.forward(logits, y) - loss)))
    e.checks.append(
        ("npgpt.CrossEntropyLoss.backward", _diff((m.backward(d), dlogits.reshape(logits.shape))))
    )
    return e


def explain(component, x=None, seed=0, dout=None, **options):
    """The Explanation of `component` (see COMPONENTS) for input `x` (default: a small example)."""
    from . import explain_nets

    table = {**EXPLAINERS, **explain_nets.EXPLAINERS}
    if component not in table:
        raise ValueError(f"explain: unknown component {component!r}; choose one of {', '.join(COMPONENTS)}")
    return table[component](x=x, seed=seed, dout=dout, **options)


EXPLAINERS = {
    "layernorm": explain_layernorm,
    "gelu": explain_gelu,
    "linear": explain_linear,
    "dropout": explain_dropout,
    "embedding": explain_embedding,
    "loss": explain_loss,
}
COMPONENTS = (
    "layernorm",
    "gelu",
    "linear",
    "dropout",
    "embedding",
    "feedforward",
    "attention",
    "block",
    "loss",
)
