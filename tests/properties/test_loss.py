"""CrossEntropyLoss properties: agreement with a row-by-row math.fsum/log reference, loss >= 0,
uniform logits give log V, gradient rows sum to 0, shift invariance per row, ignored rows get
zero gradient, (B, T, V) equals its flattening, gradcheck, float32 against float64.
"""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from npgpt import CrossEntropyLoss, gradcheck
from tests.asserts import assert_below, assert_close, assert_equal, assert_gradcheck
from tests.strategies import arrays, dtypes, logits_and_targets, tiny, unit_roundoff

IGNORE = -100


def reference_loss(logits, targets):
    """Mean over kept rows of logsumexp(z) - z[y], each row with Python's math (float64)."""
    z = np.asarray(logits, np.float64).reshape(-1, logits.shape[-1])
    nll = []
    for row, y in zip(z, np.asarray(targets).reshape(-1)):
        if y == IGNORE:
            continue
        m = max(row)
        nll.append(m + math.log(math.fsum(math.exp(v - m) for v in row)) - row[y])
    return math.fsum(nll) / len(nll)


def reference_probs(logits):
    z = np.asarray(logits, np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def loss_bound(logits, dtype):
    """Rounding bound on one row's loss: z - max(z) and the log-sum-exp each cost a few u of
    their size, |z - max z| <= 2 max|z|, log-sum-exp <= log V."""
    V = logits.shape[-1]
    return 8 * unit_roundoff(dtype) * (2 * float(np.abs(logits).max()) + math.log(V) + 1)


@given(dtype=dtypes(), data=st.data())
def test_loss_is_nonnegative_and_matches_the_math_reference(dtype, data):
    logits, targets = data.draw(logits_and_targets(dtype), label="logits, targets")
    loss = CrossEntropyLoss(ignore_index=IGNORE).forward(logits, targets)
    assert isinstance(loss, float), f"loss is a {type(loss).__name__}, not a Python float"
    assert loss >= 0.0, f"loss {loss!r} < 0 for logits of shape {logits.shape}"
    expected = reference_loss(logits, targets)
    assert abs(loss - expected) <= loss_bound(logits, dtype), f"loss {loss!r}, reference {expected!r}"


@given(dtype=dtypes(), data=st.data())
def test_uniform_logits_give_log_V(dtype, data):
    logits, targets = data.draw(logits_and_targets(dtype), label="shape source")
    c = data.draw(arrays(dtype, logits.shape[:-1] + (1,), bound=50.0), label="row values")
    logits = np.broadcast_to(c, logits.shape).astype(dtype)
    loss = CrossEntropyLoss(ignore_index=IGNORE).forward(logits, targets)
    V = logits.shape[-1]
    # z - max z = 0 exactly, the sum is V exactly: only log V's rounding and the mean's remain
    bound = (unit_roundoff(dtype) + targets.size * unit_roundoff(np.float64)) * math.log(max(V, 2))
    assert abs(loss - math.log(V)) <= bound, f"loss {loss!r} for uniform logits, log V = {math.log(V)!r}"


@given(dtype=dtypes(), data=st.data())
def test_gradient_rows_sum_to_zero_and_ignored_rows_get_zero(dtype, data):
    logits, targets = data.draw(logits_and_targets(dtype), label="logits, targets")
    ce = CrossEntropyLoss(ignore_index=IGNORE)
    ce.forward(logits, targets)
    dlogits = ce.backward()
    assert dlogits.shape == logits.shape and dlogits.dtype == logits.dtype, (
        f"dlogits: shape {dlogits.shape} dtype {dlogits.dtype}, logits {logits.shape} {logits.dtype}"
    )
    ignored = targets == IGNORE
    assert_equal("dlogits on ignored rows", dlogits[ignored], np.zeros_like(dlogits[ignored]))
    n = int((~ignored).sum())
    p = reference_probs(logits)
    s = np.abs(np.log(np.maximum(p, 1e-300)))  # |log p|, the size of the exponent's argument
    bound = 8 * unit_roundoff(dtype) * ((p * (s + 1)).sum(-1) + logits.shape[-1]) / n + tiny(dtype)
    assert_below("row sums of dlogits", dlogits.astype(np.float64).sum(-1), bound)


@given(dtype=dtypes(), data=st.data())
def test_adding_a_constant_to_a_row_of_logits_changes_nothing(dtype, data):
    logits, targets = data.draw(logits_and_targets(dtype), label="logits, targets")
    c = data.draw(arrays(dtype, logits.shape[:-1] + (1,), bound=10.0), label="c")
    shifted = (logits + c).astype(dtype)  # each element rounded once: <= u |z + c|
    ce = CrossEntropyLoss(ignore_index=IGNORE)
    loss, d = ce.forward(logits, targets), ce.backward()
    loss2, d2 = ce.forward(shifted, targets), ce.backward()
    n = int((targets != IGNORE).sum())
    bound = loss_bound(shifted, dtype) * 2
    assert abs(loss2 - loss) <= bound, f"loss {loss!r} becomes {loss2!r} after adding a row constant"
    assert_close("dlogits after adding a row constant", d2, d, rtol=0, atol=bound / n + tiny(dtype))


@given(dtype=dtypes(), data=st.data())
def test_batch_time_shape_equals_its_flattening(dtype, data):
    logits, targets = data.draw(logits_and_targets(dtype), label="logits, targets")
    ce = CrossEntropyLoss(ignore_index=IGNORE)
    loss, d = ce.forward(logits, targets), ce.backward()
    flat_loss = ce.forward(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    assert loss == flat_loss, f"loss {loss!r} for shape {logits.shape}, {flat_loss!r} flattened"
    assert_equal("dlogits flattened", ce.backward().reshape(logits.shape), d)


@given(data=st.data())
def test_backward_agrees_with_gradcheck(data):
    logits, targets = data.draw(logits_and_targets(np.float64), label="logits, targets")
    assert_gradcheck(gradcheck(CrossEntropyLoss(ignore_index=IGNORE), logits, targets))


@given(data=st.data())
def test_float32_agrees_with_float64_and_keeps_its_dtype(data):
    logits, targets = data.draw(logits_and_targets(np.float32), label="logits, targets")
    ce32, ce64 = CrossEntropyLoss(ignore_index=IGNORE), CrossEntropyLoss(ignore_index=IGNORE)
    loss32, loss64 = ce32.forward(logits, targets), ce64.forward(logits.astype(np.float64), targets)
    d32, d64 = ce32.backward(), ce64.backward()
    assert d32.dtype == np.float32, f"dlogits: dtype {d32.dtype} from float32 logits"
    bound = loss_bound(logits, np.float32)
    assert abs(loss32 - loss64) <= bound, f"loss float32 {loss32!r}, float64 {loss64!r}"
    assert_close(
        "dlogits float32 vs float64",
        d32,
        d64,
        rtol=0,
        atol=bound / int((targets != IGNORE).sum()) + tiny(np.float32),
    )
