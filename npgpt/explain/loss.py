"""`npgpt explain loss`: docs/loss.md, eq. 1-4, step by step."""

import numpy as np

from .steps import Explanation, Step, _diff, _floats, _hand


def explain_loss(x=None, seed=0, dout=None, targets=None):
    from ..loss import CrossEntropyLoss

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
