"""`npgpt explain loss`: docs/loss.md gate by gate (g1-g4 and back), one target set to
ignore_index by default, then the fused gradient (eq. 4), checked against the reference's
cache, loss and gradient. `loss_gates` and `loss_backward_gates` serve the model explainer.
"""

import numpy as np

from .steps import Explanation, Step, _diff, _floats, _hand

IGNORE = -100


def loss_gates(z, y, ignore_index=IGNORE):
    """The forward gates g1-g4 by hand: z (N, V) logits, y (N,) targets."""
    keep = y != ignore_index  # (N,)
    f = {"logits": z, "targets": y, "keep": keep, "n": int(keep.sum())}
    zmax = z.max(-1, keepdims=True)  # (N, 1)
    f["lse"] = zmax + np.log(np.exp(z - zmax).sum(-1, keepdims=True))  # (N, 1)   g1
    f["logp"] = z - f["lse"]  # (N, V)   g2
    rows = np.arange(len(y))
    f["nll"] = np.where(keep, -f["logp"][rows, np.where(keep, y, 0)], 0.0)  # (N,)   g3
    f["loss"] = f["nll"][keep].sum() / f["n"]  # g4
    return f


def loss_backward_gates(f, dout=1.0):
    """The backward gates g4-g1 by hand, in that order."""
    z, y, keep = f["logits"], f["targets"], f["keep"]
    b = {"dnll": np.where(keep, dout / f["n"], 0.0)}  # (N,)   g4
    onehot = (np.where(keep, y, -1)[:, None] == np.arange(z.shape[-1])).astype(np.float64)
    b["dlogp"] = -b["dnll"][:, None] * onehot  # (N, V)   g3
    b["dlse"] = -b["dlogp"].sum(-1, keepdims=True)  # (N, 1)   g2
    b["softmax"] = np.exp(z - f["lse"])  # (N, V): g1's local gradient
    b["dlogits"] = b["dlogp"] + b["dlse"] * b["softmax"]  # g2's part + g1's part
    return b


def explain_loss(x=None, seed=0, dout=None, targets=None):
    from ..loss import CrossEntropyLoss

    rng = np.random.default_rng(seed)
    logits = _floats("loss", x, _hand(rng, (3, 4)), 2)
    V = logits.shape[-1]
    if targets is None:
        y = rng.integers(0, V, logits.shape[:-1])
        y.reshape(-1)[len(y.reshape(-1)) // 2] = IGNORE  # one ignored row, to show its zeros
    else:
        y = np.asarray(targets)
    bad = y.dtype.kind not in "iu" or np.any(((y < 0) | (y >= V)) & (y != IGNORE))
    if y.shape != logits.shape[:-1] or bad:
        raise ValueError(
            f"explain loss: targets must be ids in [0, {V}) or {IGNORE} (ignored), of shape {logits.shape[:-1]}"
        )
    if np.all(y == IGNORE):
        raise ValueError("explain loss: every target is ignore_index; the mean is undefined")
    z, yf = logits.reshape(-1, V), y.reshape(-1)
    f = loss_gates(z, yf)
    d = 1.0 if dout is None else float(np.asarray(dout))
    b = loss_backward_gates(f, d)
    e = Explanation("loss", f"CrossEntropyLoss(ignore_index={IGNORE})", "docs/loss.md")
    e.forward = [
        Step("logits", z, "", "(N, V)"),
        Step("targets", yf, "", f"one id per row; {IGNORE} = ignored"),
        Step("keep", f["keep"].astype(np.int64), "", f"rows that count: n = {f['n']}"),
        Step("lse", f["lse"], "g1", "logsumexp: max + log(sum(exp(logits - max)))"),
        Step("logp", f["logp"], "g2", "logits - lse (eq. 1)"),
        Step("nll", f["nll"], "g3", "-logp[target]; 0 for an ignored row (eq. 2)"),
        Step("loss", np.float64(f["loss"]), "g4", "sum(nll over kept rows) / n (eq. 3)"),
    ]
    e.backward = [
        Step("dnll", b["dnll"], "g4", f"dout / n on kept rows, 0 on ignored; dout = {d:g}"),
        Step("dlogp", b["dlogp"], "g3", "-dnll at the target"),
        Step("dlse", b["dlse"], "g2", "-sum(dlogp) = dnll"),
        Step("softmax", b["softmax"], "g1", "exp(logits - lse): d lse / d logits"),
        Step("dlogits", b["dlogits"], "g1", "dlogp + dlse * softmax (both parts)"),
    ]
    onehot = (np.where(f["keep"], yf, -1)[:, None] == np.arange(V)).astype(np.float64)
    fused = np.where(f["keep"][:, None], d / f["n"] * (b["softmax"] - onehot), 0.0)  # eq. 4
    e.checks.append(("eq. 4 = the gates' dlogits", _diff((fused, b["dlogits"]))))
    m = CrossEntropyLoss(ignore_index=IGNORE)
    loss_m = m.forward(logits, y)
    e.checks.append(
        ("npgpt.CrossEntropyLoss cache: logp, n", _diff((m.cache.logp, f["logp"]), (m.cache.n, f["n"])))
    )
    e.checks.append(("npgpt.CrossEntropyLoss.forward", abs(loss_m - f["loss"])))
    e.checks.append(
        ("npgpt.CrossEntropyLoss.backward", _diff((m.backward(d), b["dlogits"].reshape(logits.shape))))
    )
    return e
