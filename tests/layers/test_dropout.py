"""Dropout: inverted scaling, the mask shared by forward and backward, eval mode, p = 0 and 1."""

import numpy as np
import pytest

from npgpt import Dropout, gradcheck
from tests.asserts import assert_close, assert_gradcheck


def test_inverted_scaling_and_keep_fraction():
    d = Dropout(0.25, rng=0)
    x = np.ones((200, 500))
    out = d.forward(x)
    kept = out != 0
    assert_close("kept values", out[kept], np.full(kept.sum(), 1 / 0.75), rtol=1e-15)
    # 100,000 Bernoulli(0.75) draws: the kept fraction is within 5 standard deviations of 0.75
    assert abs(kept.mean() - 0.75) < 5 * np.sqrt(0.75 * 0.25 / x.size)


def test_backward_uses_the_forward_mask():
    d = Dropout(0.5, rng=1)
    x = np.random.default_rng(2).standard_normal((4, 6))
    out = d.forward(x)
    dx = d.backward(np.ones_like(x))
    assert_close("dx", dx, np.where(out != 0, 2.0, 0.0))


def test_explicit_mask():
    mask = np.array([[True, False, True]])
    out = Dropout(0.5, rng=0).forward(np.array([[1.0, 2.0, 3.0]]), mask=mask)
    assert_close("out", out, [[2.0, 0.0, 6.0]])
    with pytest.raises(ValueError, match=r"Dropout.forward: mask has shape \(2,\), x has \(1, 3\)"):
        Dropout(0.5).forward(np.ones((1, 3)), mask=np.ones(2, bool))


def test_identity_in_eval_mode_and_for_p_zero():
    x = np.random.default_rng(3).standard_normal((3, 4))
    for d in (Dropout(0.5, rng=0).eval(), Dropout(0.0, rng=0)):
        assert np.array_equal(d.forward(x), x)
        assert np.array_equal(d.backward(x), x)


def test_p_one_drops_everything():
    d = Dropout(1.0, rng=0)
    assert not d.forward(np.ones((3, 3))).any() and not d.backward(np.ones((3, 3))).any()


def test_seeded_generators_give_the_same_mask():
    x = np.ones((5, 7))
    assert np.array_equal(Dropout(0.3, rng=42).forward(x), Dropout(0.3, rng=42).forward(x))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradcheck_and_dtype(dtype):
    d = Dropout(0.4, rng=5)
    x = np.random.default_rng(6).standard_normal((3, 5)).astype(dtype)
    assert d.forward(x).dtype == d.backward(np.ones((3, 5), dtype)).dtype == dtype
    assert_gradcheck(gradcheck(d, x))


def test_bad_p():
    with pytest.raises(ValueError, match=r"Dropout: p must be in \[0, 1\], got 1.5"):
        Dropout(1.5)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("seed", [0, 1])
def test_expectation_is_preserved(p, seed):
    """docs/dropout.md: E[out_i] = x_i. The mean of n = 10^6 draws of x * m / (1 - p) has standard
    deviation |x| sqrt(p / ((1 - p) n)); within 6 of them a correct dropout misses with
    probability about 2e-9, and with fixed seeds the outcome is the same on every run."""
    n, x = 10**6, -1.7
    out = Dropout(p, rng=seed).forward(np.full(n, x))
    sd = abs(x) * np.sqrt(p / ((1 - p) * n))
    assert abs(out.mean() - x) <= 6 * sd, f"p={p}: mean {out.mean():.6f}, expected {x} within {6 * sd:.2e}"
    # a dropout that forgot the 1/(1-p) scaling is far outside that bound
    assert abs(out.mean() * (1 - p) - x) > 6 * sd, "the bound is too loose to catch a missing scale"
