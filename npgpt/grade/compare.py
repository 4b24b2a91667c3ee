"""Comparing a submission's array with the expected one, in float64.

The measure is CS231n's relative error, element by element:

    rel = max_i |a_i - b_i| / max(1e-8, |a_i| + |b_i|)

so values that are both tiny (under 1e-8) count by their absolute difference. The float32
checks use a norm-wise form instead, max|a - b| / max(1e-8, max|a| + max|b|), because float32
rounding (about 6e-8 of the largest intermediate) swamps small elements.
"""

from dataclasses import dataclass

import numpy as np

FLOOR = 1e-8


def rel_error(a, b, normwise=False):
    """CS231n relative error of two same-shape arrays (0 for empty arrays)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.size == 0:
        return 0.0
    if normwise:
        return float(np.max(np.abs(a - b)) / max(FLOOR, np.max(np.abs(a)) + np.max(np.abs(b))))
    return float(np.max(np.abs(a - b) / np.maximum(FLOOR, np.abs(a) + np.abs(b))))


@dataclass
class Comparison:
    ok: bool
    rel: float  # inf when the shapes differ or a value is not finite
    text: str  # empty when ok


def _fmt(v):
    return f"{v + 0.0:.6g}"  # + 0.0: a negative zero prints as 0, not -0


def compare(what, got, expected, tol, normwise=False, dtype=None):
    """Compare `got` with `expected`; the text names the worst element, both values and the error."""
    if got is None:
        return Comparison(False, np.inf, f"{what}: no value")
    expected = np.asarray(expected, np.float64)
    if dtype is not None and got.dtype != dtype:
        return Comparison(
            False,
            np.inf,
            f"{what} has dtype {got.dtype}, expected {np.dtype(dtype)} "
            "(compute in the dtype of the input and the parameters; with NumPy 2, a float32 array times "
            "an np.float64 scalar is float64: use Python floats)",
        )
    if got.shape != expected.shape:
        return Comparison(False, np.inf, f"{what} has shape {got.shape}, expected {expected.shape}")
    g = got.astype(np.float64)
    bad = ~np.isfinite(g)
    if bad.any():
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        return Comparison(
            False, np.inf, f"{what} is not finite: {_fmt(g[i])} at index {i} (expected {_fmt(expected[i])})"
        )
    rel = rel_error(g, expected, normwise)
    if rel <= tol:
        return Comparison(True, rel, "")
    if normwise:
        err = np.abs(g - expected)
    else:
        err = np.abs(g - expected) / np.maximum(FLOOR, np.abs(g) + np.abs(expected))
    i = np.unravel_index(int(np.argmax(err)), err.shape) if err.ndim else ()
    i = tuple(int(k) for k in i)
    return Comparison(
        False,
        rel,
        f"{what}: worst element at index {i}: expected {_fmt(expected[i])}, "
        f"got {_fmt(g[i])}; relative error {rel:.2e} (threshold {tol:.0e})",
    )
