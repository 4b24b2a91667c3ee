"""Linear properties: linearity in x (no bias), affine combinations (with bias), float32 against
float64 with elementwise rounding bounds.

Bounds: a dot product of n terms computed in floating point is off by at most
gamma_n = n u / (1 - n u) times the dot product of the absolute values (Higham, ch. 3).
"""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from npgpt import Linear
from tests.asserts import assert_below
from tests.strategies import arrays, dtypes, seeds, shapes, tiny, unit_roundoff


def gamma(n, dtype):
    u = unit_roundoff(dtype)
    return n * u / (1 - n * u)


@st.composite
def setups(draw, dtype):
    d_in, d_out = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    lead = draw(shapes(min_dims=0, max_dims=2, max_side=4))
    return d_in, d_out, tuple(lead) + (d_in,)


@given(dtype=dtypes(), seed=seeds, data=st.data())
def test_without_bias_the_map_is_linear(dtype, seed, data):
    d_in, d_out, shape = data.draw(setups(dtype), label="d_in, d_out, x shape")
    lin = Linear(d_in, d_out, bias=False, rng=seed).astype(dtype)
    x = data.draw(arrays(dtype, shape, bound=10.0), label="x")
    y = data.draw(arrays(dtype, shape, bound=10.0), label="y")
    a, b = data.draw(st.floats(-4, 4), label="a"), data.draw(st.floats(-4, 4), label="b")
    z = (a * x + b * y).astype(dtype)  # three roundings per element
    got = lin.forward(z).astype(np.float64)
    expected = a * lin.forward(x).astype(np.float64) + b * lin.forward(y)
    absW = np.abs(lin.weight.data.astype(np.float64))
    size = (np.abs(a * x) + np.abs(b * y)) @ absW.T  # (..., d_out)
    assert_below(
        "W (a x + b y) - (a W x + b W y)",
        got - expected,
        (gamma(d_in, dtype) + 4 * unit_roundoff(dtype)) * 2 * size + tiny(dtype),
    )


@given(dtype=dtypes(), seed=seeds, a=st.floats(-2, 3), data=st.data())
def test_with_bias_affine_combinations_are_preserved(dtype, seed, a, data):
    d_in, d_out, shape = data.draw(setups(dtype), label="d_in, d_out, x shape")
    lin = Linear(d_in, d_out, bias=True, rng=seed).astype(dtype)
    x = data.draw(arrays(dtype, shape, bound=10.0), label="x")
    y = data.draw(arrays(dtype, shape, bound=10.0), label="y")
    z = (a * x + (1 - a) * y).astype(dtype)
    got = lin.forward(z).astype(np.float64)
    expected = a * lin.forward(x).astype(np.float64) + (1 - a) * lin.forward(y)
    absW = np.abs(lin.weight.data.astype(np.float64))
    size = (np.abs(a * x) + np.abs((1 - a) * y)) @ absW.T + (abs(a) + abs(1 - a) + 1) * np.abs(lin.bias.data)
    assert_below(
        "f(a x + (1-a) y) - (a f(x) + (1-a) f(y))",
        got - expected,
        (gamma(d_in + 1, dtype) + 4 * unit_roundoff(dtype)) * 2 * size + tiny(dtype),
    )


@given(seed=seeds, bias=st.booleans(), data=st.data())
def test_float32_agrees_with_float64_and_keeps_its_dtype(seed, bias, data):
    d_in, d_out, shape = data.draw(setups(np.float32), label="d_in, d_out, x shape")
    l32 = Linear(d_in, d_out, bias=bias, rng=seed).astype(np.float32)
    l64 = Linear(d_in, d_out, bias=bias).load_state_dict(l32.state_dict())
    x = data.draw(arrays(np.float32, shape, bound=10.0), label="x")
    dout = data.draw(arrays(np.float32, shape[:-1] + (d_out,), bound=3.0), label="dout")
    out32, out64 = l32.forward(x), l64.forward(x.astype(np.float64))
    dx32, dx64 = l32.backward(dout), l64.backward(dout.astype(np.float64))
    for name, arr in [("out", out32), ("dx", dx32)] + [
        (f"{n}.grad", p.grad) for n, p in l32.named_parameters()
    ]:
        assert arr.dtype == np.float32, f"{name}: dtype {arr.dtype} from float32 input and parameters"
    W = np.abs(l64.weight.data)
    ax, ad = np.abs(x.astype(np.float64)), np.abs(dout.astype(np.float64))
    g = lambda n: gamma(n + 1, np.float32)  # noqa: E731  (+1: the final rounding to float32)
    b = np.abs(l64.bias.data) if bias else 0.0
    assert_below("out float32 - float64", out32 - out64, g(d_in + 1) * (ax @ W.T + b) + tiny(np.float32))
    assert_below("dx float32 - float64", dx32 - dx64, g(d_out) * (ad @ W) + tiny(np.float32))
    N = x.size // d_in
    ad2, ax2 = ad.reshape(N, d_out), ax.reshape(N, d_in)
    assert_below(
        "weight.grad float32 - float64",
        l32.weight.grad - l64.weight.grad,
        g(N) * (ad2.T @ ax2) + tiny(np.float32),
    )
    if bias:
        assert_below(
            "bias.grad float32 - float64", l32.bias.grad - l64.bias.grad, g(N) * ad2.sum(0) + tiny(np.float32)
        )
