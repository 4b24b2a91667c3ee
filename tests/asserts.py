"""Assertions whose messages name the tensor, the worst element and both values."""

import numpy as np


def assert_close(name, got, expected, rtol=1e-10, atol=1e-12):
    """Fail unless |got - expected| <= atol + rtol * |expected| everywhere; say where it is worst."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{name}: shape {got.shape}, expected {expected.shape}"
    g, e = got.astype(np.float64), expected.astype(np.float64)
    err = np.abs(g - e)
    excess = np.where(np.isnan(err), np.inf, err - (atol + rtol * np.abs(e)))
    if excess.size == 0 or np.all(excess <= 0):
        return
    w = np.unravel_index(int(np.argmax(excess)), excess.shape)
    raise AssertionError(
        f"{name}: worst element at {tuple(int(i) for i in w)}: got {g[w]!r}, expected {e[w]!r} "
        f"(abs error {err[w]:.3e}, rel error {err[w] / max(abs(e[w]), 1e-300):.3e}; "
        f"rtol {rtol:g}, atol {atol:g}; {int(np.sum(excess > 0))} of {excess.size} elements off)"
    )


def assert_gradcheck(report):
    """Fail with the whole report table when a gradcheck did not pass."""
    assert report.passed, f"gradcheck failed:\n{report}"


def assert_equal(name, got, expected):
    """Fail unless `got` equals `expected` element for element (NaN equals NaN); say where it differs."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{name}: shape {got.shape}, expected {expected.shape}"
    differ = ~((got == expected) | (np.isnan(got) & np.isnan(expected)))
    if not differ.any():
        return
    w = tuple(int(i) for i in np.argwhere(differ)[0])
    raise AssertionError(
        f"{name}: first differing element at {w}: got {got[w]!r}, expected {expected[w]!r} "
        f"({int(differ.sum())} of {differ.size} elements differ)"
    )


def assert_below(name, value, bound):
    """Fail unless |value| <= bound everywhere (`bound` broadcasts); say where |value| exceeds it most."""
    value = np.asarray(value, dtype=np.float64)
    bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), value.shape)
    excess = np.where(np.isnan(value), np.inf, np.abs(value) - bound)
    if excess.size == 0 or np.all(excess <= 0):
        return
    w = np.unravel_index(int(np.argmax(excess)), excess.shape)
    raise AssertionError(
        f"{name}: worst element at {tuple(int(i) for i in w)}: |{value[w]!r}| exceeds the bound "
        f"{bound[w]:.3e} ({int(np.sum(excess > 0))} of {excess.size} elements over)"
    )


def assert_true(name, ok, values, what):
    """Fail unless the boolean array `ok` is all True; report the first failing index and its value."""
    ok, values = np.asarray(ok), np.asarray(values)
    if ok.all():
        return
    w = tuple(int(i) for i in np.argwhere(~ok)[0])
    raise AssertionError(
        f"{name}: {what} fails at {w}: value {values[w]!r} ({int((~ok).sum())} of {ok.size} elements)"
    )


def assert_normwise(name, got, expected, rtol, scale=None):
    """Fail unless max|got - expected| <= rtol * scale, scale = max|expected| unless given: agreement
    relative to the tensor's largest element (how float32 against float64 is judged for composed
    layers). Pass `scale` for a tensor that is zero in exact arithmetic (e.g. the key bias's gradient)."""
    got, expected = np.asarray(got), np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape, f"{name}: shape {got.shape}, expected {expected.shape}"
    err = np.abs(got.astype(np.float64) - expected)
    err = np.where(np.isnan(err), np.inf, err)
    if scale is None:
        scale = float(np.abs(expected).max(initial=0.0))
    scale = max(scale, 1e-30)
    if err.size == 0 or err.max() <= rtol * scale:
        return
    w = np.unravel_index(int(np.argmax(err)), err.shape)
    raise AssertionError(
        f"{name}: worst element at {tuple(int(i) for i in w)}: got {got[w]!r}, expected {expected[w]!r} "
        f"(abs error {err[w]:.3e} = {err[w] / scale:.3e} of max|expected| {scale:.3e}; rtol {rtol:g})"
    )


def assert_normwise_rel(name, got, expected, rtol, floor=0.0):
    """Fail unless ||got - expected|| <= rtol * max(||expected||, floor), 2-norms over the whole
    tensor: the norm-wise relative error. `floor` is for a tensor that vanishes (or nearly) in
    exact arithmetic, whose rounding is measured against the size of the terms it sums. Names
    the worst element."""
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape, f"{name}: shape {got.shape}, expected {expected.shape}"
    diff = np.where(np.isnan(got) & np.isnan(expected), 0.0, got - expected)
    diff = np.where(np.isnan(diff), np.inf, diff)
    err, size = float(np.linalg.norm(diff.ravel())), max(float(np.linalg.norm(expected.ravel())), floor)
    if err <= rtol * size:
        return
    w = np.unravel_index(int(np.argmax(np.abs(diff))), diff.shape) if diff.size else ()
    raise AssertionError(
        f"{name}: norm-wise relative error {err / max(size, 1e-300):.3e} > {rtol:g} "
        f"(||diff|| {err:.3e}, ||expected|| {np.linalg.norm(expected.ravel()):.3e}, floor {floor:.3e}); "
        f"worst element at {tuple(int(i) for i in w)}: got {got[w]!r}, expected {expected[w]!r}"
    )
