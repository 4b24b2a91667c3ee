"""npgpt.fast's GELU equals the reference (npgpt/layers/gelu.py): it runs the same operations in
the same order, so output, dx and cache agree (norm-wise, tests/fast/twins.py), also for inputs
past the saturation point and 0-d arrays."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from npgpt import GELU
from tests.asserts import assert_equal, assert_normwise_rel
from tests.fast.twins import assert_twins_agree, small_blocks_two_threads  # noqa: F401
from tests.strategies import TWIN_RTOL, arrays, dtypes


@given(
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=9),
    dtype=dtypes(),
    bound=st.sampled_from([3.0, 50.0]),  # 50: past |x| = 30, where the clip applies
    data=st.data(),
)
def test_fast_equals_reference(shape, dtype, bound, data):
    x = data.draw(arrays(dtype, shape, bound=bound), label="x")
    dout = data.draw(arrays(dtype, shape, bound=3.0), label="dout")
    ref, fast, r = assert_twins_agree(f"GELU {dtype.__name__}", lambda dt: GELU(), (x,), dout, dtype)
    # stronger than the tolerance: the same operations in the same order give the same bits
    assert_equal("GELU out, fast vs reference", fast.forward(x), r["out"].astype(dtype))
    assert_equal("GELU dx, fast vs reference", fast.backward(dout), r["dx"])
    for field in ("x", "t"):
        assert_normwise_rel(
            f"GELU cache.{field}, fast vs reference",
            getattr(fast.cache, field),
            getattr(ref.cache, field),
            TWIN_RTOL[np.dtype(dtype)],
        )
