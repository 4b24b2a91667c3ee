"""npgpt.fast's Linear equals the reference (npgpt/layers/linear.py): output, dx, weight and bias
gradients, norm-wise (tests/fast/twins.py), over odd feature sizes and leading shapes."""

from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from npgpt import Linear
from tests.fast.twins import assert_twins_agree, small_blocks_two_threads  # noqa: F401
from tests.strategies import arrays, dtypes, seeds


@given(
    n_in=st.integers(1, 9),
    n_out=st.integers(1, 9),
    lead=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
    bias=st.booleans(),
    dtype=dtypes(),
    seed=seeds,
    data=st.data(),
)
def test_fast_equals_reference(n_in, n_out, lead, bias, dtype, seed, data):
    x = data.draw(arrays(dtype, tuple(lead) + (n_in,), bound=3.0), label="x")
    dout = data.draw(arrays(dtype, tuple(lead) + (n_out,), bound=3.0), label="dout")

    def build(dt):
        return Linear(n_in, n_out, bias=bias, rng=seed).astype(dt)

    assert_twins_agree(f"Linear({n_in}, {n_out}) {dtype.__name__}", build, (x,), dout, dtype)
