"""Diagnoses for failed tests, found by computing, never by guessing.

For a wrong array, in order: its shape (transposed? not summed over batch and time?), a constant
factor (sign, N, 1/N), the known-mistake variants of variants.py that it matches (and the correct
answer does not), and for LayerNorm's dx the shape of the residual got - expected row by row:
constant (the mean term), proportional to xhat (the variance term), or both.
"""

import numpy as np

from .compare import rel_error
from .variants import reference, variants

MATCH = 1e-6  # a variant "matches" when the submission agrees with it to this relative error


def explain(key, tensor, got, case, params, forward_ok=True):
    """A list of diagnosis sentences for `got` (the submission's `tensor` in `case`)."""
    if got is None or not np.all(np.isfinite(got)):
        return []
    exp = np.asarray(case.expected[tensor], np.float64)
    got = got.astype(np.float64)
    if got.shape != exp.shape:
        return _shape(tensor, got, exp)
    found = []
    for desc, thunk in variants(key, tensor, case, params):
        alt = np.asarray(thunk(), np.float64)
        if alt.shape == got.shape and rel_error(alt, exp) > MATCH and rel_error(got, alt) <= MATCH:
            found.append(f"it matches {desc}")
    if not np.any(got) and np.any(exp):
        found.append("it is all zeros: nothing was computed, or nothing was added into .grad")
    elif not found:
        found += _factor(got, exp, case)
    if key == "layernorm" and tensor == "dx" and forward_ok:  # residuals against the right xhat only
        found += _layernorm_residual(got, exp, case.inputs[0], params)
    return found


def _shape(tensor, got, exp):
    if got.ndim == 2 and got.shape == exp.T.shape and rel_error(got, exp.T) <= MATCH:
        hint = " (dW = dout^T @ x has shape (out, in), like weight)" if tensor.endswith("weight") else ""
        return [f"it is the transpose of the expected gradient{hint}"]
    lead = got.ndim - exp.ndim
    if lead > 0 and got.shape[lead:] == exp.shape:
        if rel_error(got.reshape((-1,) + exp.shape).sum(0), exp) <= MATCH:
            return [
                f"it is not summed over the leading axes (batch and time): shape {got.shape}; summing it "
                f"over axes {tuple(range(lead))} gives the expected gradient"
            ]
    if got.size == exp.size:
        return ["it has the right number of elements in the wrong shape: reshape back to the input's shape"]
    return []


def _factor(got, exp, case):
    with np.errstate(all="ignore"):  # values near 1e308 overflow: then there is no factor
        k = float(np.sum(got * exp) / max(np.sum(exp * exp), 1e-300))
        if not np.isfinite(k) or abs(k - 1.0) < 1e-6 or not rel_error(got, k * exp) <= MATCH:
            return []
    rows = int(np.prod(np.shape(case.inputs[0])[:-1])) or 1
    if abs(k + 1.0) < 1e-6:
        return ["it has the wrong sign (it is -1 times the expected value)"]
    for n, what in ((rows, f"the number of rows N = {rows}"), (2, "2")):
        if abs(k - n) < 1e-6 * n:
            return [
                f"it is {what} times the expected value (a mean taken as a sum, or something counted twice?)"
            ]
        if abs(k - 1.0 / n) < 1e-6 / n:
            return [f"it is 1/{n} of the expected value (a sum taken as a mean?)"]
    return [f"it is the expected value times a constant factor {k:.6g}"]


def _layernorm_residual(got, exp, x, params):
    """Classify r = got - expected per row: constant (mean term), along xhat (variance term), both."""
    C = x.shape[-1]
    r = (got - exp).reshape(-1, C)
    size = np.abs(r).max()
    if size == 0:
        return []
    ln = reference("layernorm", params)  # xhat as the reference computes it, with its own eps
    ln.forward(np.asarray(x, np.float64))
    xhat = ln.cache.xhat.reshape(-1, C)
    ones = np.ones_like(xhat)

    def fits(*bases):  # the largest residual left after a per-row least-squares fit on `bases`
        worst = 0.0
        for i in range(r.shape[0]):
            A = np.stack([b[i] for b in bases], 1)  # (C, k)
            coef = np.linalg.lstsq(A, r[i], rcond=None)[0]
            worst = max(worst, np.abs(r[i] - A @ coef).max())
        return worst <= 1e-6 * size

    if fits(ones):
        return [
            "the residual got - expected is constant along each row: the mean term of the gradient "
            "(- mean(dxhat) over the row) is missing or wrong"
        ]
    if fits(xhat):
        return [
            "the residual got - expected is proportional to xhat in each row: the variance term "
            "(- xhat * mean(dxhat * xhat) over the row) is missing or wrong"
        ]
    if fits(ones, xhat):
        return [
            "the residual got - expected is a + b * xhat in each row: both the mean and the variance "
            "terms of the gradient are missing or wrong"
        ]
    return []


def edge(key, case):
    """A sentence for a failed hidden edge case (the main case passed) whose cause its name makes plain."""
    name = case.name
    if key == "layernorm" and name == "large offset":
        return [
            "correct on ordinary rows but not on rows offset by 1e6: the variance is probably computed as "
            "E[x^2] - E[x]^2, which cancels catastrophically; subtract the mean first"
        ]
    if name in ("large logits", "large scores"):
        return [f"fails on {name}: exp overflows unless the row maximum is subtracted before exponentiating"]
    if name in ("T == 1", "single row", "single sequence"):
        return [
            f"fails on the {name} case: check reshapes, squeeze() and sums that assume a batch or time axis"
        ]
    if name == "large inputs":
        return [
            "fails for large |x|: x^3 or tanh overflows or 0 * inf gives NaN; clip x or use a stable form"
        ]
    return []
