"""CrossEntropyLoss: a hand-computed loss, ignore_index, the fused gradient, errors."""

import math

import numpy as np
import pytest

from npgpt import CrossEntropyLoss, gradcheck
from tests.asserts import assert_close, assert_gradcheck


def test_hand_computed_loss_and_gradient():
    logits = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    targets = np.array([2, 0])
    z = math.exp(1) + math.exp(2) + math.exp(3)
    expected = (-(3 - math.log(z)) + math.log(3)) / 2
    loss_fn = CrossEntropyLoss()
    loss = loss_fn.forward(logits, targets)
    assert isinstance(loss, float)
    assert abs(loss - expected) < 1e-14
    p = [math.exp(1) / z, math.exp(2) / z, math.exp(3) / z]
    expected_grad = np.array([[p[0], p[1], p[2] - 1], [1 / 3 - 1, 1 / 3, 1 / 3]]) / 2
    assert_close("dlogits", loss_fn.backward(), expected_grad, rtol=1e-13)


def test_ignore_index_rows_do_not_count():
    logits = np.random.default_rng(0).standard_normal((2, 3, 5))
    targets = np.array([[1, -100, 4], [-100, 0, 2]])
    loss_fn = CrossEntropyLoss()
    loss = loss_fn.forward(logits, targets)
    kept = CrossEntropyLoss().forward(logits[targets != -100], targets[targets != -100])
    assert abs(loss - kept) < 1e-14
    d = loss_fn.backward()
    assert d.shape == (2, 3, 5) and not d[targets == -100].any()


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 7)])
def test_gradcheck_fused_gradient(shape):
    rng = np.random.default_rng(1)
    targets = rng.integers(0, 7, shape[:-1])
    targets.flat[0] = 3  # at least one target counts
    targets.flat[-1] = -100
    assert_gradcheck(gradcheck(CrossEntropyLoss(), 3 * rng.standard_normal(shape), targets))


def test_backward_scales_with_dout():
    rng = np.random.default_rng(2)
    loss_fn = CrossEntropyLoss()
    loss_fn.forward(rng.standard_normal((3, 4)), np.array([0, 1, 2]))
    assert_close("dlogits * 2.5", loss_fn.backward(2.5), 2.5 * loss_fn.backward(1.0))


def test_float32_logits_give_float32_gradient():
    loss_fn = CrossEntropyLoss()
    loss_fn.forward(np.zeros((2, 3), np.float32), np.array([0, 1]))
    assert loss_fn.backward().dtype == np.float32


def test_errors():
    loss_fn = CrossEntropyLoss()
    with pytest.raises(IndexError, match=r"targets holds id 5 outside \[0, 5\)"):
        loss_fn.forward(np.zeros((2, 5)), np.array([0, 5]))
    with pytest.raises(ValueError, match=r"targets has shape \(3,\), expected \(2,\)"):
        loss_fn.forward(np.zeros((2, 5)), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="every target is ignore_index"):
        loss_fn.forward(np.zeros((2, 5)), np.array([-100, -100]))
    with pytest.raises(TypeError, match="targets must be an integer array"):
        loss_fn.forward(np.zeros((2, 5)), np.array([0.0, 1.0]))
    with pytest.raises(RuntimeError, match="CrossEntropyLoss.backward called before forward"):
        CrossEntropyLoss().backward()
