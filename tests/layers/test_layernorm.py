"""LayerNorm: a hand-computed example, gradcheck on drawn shapes and dtypes, protocol errors."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npgpt import LayerNorm, gradcheck
from tests.asserts import assert_close, assert_gradcheck
from tests.strategies import arrays, dtypes, seeds, shapes, spread_rows


def test_hand_computed_row():
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    # mean 2.5; biased variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25; unbiased 5 / 3
    for var, unbiased in ((1.25, False), (5.0 / 3.0, True)):
        expected = [(v - 2.5) / math.sqrt(var + 1e-5) for v in (1.0, 2.0, 3.0, 4.0)]
        assert_close(f"out (unbiased={unbiased})", LayerNorm(4, unbiased=unbiased).forward(x), [expected])


def test_scale_and_shift_apply_per_feature():
    ln = LayerNorm(2, eps=1e-12)
    ln.scale.data[:] = [2.0, 3.0]
    ln.shift.data[:] = [10.0, -1.0]
    # a row [a, b] with a < b normalizes to [-1, 1]
    assert_close("out", ln.forward(np.array([[0.0, 4.0]])), [[10.0 - 2.0, -1.0 + 3.0]], rtol=1e-9)


@given(
    shape=shapes(min_dims=1, max_dims=3, last=None, max_side=5).filter(lambda s: s[-1] >= 2),
    dtype=dtypes(),
    unbiased=st.booleans(),
    seed=seeds,
)
def test_gradcheck_drawn_shapes(shape, dtype, unbiased, seed):
    rng = np.random.default_rng(seed)
    ln = LayerNorm(shape[-1], unbiased=unbiased).astype(dtype)
    ln.scale.data[:] = rng.uniform(0.5, 2.0, shape[-1])
    ln.shift.data[:] = rng.standard_normal(shape[-1])
    x = rng.standard_normal(shape).astype(dtype)
    assert_gradcheck(gradcheck(ln, x, seed=seed))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved_and_float32_agrees_with_float64(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 16))
    dout = rng.standard_normal((3, 4, 16))
    ref = LayerNorm(16)
    ref_out, ref_dx = ref.forward(x), ref.backward(dout)
    ln = LayerNorm(16).astype(dtype)
    out = ln.forward(x.astype(dtype))
    dx = ln.backward(dout.astype(dtype))
    assert out.dtype == dx.dtype == ln.scale.grad.dtype == ln.shift.grad.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert_close("out", out, ref_out, rtol=tol, atol=tol)
    assert_close("dx", dx, ref_dx, rtol=tol, atol=tol)
    assert_close("scale.grad", ln.scale.grad, ref.scale.grad, rtol=tol, atol=tol)


def test_gradients_accumulate():
    rng = np.random.default_rng(1)
    ln, x, dout = LayerNorm(5), rng.standard_normal((2, 5)), rng.standard_normal((2, 5))
    ln.forward(x)
    ln.backward(dout)
    once = ln.scale.grad.copy()
    ln.forward(x)
    ln.backward(dout)
    assert_close("scale.grad after two backwards", ln.scale.grad, 2 * once)


def test_protocol_errors_name_module_and_shapes():
    ln = LayerNorm(4)
    with pytest.raises(RuntimeError, match="LayerNorm.backward called before forward"):
        ln.backward(np.ones((2, 4)))
    with pytest.raises(
        ValueError, match=r"LayerNorm.forward: x has shape \(2, 3\).*last dimension must be 4"
    ):
        ln.forward(np.ones((2, 3)))
    with pytest.raises(TypeError, match="LayerNorm.forward: x must be a float array.*int64"):
        ln.forward(np.ones((2, 4), dtype=np.int64))
    ln.forward(np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"LayerNorm.backward: dout has shape \(4, 2\), expected \(2, 4\)"):
        ln.backward(np.ones((4, 2)))
    with pytest.raises(ValueError, match="unbiased=True needs emb_dim >= 2"):
        LayerNorm(1, unbiased=True)


def _row_sums_vanish(name, s, scale):
    """|s| (a row sum that is 0 in exact arithmetic) within float64 rounding of its terms."""
    bound = 64 * np.finfo(np.float64).eps * scale
    worst = int(np.argmax(np.abs(s) - bound))
    assert np.all(np.abs(s) <= bound), (
        f"{name}: row {worst} sums to {s.ravel()[worst]:.3e}, bound {bound.ravel()[worst]:.3e}"
    )


@given(
    x=spread_rows(np.float64, (3, 6)),
    dout=arrays(np.float64, (3, 6)),
    seed=seeds,
    unbiased=st.booleans(),
)
def test_dx_rows_sum_to_zero(x, dout, seed, unbiased):
    """docs/layernorm.md: sum_k dx_k = 0 (term1 and term2 cancel, term3 meets sum(xhat) = 0)."""
    ln = LayerNorm(6, unbiased=unbiased)
    rng = np.random.default_rng(seed)
    ln.scale.data[:] = rng.uniform(0.5, 2.0, 6)
    ln.shift.data[:] = rng.standard_normal(6)
    ln.forward(x)
    dx = ln.backward(dout)
    _row_sums_vanish("sum(dx)", dx.sum(-1), np.abs(dx).sum(-1) + np.abs(dout * ln.scale.data).sum(-1) * 10)


@given(x=spread_rows(np.float64, (3, 6)), dout=arrays(np.float64, (3, 6)), unbiased=st.booleans())
def test_dx_is_orthogonal_to_xhat_at_eps_zero_for_both_variances(x, dout, unbiased):
    """docs/layernorm.md: sum_k dx_k xhat_k = 0 needs eps = 0 only, biased or unbiased variance."""
    ln = LayerNorm(6, unbiased=unbiased)
    ln.eps = 0.0  # the constructor refuses eps = 0; the identity holds exactly there
    ln.forward(x)
    dx = ln.backward(dout)
    xhat = ln.cache.xhat
    s = (dx * xhat).sum(-1)
    _row_sums_vanish("sum(dx * xhat)", s, (np.abs(dx * xhat).sum(-1) + np.abs(dout).sum(-1)) * 10)
    # and with eps > 0 it is not an identity: a row of small spread shows it
    ln.eps = 1e-2
    ln.forward(np.array([[0.0, 0.1, 0.2, 0.0, 0.3, 0.1]]))
    dx = ln.backward(np.array([[1.0, -2.0, 0.5, 0.0, 3.0, 1.0]]))
    assert abs(float((dx * ln.cache.xhat).sum())) > 1e-3, "with eps > 0 the sum should not vanish"
