"""LayerNorm properties: normalized moments, shift and scale invariance, the gradient's two
constraints, constant rows, float32 against float64.

The reference quantities (mean, variance, xhat, rstd) are recomputed here in float64 from the
definition. Tolerances are rounding bounds: u is the unit roundoff of the dtype the module ran
in, and each bound counts the roundings on the path (sums over C features cost C of them).
"""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from npgpt import LayerNorm
from tests.asserts import assert_below, assert_close, assert_equal
from tests.strategies import arrays, dtypes, shapes, spread_rows, tiny, unit_roundoff

EPSILONS = st.sampled_from([1e-5, 1e-6, 1e-3])


def reference(x, eps, unbiased):
    """float64 mean-free rows, variance (divisor n), rstd and xhat, straight from the definition."""
    x = np.asarray(x, np.float64)
    n = x.shape[-1] - 1 if unbiased else x.shape[-1]
    xmu = x - x.mean(-1, keepdims=True)  # (..., C)
    var = (xmu * xmu).sum(-1, keepdims=True) / n  # (..., 1)
    rstd = 1.0 / np.sqrt(var + eps)  # (..., 1)
    return xmu, var, rstd, xmu * rstd, n


@st.composite
def cases(draw, min_spread=1e-2):
    """(x, unbiased, eps): rows of at least 2 features whose spread is at least `min_spread`."""
    dtype = draw(dtypes())
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=6).filter(lambda s: s[-1] >= 2))
    x = draw(spread_rows(dtype, shape, bound=10.0, min_spread=min_spread))
    return x, draw(st.booleans()), draw(EPSILONS)


def randomize(ln, draw, dtype):
    C = ln.emb_dim
    ln.scale.data[:] = draw(arrays(dtype, (C,), bound=3.0))
    ln.shift.data[:] = draw(arrays(dtype, (C,), bound=3.0))


@given(case=cases())
def test_rows_have_mean_zero_and_variance_var_over_var_plus_eps(case):
    x, unbiased, eps = case
    C, u = x.shape[-1], unit_roundoff(x.dtype)
    out = LayerNorm(C, eps=eps, unbiased=unbiased).astype(x.dtype).forward(x).astype(np.float64)
    _, var, _, _, n = reference(x, eps, unbiased)
    size = np.abs(out).max(-1)  # (...)
    assert_below("mean of out rows", out.mean(-1), 4 * C * u * np.maximum(size, 1.0) + tiny(x.dtype))
    omu = out - out.mean(-1, keepdims=True)
    assert_close(
        "variance of out rows", (omu * omu).sum(-1) / n, (var / (var + eps))[..., 0], rtol=8 * C * u, atol=0
    )


@given(case=cases(), data=st.data())
def test_adding_a_constant_to_a_row_changes_nothing(case, data):
    x, unbiased, eps = case
    C, u, dtype = x.shape[-1], unit_roundoff(x.dtype), x.dtype
    c = data.draw(arrays(dtype, x.shape[:-1] + (1,), bound=10.0), label="c")
    ln = LayerNorm(C, eps=eps, unbiased=unbiased).astype(dtype)
    randomize(ln, data.draw, dtype)
    x2 = (x + c).astype(dtype)  # each element rounded once: moved by <= u |x + c|
    got, expected = ln.forward(x2), ln.forward(x)
    _, _, rstd, xhat, _ = reference(x, eps, unbiased)
    # a perturbation d of the inputs moves xhat by <= ~2 max|d| * rstd; plus both runs' own rounding
    bound = 4 * u * np.abs(x2).max(-1, keepdims=True) * rstd + 16 * C * u * np.maximum(np.abs(xhat), 1.0)
    assert_below(
        "LN(x + c) - LN(x)",
        got.astype(np.float64) - expected,
        bound * (np.abs(ln.scale.data) + 1) + tiny(dtype),
    )


@given(case=cases(), k=st.integers(0, 6), data=st.data())
def test_scaling_a_row_by_a_power_of_two_is_exact(case, k, data):
    """LN_eps(a x) = LN_{eps / a^2}(x) exactly in math; with a = 2^k every rounding scales too,
    so the two must agree bit for bit."""
    x, unbiased, eps = case
    a = 2.0**k
    ln = LayerNorm(x.shape[-1], eps=eps, unbiased=unbiased).astype(x.dtype)
    randomize(ln, data.draw, x.dtype)
    ln_small_eps = LayerNorm(x.shape[-1], eps=eps / (a * a), unbiased=unbiased).astype(x.dtype)
    ln_small_eps.load_state_dict(ln.state_dict())
    assert_equal("LN_eps(2^k x) vs LN_{eps/4^k}(x)", ln.forward(a * x), ln_small_eps.forward(x))


@given(case=cases(), a=st.floats(0.1, 10.0), data=st.data())
def test_scaling_a_row_changes_the_output_only_through_eps(case, a, data):
    x, unbiased, eps = case
    C, u = x.shape[-1], unit_roundoff(x.dtype)
    ax = (a * x).astype(x.dtype)  # rounded once per element
    got = LayerNorm(C, eps=eps, unbiased=unbiased).astype(x.dtype).forward(ax)
    expected = LayerNorm(C, eps=eps / (a * a), unbiased=unbiased).astype(x.dtype).forward(x)
    _, _, rstd, xhat, _ = reference(ax, eps, unbiased)
    bound = 4 * u * np.abs(ax).max(-1, keepdims=True) * rstd + 16 * C * u * np.maximum(np.abs(xhat), 1.0)
    assert_below("LN_eps(a x) - LN_{eps/a^2}(x)", got.astype(np.float64) - expected, bound + tiny(x.dtype))


@given(case=cases(), data=st.data())
def test_dx_sums_to_zero_and_its_dot_with_xhat_is_the_eps_term(case, data):
    """sum_i dx_i = 0, and sum_i dx_i xhat_i = rstd * eps / (var + eps) * sum_i dxhat_i xhat_i:
    zero as eps -> 0 (LayerNorm is then scale invariant), exactly this with eps > 0."""
    x, unbiased, eps = case
    C, u, dtype = x.shape[-1], unit_roundoff(x.dtype), x.dtype
    ln = LayerNorm(C, eps=eps, unbiased=unbiased).astype(dtype)
    randomize(ln, data.draw, dtype)
    dout = data.draw(arrays(dtype, x.shape, bound=3.0), label="dout")
    ln.forward(x)
    dx = ln.backward(dout).astype(np.float64)
    _, var, rstd, xhat, n = reference(x, eps, unbiased)
    dxhat = dout * ln.scale.data.astype(np.float64)  # (..., C)
    S = (dxhat * xhat).sum(-1, keepdims=True)  # (..., 1)
    terms = rstd * (np.abs(dxhat) + np.abs(dxhat.mean(-1, keepdims=True)) + np.abs(xhat * S) / n)
    assert_below("sum of dx over features", dx.sum(-1), 8 * C * u * terms.sum(-1) + tiny(dtype))
    expected = (rstd * S * eps / (var + eps))[..., 0]
    bound = 8 * C * u * (terms * np.maximum(np.abs(xhat), 1.0)).sum(-1)
    assert_below(
        "dx . xhat - rstd eps S / (var + eps)", (dx * xhat).sum(-1) - expected, bound + tiny(x.dtype)
    )


@given(
    dtype=dtypes(),
    shape=shapes(min_dims=1, max_dims=3, max_side=6).filter(lambda s: s[-1] >= 2),
    unbiased=st.booleans(),
    eps=EPSILONS,
    data=st.data(),
)
def test_constant_rows_give_shift_and_finite_gradients(dtype, shape, unbiased, eps, data):
    C, u = shape[-1], unit_roundoff(dtype)
    c = data.draw(arrays(dtype, tuple(shape[:-1]) + (1,), bound=100.0), label="row values")
    x = np.broadcast_to(c, shape).astype(dtype)  # (..., C), every row constant
    ln = LayerNorm(C, eps=eps, unbiased=unbiased).astype(dtype)
    randomize(ln, data.draw, dtype)
    out = ln.forward(x)
    # x - mean(x) is a few ulps of c after the first pass and O(u^2 |c|) after the second
    bound = (
        4 * C * C * u * u * np.abs(c) / math.sqrt(eps) * np.abs(ln.scale.data)
        + u * np.abs(ln.shift.data)
        + tiny(dtype)
    )
    assert_below("out - shift on constant rows", out.astype(np.float64) - ln.shift.data, bound)
    dout = data.draw(arrays(dtype, shape, bound=3.0), label="dout")
    dx = ln.backward(dout)
    for name, g in (("dx", dx), ("scale.grad", ln.scale.grad), ("shift.grad", ln.shift.grad)):
        assert np.all(np.isfinite(g)), f"{name}: not finite at {np.argwhere(~np.isfinite(g))[0]}"
    # with xhat = 0: dx = (dxhat - mean(dxhat)) / sqrt(eps)
    dxhat = dout * ln.scale.data.astype(np.float64)
    expected = (dxhat - dxhat.mean(-1, keepdims=True)) / math.sqrt(eps)
    assert_close(
        "dx on constant rows",
        dx,
        expected,
        rtol=0,
        atol=8 * C * u * np.abs(dxhat).max(initial=0.0) / math.sqrt(eps) + tiny(dtype),
    )


@given(case=cases(), data=st.data())
def test_float32_agrees_with_float64_and_keeps_its_dtype(case, data):
    x, unbiased, eps = case
    x = x.astype(np.float32)
    C, u = x.shape[-1], unit_roundoff(np.float32)
    ln32 = LayerNorm(C, eps=eps, unbiased=unbiased).astype(np.float32)
    randomize(ln32, data.draw, np.float32)
    ln64 = LayerNorm(C, eps=eps, unbiased=unbiased).load_state_dict(ln32.state_dict())
    dout = data.draw(arrays(np.float32, x.shape, bound=3.0), label="dout")
    out32, out64 = ln32.forward(x), ln64.forward(x.astype(np.float64))
    dx32, dx64 = ln32.backward(dout), ln64.backward(dout.astype(np.float64))
    for name, a in (
        ("out", out32),
        ("dx", dx32),
        ("scale.grad", ln32.scale.grad),
        ("shift.grad", ln32.shift.grad),
    ):
        assert a.dtype == np.float32, f"{name}: dtype {a.dtype} from float32 input and parameters"
    _, _, rstd, xhat, _ = reference(x, eps, unbiased)
    size = np.abs(ln32.scale.data) * np.maximum(np.abs(xhat), 1.0) + np.abs(ln32.shift.data)
    assert_below(
        "out float32 - float64", out32.astype(np.float64) - out64, 16 * C * u * size + tiny(np.float32)
    )
    scale = rstd * np.abs(dout * ln32.scale.data).max(-1, keepdims=True)
    assert_below(
        "dx float32 - float64", dx32.astype(np.float64) - dx64, 32 * C * u * scale + tiny(np.float32)
    )
    N = x.size // C
    for name, g32, g64 in (
        ("scale.grad", ln32.scale.grad, ln64.scale.grad),
        ("shift.grad", ln32.shift.grad, ln64.shift.grad),
    ):
        assert_below(
            f"{name} float32 - float64",
            g32.astype(np.float64) - g64,
            16 * (N + C) * u * np.abs(dout).sum() * max(1.0, np.abs(xhat).max()) + tiny(np.float32),
        )


@given(dtype=dtypes(), C=st.integers(2, 6), unbiased=st.booleans(), data=st.data())
def test_rows_are_independent(dtype, C, unbiased, data):
    """Changing one row leaves every other row's output unchanged, bit for bit."""
    x = data.draw(spread_rows(dtype, (3, C)), label="x")
    y = x.copy()
    y[1] = data.draw(arrays(dtype, (C,), bound=10.0), label="new row")
    ln = LayerNorm(C, unbiased=unbiased).astype(dtype)
    a, b = ln.forward(x), ln.forward(y)
    assert_equal("rows 0 and 2 after changing row 1", b[[0, 2]], a[[0, 2]])
