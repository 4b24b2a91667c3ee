"""npgpt.fast's CrossEntropyLoss equals the reference (npgpt/loss.py): the loss and dlogits
(tests/fast/twins.py), with ignored targets and (N, V) or (B, T, V) logits."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from npgpt import CrossEntropyLoss
from tests.asserts import assert_normwise_rel
from tests.fast.twins import assert_twins_agree, small_blocks_two_threads  # noqa: F401
from tests.strategies import TWIN_RTOL, dtypes, logits_and_targets


@given(dtype=dtypes(), dout=st.sampled_from([1.0, 0.5]), data=st.data())
def test_fast_equals_reference(dtype, dout, data):
    logits, targets = data.draw(logits_and_targets(dtype), label="logits, targets")
    ref, fast, _ = assert_twins_agree(
        f"CrossEntropyLoss {dtype.__name__}", lambda dt: CrossEntropyLoss(), (logits, targets), dout, dtype
    )
    # the caches keep different arrays (logp; exp(z - max) and its row sums), the same softmax
    assert_normwise_rel(
        "CrossEntropyLoss cache.probs(), fast vs reference",
        fast.cache.probs(),
        ref.cache.probs(),
        TWIN_RTOL[np.dtype(dtype)],
    )
    assert isinstance(fast.forward(logits, targets), float), "the fast loss must be a Python float"
