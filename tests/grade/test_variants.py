"""The grader's mistake variants (npgpt/grade/variants.py) come from the reference: each is a
mistake of npgpt/mistakes.py (tests/test_mistakes.py checks their form), or the reference built
or loaded differently, and its eps is the module's own. Their values are checked against hand
formulas written here in plain Python (math, per element) and against properties of the mistake,
not against the grader's code.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings

from npgpt.grade import diagnose, variants
from npgpt.grade.compare import rel_error
from npgpt.grade.components import SPECS, make_cases
from npgpt.layers import LayerNorm, MultiHeadAttention
from tests.asserts import assert_close
from tests.strategies import seeds


def main_case(key, seed=5):
    params, cases = make_cases(SPECS[key], seed)
    return params, cases[0]


@pytest.mark.parametrize("key", sorted(variants.TABLE))
def test_every_variant_differs_from_the_right_answer(key):
    """A variant equal to the right answer in every tensor could never be named. (Some tensors
    do not see a mistake: dv does not pass through softmax's backward.)"""
    params, case = main_case(key)
    differs = {}
    for tensor, exp in case.expected.items():
        for desc, thunk in variants.variants(key, tensor, case, params):
            alt = np.asarray(thunk(), np.float64)
            assert alt.shape == np.shape(exp), f"{key} {tensor}, {desc}: shape {alt.shape} vs {np.shape(exp)}"
            assert np.all(np.isfinite(alt)), f"{key} {tensor}, {desc}: not finite"
            differs[desc] = differs.get(desc, False) or rel_error(alt, exp) > diagnose.MATCH
    assert len(differs) >= 3, f"{key}: only {len(differs)} variants"
    same = [d for d, ok in differs.items() if not ok]
    assert not same, f"{key}: these variants equal the right answer in every tensor: {same}"


def layernorm_by_hand(row, scale, shift, n, eps, outside=False):
    mean = sum(row) / len(row)
    var = sum((a - mean) ** 2 for a in row) / n
    std = math.sqrt(var) + eps if outside else math.sqrt(var + eps)
    return [(a - mean) / std * g + b for a, g, b in zip(row, scale, shift)]


def find(key, tensor, case, params, words):
    thunk = next((t for d, t in variants.variants(key, tensor, case, params) if words in d), None)
    assert thunk is not None, f"no {key} {tensor} variant about {words!r}"
    return np.asarray(thunk(), np.float64)


@pytest.mark.parametrize("eps", [1e-5, 0.25])
def test_layernorm_variants_by_hand_with_the_modules_own_eps(monkeypatch, eps):
    monkeypatch.setattr(LayerNorm.__init__, "__defaults__", (eps, False))  # the module's eps
    params, case = main_case("layernorm")
    x, (scale, shift) = case.inputs[0], (params["scale"], params["shift"])
    C = x.shape[-1]
    rows = x.reshape(-1, C).tolist()
    for words, n, outside, s, b in [
        ("unbiased variance", C - 1, False, scale, shift),
        ("eps added outside", C, True, scale, shift),
        ("no scale and shift", C, False, [1.0] * C, [0.0] * C),
    ]:
        want = [layernorm_by_hand(r, s, b, n, eps, outside) for r in rows]
        got = find("layernorm", "out", case, params, words)
        assert_close(f"layernorm out, {words}, eps {eps}", got.reshape(-1, C), np.array(want), rtol=1e-10)


def test_the_layernorm_residual_diagnosis_uses_the_modules_eps(monkeypatch):
    """A dx missing the mean term, worked out by hand for a module whose eps is 0.25, is
    diagnosed as such (the residual is classified against the reference's own xhat)."""
    monkeypatch.setattr(LayerNorm.__init__, "__defaults__", (0.25, False))
    params, case = main_case("layernorm")
    x, dout = case.inputs[0], case.dout
    C = x.shape[-1]
    wrong = []
    for row, drow in zip(x.reshape(-1, C).tolist(), dout.reshape(-1, C).tolist()):
        mean = sum(row) / C
        rstd = 1.0 / math.sqrt(sum((a - mean) ** 2 for a in row) / C + 0.25)
        xhat = [(a - mean) * rstd for a in row]
        dxhat = [d * g for d, g in zip(drow, params["scale"])]
        dot = sum(d * h for d, h in zip(dxhat, xhat)) / C
        wrong.append([rstd * (d - h * dot) for d, h in zip(dxhat, xhat)])  # the mean term left out
    got = np.array(wrong).reshape(x.shape)
    words = diagnose.explain("layernorm", "dx", got, case, params)
    assert any("constant along each row" in w for w in words), words


def gelu_by_hand(a):
    c = math.sqrt(2.0 / math.pi)
    u = c * (a + 0.044715 * a**3)
    t = math.tanh(u)
    du = c * (1.0 + 3.0 * 0.044715 * a * a)
    return t, du


@settings(max_examples=10, deadline=None)
@given(seed=seeds)
def test_gelu_variants_by_hand(seed):
    params, case = main_case("gelu", seed)
    x, dout = case.inputs[0], case.dout
    xs, ds = x.ravel().tolist(), dout.ravel().tolist()
    c = math.sqrt(2.0 / math.pi)
    hand = {
        ("out", "without the 0.044715"): [0.5 * a * (1.0 + math.tanh(c * a)) for a in xs],
        ("out", "exact erf"): [0.5 * a * (1.0 + math.erf(a / math.sqrt(2.0))) for a in xs],
        ("dx", "missing the 1 - tanh^2"): [
            d * (0.5 * (1.0 + gelu_by_hand(a)[0]) + 0.5 * a * gelu_by_hand(a)[1]) for a, d in zip(xs, ds)
        ],
        ("dx", "missing the cubic term's derivative"): [
            d * (0.5 * (1.0 + gelu_by_hand(a)[0]) + 0.5 * a * (1.0 - gelu_by_hand(a)[0] ** 2) * c)
            for a, d in zip(xs, ds)
        ],
        ("dx", "product rule's 0.5 (1 + tanh(u)) term"): [
            d * 0.5 * a * (1.0 - gelu_by_hand(a)[0] ** 2) * gelu_by_hand(a)[1] for a, d in zip(xs, ds)
        ],
    }
    for (tensor, words), want in hand.items():
        got = find("gelu", tensor, case, params, words).ravel()
        assert_close(f"gelu {tensor}, {words}", got, np.array(want), rtol=1e-9, atol=1e-12)


def test_attention_variants_have_the_properties_of_their_mistake():
    params, case = main_case("attention")
    right = case.expected["out"]
    # without the mask, the last position still sees every position: only earlier ones change
    unmasked = find("attention", "out", case, params, "mask not applied")
    assert_close("attention out, last position, no mask", unmasked[:, -1], right[:, -1])
    assert rel_error(unmasked[:, 0], right[:, 0]) > 1e-3, "the first position did not change"
    # unscaled scores are the scores of a query weight scaled by sqrt(hs) = 2 (d_out 8, 2 heads)
    m = MultiHeadAttention(*SPECS["attention"].ctor)
    m.load_state_dict({**m.state_dict(), **params, "W_query.weight": 2.0 * params["W_query.weight"]})
    unscaled = find("attention", "out", case, params, "not scaled")
    assert_close("attention out, unscaled scores", unscaled, m.forward(case.inputs[0]))
