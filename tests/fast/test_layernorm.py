"""npgpt.fast's LayerNorm equals the reference (npgpt/layers/layernorm.py): output, dx, both
gradients and the cache, norm-wise (tests/fast/twins.py)."""

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from npgpt import LayerNorm
from tests.asserts import assert_normwise_rel
from tests.fast.twins import assert_twins_agree, randomize, small_blocks_two_threads  # noqa: F401
from tests.strategies import TWIN_RTOL, arrays, dtypes, feature_shapes, seeds, spread_rows


@given(shape=feature_shapes(), dtype=dtypes(), unbiased=st.booleans(), seed=seeds, data=st.data())
def test_fast_equals_reference(shape, dtype, unbiased, seed, data):
    C = shape[-1]
    assume(not (unbiased and C < 2))
    x = data.draw(spread_rows(dtype, shape, bound=10.0, min_spread=0.1), label="x")
    dout = data.draw(arrays(dtype, shape, bound=3.0), label="dout")

    def build(dt):
        return randomize(LayerNorm(C, unbiased=unbiased).astype(dt), seed)

    def dx_terms(ref):  # eq. 9 subtracts terms of the size of dxhat * rstd (C = 2: dx vanishes)
        return {"dx": float(np.linalg.norm(dout * ref.scale.data * ref.cache.rstd))}

    label = f"LayerNorm({C}) {dtype.__name__}"
    ref, fast, _ = assert_twins_agree(label, build, (x,), dout, dtype, dx_terms)
    rtol = TWIN_RTOL[np.dtype(dtype)]
    for field in ("xhat", "rstd"):
        assert_normwise_rel(
            f"LayerNorm cache.{field}, fast vs reference",
            getattr(fast.cache, field),
            getattr(ref.cache, field),
            rtol,
        )
    assert fast.cache.n == ref.cache.n, f"cache.n {fast.cache.n}, reference {ref.cache.n}"
