"""The catalogue of known mistakes (npgpt/mistakes.py) is derived from the reference: each class
is a reference class overriding one of its named steps, and each mistake computes what the
mistake computes, checked against hand formulas in plain Python (per row, per element) or
against a property of the mistake, never against the catalogue's own code.
"""

import inspect
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from npgpt import mistakes
from npgpt.layers import GELU, LayerNorm, Linear, MultiHeadAttention
from tests.asserts import assert_close, assert_true
from tests.strategies import seeds

STEPS = {
    LayerNorm: {"variance", "rstd", "input_grad", "mean_term", "variance_term"},
    GELU: {"u", "du_dx", "local_grad", "forward"},  # forward: another curve than the tanh one
    MultiHeadAttention: {"scores", "softmax", "row_max", "softmax_backward", "scores_backward"},
}


def mistake_classes():
    return [
        c
        for _, c in inspect.getmembers(mistakes, inspect.isclass)
        if c.__module__ == mistakes.__name__ and issubclass(c, tuple(STEPS))
    ]


def test_every_mistake_is_a_reference_subclass_overriding_steps_only():
    classes = mistake_classes()
    assert len(classes) >= 18, f"found only {[c.__name__ for c in classes]}"
    for cls in classes:
        base = next(b for b in STEPS if issubclass(cls, b))
        own = {n for n, v in vars(cls).items() if inspect.isfunction(v)}
        assert own <= STEPS[base], (
            f"{cls.__name__} overrides {own - STEPS[base]}, not a step of {base.__name__}"
        )
        assert len(own) <= 2, f"{cls.__name__} overrides {sorted(own)}: one step (two for a kept value)"
        if not own:  # two mistakes at once: made of mistake classes only
            assert all(b in classes for b in cls.__bases__), f"{cls.__name__}: bases {cls.__bases__}"


def test_the_steps_a_mistake_overrides_are_the_references_own():
    """A step a mistake overrides must be one the reference calls: a method the reference lacks
    would be overridden in vain."""
    for base, steps in STEPS.items():
        missing = [s for s in steps if not callable(getattr(base, s, None))]
        assert not missing, f"{base.__name__} has no step {missing}"


def rows_and_douts(seed, R=3, C=5):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(R, C)) * 3.0 + 1.0,
        rng.normal(size=(R, C)),
        rng.normal(size=C),
        rng.normal(size=C),
    )


def layernorm_dx_by_hand(row, drow, scale, eps, mean_term=True, variance_term=True):
    C = len(row)
    mean = sum(row) / C
    rstd = 1.0 / math.sqrt(sum((a - mean) ** 2 for a in row) / C + eps)
    xhat = [(a - mean) * rstd for a in row]
    dxhat = [d * g for d, g in zip(drow, scale)]
    term2 = sum(dxhat) / C if mean_term else 0.0
    term3 = sum(d * h for d, h in zip(dxhat, xhat)) / C if variance_term else 0.0
    return [rstd * (d - term2 - h * term3) for d, h in zip(dxhat, xhat)]


@settings(max_examples=10, deadline=None)
@given(seed=seeds, eps=st.sampled_from([1e-5, 0.25]))
def test_layernorm_without_the_mean_or_the_variance_term_by_hand(seed, eps):
    x, dout, scale, shift = rows_and_douts(seed)
    for cls, keep in [(mistakes.NoMeanTerm, (False, True)), (mistakes.NoVarianceTerm, (True, False))]:
        ln = cls(x.shape[-1], eps=eps)
        ln.scale.data, ln.shift.data = scale.copy(), shift.copy()
        ln.forward(x)
        got = ln.backward(dout)
        want = [layernorm_dx_by_hand(r, d, scale, eps, *keep) for r, d in zip(x.tolist(), dout.tolist())]
        assert_close(f"{cls.__name__} dx, eps {eps}", got, np.array(want), rtol=1e-9, atol=1e-12)


def test_layernorm_changes_set_what_they_say():
    x, dout, scale, shift = rows_and_douts(7)
    C = x.shape[-1]
    ln = LayerNorm(C)
    ln.scale.data, ln.shift.data = scale.copy(), shift.copy()
    mistakes.unit_norm(ln)
    mean = x.mean(-1, keepdims=True)
    want = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    assert_close("LayerNorm out, unit_norm", ln.forward(x), want)
    mistakes.unbiased_variance(ln)
    want = (x - mean) / np.sqrt(((x - mean) ** 2).sum(-1, keepdims=True) / (C - 1) + 1e-5)
    assert_close("LayerNorm out, unbiased_variance", ln.forward(x), want)


@settings(max_examples=10, deadline=None)
@given(seed=seeds)
def test_gelu_without_the_three_by_hand(seed):
    x = np.random.default_rng(seed).normal(size=(2, 7)) * 2.0
    dout = np.random.default_rng(seed + 1).normal(size=x.shape)
    g = mistakes.NoThree()
    g.forward(x)
    got = g.backward(dout)
    c = math.sqrt(2.0 / math.pi)
    want = []
    for a, d in zip(x.ravel().tolist(), dout.ravel().tolist()):
        t = math.tanh(c * (a + 0.044715 * a**3))
        want.append(d * (0.5 * (1.0 + t) + 0.5 * a * (1.0 - t * t) * c * (1.0 + 0.044715 * a * a)))
    assert_close("NoThree dx", got.ravel(), np.array(want), rtol=1e-9, atol=1e-12)


def test_transposed_weight_uses_w_not_w_transposed():
    rng = np.random.default_rng(3)
    lin = Linear(4, 4, rng=rng)
    W, b = lin.weight.data.copy(), lin.bias.data.copy()
    x, dout = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    mistakes.transposed_weight(lin)
    out = lin.forward(x)
    want = [
        [[sum(xi[i] * W[i][j] for i in range(4)) + b[j] for j in range(4)] for xi in row]
        for row in x.tolist()
    ]
    assert_close("Linear out, transposed weight", out, np.array(want))
    dx = lin.backward(dout)
    want = [
        [[sum(di[j] * W[i][j] for j in range(4)) for i in range(4)] for di in row] for row in dout.tolist()
    ]
    assert_close("Linear dx, transposed weight", dx, np.array(want))


def attention(cls=MultiHeadAttention, d_in=4, d_out=6, heads=3, T=5, seed=0):
    m = cls(d_in, d_out, T, 0.0, heads, rng=seed)
    x = np.random.default_rng(seed + 1).normal(size=(2, T, d_in))
    return m, x


def test_attention_score_scalings_equal_a_rescaled_query():
    """Scores are linear in q (no qkv bias): dividing them by hs, or by sqrt(d_out), is the
    reference with W_query scaled by 1/sqrt(hs), or by sqrt(hs/d_out)."""
    for cls, factor in [
        (mistakes.ScoresOverHeadDim, 1.0 / math.sqrt(2.0)),
        (mistakes.ScoresOverSqrtEmbDim, math.sqrt(2.0 / 6.0)),
    ]:
        m, x = attention(cls)
        ref, _ = attention()
        ref.W_query.weight.data = ref.W_query.weight.data * factor
        assert_close(f"{cls.__name__} out", m.forward(x), ref.forward(x))


def test_softmax_without_the_max_shift_overflows_and_keeps_the_largest_score():
    m, x = attention(mistakes.NoMaxShift)
    ref, _ = attention()
    assert_close("NoMaxShift out, small scores", m.forward(x), ref.forward(x))
    # the largest score a token may see, by hand: q.k / sqrt(hs) over s <= t, every head
    q = (x @ ref.W_query.weight.data.T).tolist()
    k = (x @ ref.W_key.weight.data.T).tolist()
    hs = 2
    largest = max(
        sum(q[b][t][h * hs + i] * k[b][s][h * hs + i] for i in range(hs)) / math.sqrt(hs)
        for b in range(2)
        for h in range(3)
        for t in range(5)
        for s in range(t + 1)
    )
    assert abs(m.skipped - largest) <= 1e-12 * abs(largest), (
        f"NoMaxShift.skipped {m.skipped}, by hand {largest}"
    )
    for mod in (m, ref):  # scores far above log(float64 max) = 709.8
        mod.W_query.weight.data = mod.W_query.weight.data * 1e4
    with np.errstate(all="ignore"):
        out = m.forward(x)
    assert m.skipped > 710.0, f"NoMaxShift.skipped {m.skipped}: the scaled scores should overflow exp"
    assert not np.all(np.isfinite(out)), "NoMaxShift out, large scores: finite, exp should overflow"
    right = ref.forward(x)
    assert_true("reference out, large scores", np.isfinite(right), right, "finite")
