"""GELU (tanh approximation): values from the formula in plain Python, gradcheck, large inputs."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given

from npgpt import GELU, gradcheck
from tests.asserts import assert_close, assert_gradcheck
from tests.strategies import arrays, dtypes, seeds, shapes


def gelu_scalar(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def test_values_match_the_formula_in_plain_python():
    xs = [-6.0, -3.0, -1.0, -0.5, 0.0, 0.3, 1.0, 2.5, 7.0]
    expected = [gelu_scalar(v) for v in xs]
    assert_close("GELU(x)", GELU().forward(np.array(xs)), expected, rtol=1e-14, atol=1e-15)
    assert abs(GELU().forward(np.array([1.0]))[0] - 0.8412) < 1e-4  # the book's GELU(1) ~ 0.841


@given(x=dtypes().flatmap(lambda d: arrays(d, shapes(max_dims=3), bound=6.0)), seed=seeds)
def test_gradcheck_drawn_inputs(x, seed):
    assert_gradcheck(gradcheck(GELU(), x, seed=seed))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_inputs_stay_finite_without_warnings(dtype):
    x = np.array([-1e30, -1e4, -50.0, -10.0, 10.0, 50.0, 1e4, 1e30], dtype=dtype)
    g = GELU()
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        out = g.forward(x)
        dx = g.backward(np.ones_like(x))
    assert out.dtype == dx.dtype == dtype
    # GELU(x) -> x for large positive x and -> 0 for large negative x; its slope -> 1 and 0
    assert_close("out", out, np.where(x > 0, x, 0.0), rtol=1e-6, atol=1e-6)
    assert_close("dx", dx, np.where(x > 0, 1.0, 0.0), rtol=1e-6, atol=1e-6)


def test_protocol_errors():
    g = GELU()
    with pytest.raises(RuntimeError, match="GELU.backward called before forward"):
        g.backward(np.ones(3))
    g.forward(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"GELU.backward: dout has shape \(3,\), expected \(2, 3\)"):
        g.backward(np.ones(3))
    with pytest.raises(TypeError, match="GELU.forward: x must be a float array"):
        g.forward(np.array(["a"], dtype=object))
