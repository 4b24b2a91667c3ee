"""Linear: against an explicit sum, gradcheck with and without bias, errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npgpt import Linear, gradcheck
from tests.asserts import assert_close, assert_gradcheck
from tests.strategies import dtypes, seeds, shapes


def test_forward_is_the_explicit_sum():
    lin = Linear(3, 2, rng=0)
    x = np.arange(6.0).reshape(2, 3)
    expected = [
        [sum(x[n, i] * lin.weight.data[o, i] for i in range(3)) + lin.bias.data[o] for o in range(2)]
        for n in range(2)
    ]
    assert_close("out", lin.forward(x), expected, rtol=1e-14)


def test_init_is_pytorchs_uniform_bound():
    lin = Linear(16, 32, rng=0)
    bound = 1 / 4.0
    assert np.abs(lin.weight.data).max() <= bound and np.abs(lin.bias.data).max() <= bound
    assert np.abs(lin.weight.data).max() > 0.9 * bound  # the whole range is used


@given(
    shape=shapes(min_dims=1, max_dims=3, max_side=4),
    out=st.integers(1, 5),
    bias=st.booleans(),
    dtype=dtypes(),
    seed=seeds,
)
def test_gradcheck_drawn_shapes(shape, out, bias, dtype, seed):
    rng = np.random.default_rng(seed)
    lin = Linear(shape[-1], out, bias=bias, rng=rng).astype(dtype)
    assert_gradcheck(gradcheck(lin, rng.standard_normal(shape).astype(dtype), seed=seed))


def test_no_bias_means_no_bias_parameter():
    assert [n for n, _ in Linear(2, 3, bias=False, rng=0).named_parameters()] == ["weight"]


def test_dtype_preserved():
    lin = Linear(4, 3, rng=0).astype(np.float32)
    out = lin.forward(np.ones((2, 4), np.float32))
    dx = lin.backward(np.ones((2, 3), np.float32))
    assert out.dtype == dx.dtype == lin.weight.grad.dtype == np.float32


def test_errors():
    lin = Linear(4, 3, rng=0)
    with pytest.raises(ValueError, match=r"Linear.forward: x has shape \(2, 5\).*last dimension must be 4"):
        lin.forward(np.ones((2, 5)))
    with pytest.raises(RuntimeError, match="Linear.backward called before forward"):
        lin.backward(np.ones((2, 3)))
    lin.forward(np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"Linear.backward: dout has shape \(2, 4\), expected \(2, 3\)"):
        lin.backward(np.ones((2, 4)))


@pytest.mark.parametrize("fan_in,fan_out", [(0, 3), (3, 0)])
def test_zero_features(fan_in, fan_out):
    """An empty input or output dimension is a valid (if useless) layer: with no inputs the output
    is the bias; with no outputs the input gradient is 0. No reshape of an empty array fails."""
    lin = Linear(fan_in, fan_out, rng=0)
    x = np.ones((2, 4, fan_in))
    out = lin.forward(x)
    assert out.shape == (2, 4, fan_out), f"out has shape {out.shape}, expected (2, 4, {fan_out})"
    assert_close("out with no inputs = bias", out, np.broadcast_to(lin.bias.data, out.shape), rtol=0, atol=0)
    dx = lin.backward(np.ones_like(out))
    assert_close("dx", dx, np.zeros((2, 4, fan_in)), rtol=0, atol=0)
    assert_close(
        "bias.grad = dout summed over 8 positions", lin.bias.grad, np.full(fan_out, 8.0), rtol=0, atol=0
    )


def test_two_uses_accumulate_only_forward_backward_in_turn():
    """docs/linear.md: a module keeps its last forward's cache. Forward, backward, forward, backward
    gives the summed gradient 1 + 2 = 3; forward, forward, backward, backward uses x = 2 twice: 4."""
    lin = Linear(1, 1, bias=False)
    for x in (1.0, 2.0):
        lin.forward(np.array([[x]]))
        lin.backward(np.array([[1.0]]))
    assert lin.weight.grad[0, 0] == 3.0, f"F-B-F-B: weight.grad {lin.weight.grad[0, 0]}, expected 3"
    lin.zero_grad()
    lin.forward(np.array([[1.0]]))
    lin.forward(np.array([[2.0]]))
    lin.backward(np.array([[1.0]]))
    lin.backward(np.array([[1.0]]))
    assert lin.weight.grad[0, 0] == 4.0, f"F-F-B-B: weight.grad {lin.weight.grad[0, 0]}, the page says 4"
