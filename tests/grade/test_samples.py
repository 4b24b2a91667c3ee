"""Grading the sample submissions in submissions/: the score and the diagnosis each must get.

Expected scores come from the rubric's points (rubric.json) and which tests a known mistake
must fail; expected diagnoses are the mistake each sample was written with.
"""

import os
import shutil

import pytest

from npgpt.grade.grader import grade

HERE = os.path.join(os.path.dirname(__file__), "submissions")


def run(name, only, **kw):
    return grade(os.path.join(HERE, name), only=only, seed=kw.pop("seed", 7), **kw)


def by_name(result):
    return {t.name: t for t in result.tests}


def failed(result):
    return sorted(t.name for t in result.tests if not t.passed)


def diagnoses(result, test):
    return " | ".join(by_name(result)[test].diagnoses)


def test_correct_submission_scores_full_marks_on_every_component():
    r = run("correct.py", None)
    assert [c.key for c in r.components] == [
        "layernorm",
        "gelu",
        "linear",
        "feedforward",
        "attention",
        "block",
        "crossentropy",
    ]
    assert failed(r) == [], "\n".join(f"{t.name}: {t.output}" for t in r.tests if not t.passed)
    assert (r.score, r.max_score) == (70.0, 70.0)


def test_correct_submission_passes_for_other_seeds_too():
    for seed in (0, 123456):
        r = run("correct.py", ["layernorm", "attention", "crossentropy"], seed=seed)
        assert failed(r) == [], f"seed {seed}: {failed(r)}"


# (sample, component, the tests it must fail, the test whose diagnosis is checked, words in it)
MISTAKES = [
    (
        "ln_no_mean_term.py",
        "layernorm",
        {
            "LayerNorm.backward: dx",
            "LayerNorm.backward: vs finite differences of your forward",
            "LayerNorm.backward: float32 dtype and shape",
            "LayerNorm.backward: hidden edge cases",
        },
        "LayerNorm.backward: dx",
        "constant along each row: the mean term",
    ),
    (
        "ln_no_variance_term.py",
        "layernorm",
        {
            "LayerNorm.backward: dx",
            "LayerNorm.backward: vs finite differences of your forward",
            "LayerNorm.backward: float32 dtype and shape",
            "LayerNorm.backward: hidden edge cases",
        },
        "LayerNorm.backward: dx",
        "proportional to xhat in each row: the variance term",
    ),
    (
        "ln_unbiased.py",
        "layernorm",
        {
            "LayerNorm.forward: out",
            "LayerNorm.backward: dx",
            "LayerNorm.backward: scale.grad",
            "LayerNorm.forward: float32 dtype and shape",
            "LayerNorm.backward: float32 dtype and shape",
            "LayerNorm.forward: hidden edge cases",
            "LayerNorm.backward: hidden edge cases",
        },
        "LayerNorm.forward: out",
        "unbiased variance",
    ),
    ("ln_eps_outside.py", "layernorm", None, "LayerNorm.forward: out", "eps added outside the square root"),
    (
        "ln_onepass_variance.py",
        "layernorm",
        {"LayerNorm.forward: hidden edge cases", "LayerNorm.backward: hidden edge cases"},
        "LayerNorm.forward: hidden edge cases",
        "E[x^2] - E[x]^2",
    ),
    (
        "gelu_no_sech2.py",
        "gelu",
        {
            "GELU.backward: dx",
            "GELU.backward: vs finite differences of your forward",
            "GELU.backward: float32 dtype and shape",
            "GELU.backward: hidden edge cases",
        },
        "GELU.backward: dx",
        "missing the 1 - tanh^2 factor",
    ),
    ("gelu_no_cubic.py", "gelu", None, "GELU.backward: dx", "missing the cubic term's derivative"),
    ("gelu_erf_derivative.py", "gelu", None, "GELU.backward: dx", "exact-erf GELU derivative"),
    ("linear_transposed_dw.py", "linear", None, "Linear.backward: weight.grad", "transpose of the expected"),
    (
        "linear_bias_not_summed.py",
        "linear",
        None,
        "Linear.backward: bias.grad",
        "not summed over the leading axes",
    ),
    (
        "ce_not_divided.py",
        "crossentropy",
        {
            "CrossEntropyLoss.backward: dlogits",
            "CrossEntropyLoss.backward: vs finite differences of your forward",
            "CrossEntropyLoss.backward: float32 dtype and shape",
            "CrossEntropyLoss.backward: hidden edge cases",
        },
        "CrossEntropyLoss.backward: dlogits",
        "not divided by N = 6",
    ),
    (
        "ce_loss_summed.py",
        "crossentropy",
        None,
        "CrossEntropyLoss.forward: loss",
        "the sum over the 6 targets",
    ),
]


@pytest.mark.parametrize("sample,key,must_fail,test,words", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_classic_mistake_is_scored_and_diagnosed(sample, key, must_fail, test, words):
    r = run(sample, [key])
    if must_fail is not None:
        assert set(failed(r)) == must_fail, f"{sample}: failed {failed(r)}"
        assert r.score == pytest.approx(sum(t.max_score for t in r.tests if t.name not in must_fail))
    assert test in failed(r), f"{sample}: {test} passed"
    assert words in diagnoses(r, test), f"{sample}: diagnosis of {test} is {diagnoses(r, test)!r}"


def test_unbiased_layernorm_keeps_the_credit_for_a_consistent_backward():
    r = by_name(run("ln_unbiased.py", ["layernorm"]))
    assert r["LayerNorm.backward: vs finite differences of your forward"].passed
    assert "gradient of the unbiased-variance LayerNorm" in " ".join(r["LayerNorm.backward: dx"].diagnoses)


def test_overwritten_grad_loses_only_the_accumulation_test():
    r = run("linear_overwrites_grad.py", ["linear"])
    assert failed(r) == ["Linear.backward: accumulation (+=) into .grad"]
    assert "overwritten" in by_name(r)["Linear.backward: accumulation (+=) into .grad"].output
    assert r.score == 9.5


@pytest.mark.parametrize(
    "mistake,test,words",
    [
        ("elementwise", "MultiHeadAttention.backward: dx", "softmax treated as elementwise"),
        ("noscale", "MultiHeadAttention.forward: out", "not scaled by 1/sqrt(head_dim)"),
        ("nomask_bwd", "MultiHeadAttention.backward: dx", "mask ignored in backward"),
    ],
)
def test_attention_mistakes_in_function_form(tmp_path, mistake, test, words):
    src = (
        open(os.path.join(HERE, "attention_functions.py"))
        .read()
        .replace('MISTAKE = "none"', f'MISTAKE = "{mistake}"')
    )
    path = tmp_path / f"attention_{mistake}.py"
    path.write_text(src)
    r = grade(str(path), only=["attention"], seed=3)
    assert r.components[0].form == "function"
    assert test in failed(r)
    assert words in diagnoses(r, test), diagnoses(r, test)


def test_attention_function_form_without_mistake_scores_full(tmp_path):
    shutil.copy(os.path.join(HERE, "attention_functions.py"), tmp_path / "attn.py")
    r = grade(str(tmp_path / "attn.py"), only=["attention"], seed=3)
    assert failed(r) == [] and r.score == 10.0


def test_layers_that_do_no_math_score_nothing():
    """Pass-through layers are consistent with themselves; the self-comparison tests (accumulation,
    repeatable, finite differences of your own forward) pay only a forward near the right one."""
    r = run("identity_layers.py", ["layernorm", "gelu", "linear", "crossentropy"])
    paid = {t.name: t.score for t in r.tests if t.score}
    assert paid == {}, f"a submission without math earned points: {paid}"
    selfchecks = [t for t in r.tests if t.kind in ("accumulate", "numeric")]
    assert len(selfchecks) == 8, [t.name for t in selfchecks]
    for t in selfchecks:
        assert "not scored" in t.output, f"{t.name}: {t.output!r} does not say why it was not scored"
