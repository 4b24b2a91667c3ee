"""`npgpt explain`: its hand steps against independent values (the book, plain Python, finite
differences), its comparison with the modules (and that a wrong module makes it fail), and
its output (80 columns, every step named, the final "matches" lines, markdown)."""

import argparse
import math
import pathlib
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npgpt import GELU, numerical_gradient
from npgpt.commands import explain as explain_cmd
from npgpt.explain import COMPONENTS, explain
from tests.strategies import seeds, spread_rows

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def main(argv):
    """`npgpt <argv>` for the explain subcommand alone (other subcommands are not imported)."""
    assert argv[0] == "explain"
    parser = argparse.ArgumentParser(prog="npgpt explain")
    explain_cmd.add_arguments(parser)
    return explain_cmd.run(parser.parse_args(argv[1:]))


def test_explain_is_registered():
    from npgpt.cli import COMMANDS

    assert COMMANDS.get("explain") == "npgpt.commands.explain", f"COMMANDS: {COMMANDS}"


def worst(got, want):
    err = np.abs(np.asarray(got, np.float64) - want)
    i = np.unravel_index(int(np.argmax(err)), err.shape) if err.ndim else ()
    return float(err.max()), i


@pytest.mark.parametrize("component", COMPONENTS)
def test_every_component_matches_its_module_and_page(component):
    e = explain(component, seed=1)
    assert e.checks and e.passed, f"explain {component}: {e.checks}"
    page = "loss" if component == "crossentropy" else component  # the loss keeps the stem loss
    tags = set(re.findall(r"\\tag\{(\d+)\}", (DOCS / f"{page}.md").read_text()))
    for s in e.forward + e.backward:
        if s.eq:
            n = s.eq.split()[-1]
            assert n in tags, f"explain {component}: step {s.name} cites {s.eq}, absent from docs/{page}.md"


def test_layernorm_default_is_the_book_example():
    e = explain("layernorm", unbiased=True)
    for name, want in (("mu", [0.1324, 0.2170]), ("var", [0.0231, 0.0398])):
        err, i = worst(e.step(name).ravel(), want)
        assert err < 5e-5, f"{name}[{i}] differs from the book's {want} by {err}"
    err, i = worst(e.step("dx").sum(-1), 0.0)
    assert err < 1e-12, f"LayerNorm dx row {i} sums to {e.step('dx').sum(-1)[i]}, not 0"


@given(x=spread_rows(np.float64, (2, 5)), seed=seeds, unbiased=st.booleans())
def test_layernorm_dx_against_finite_differences(x, seed, unbiased):
    e = explain("layernorm", x=x, seed=seed, unbiased=unbiased)
    dout = e.step("dout")

    def loss(z):
        mu = z.mean(-1, keepdims=True)
        var = ((z - mu) ** 2).sum(-1, keepdims=True) / (4 if unbiased else 5)
        return (z - mu) / np.sqrt(var + 1e-5)

    num = numerical_gradient(loss, x.copy(), dout)
    err, i = worst(e.step("dx"), num)
    assert err < 1e-5 * (1 + np.abs(num).max()), f"LayerNorm dx{i}: worst error {err}"


def test_gelu_steps_by_hand():
    e = explain("gelu")
    c = math.sqrt(2 / math.pi)
    for i, x in enumerate([-1.0, 0.0, 1.0]):
        t = math.tanh(c * (x + 0.044715 * x**3))
        assert abs(e.step("t")[i] - t) < 1e-15, f"t at x={x}"
        assert abs(e.step("out")[i] - 0.5 * x * (1 + t)) < 1e-15, f"GELU({x})"
        f = lambda z: 0.5 * z * (1 + math.tanh(c * (z + 0.044715 * z**3)))  # noqa: E731
        slope = (f(x + 1e-6) - f(x - 1e-6)) / 2e-6
        assert abs(e.step("dx")[i] - slope) < 1e-8, (
            f"GELU'({x}) = {e.step('dx')[i]}, central difference {slope}"
        )


def test_embedding_repeated_ids_accumulate():
    e = explain("embedding", x=[[1, 3, 1, 0]])
    dout, dW = e.step("dout")[0], e.step("dweight")
    for v, rows in ((0, [3]), (1, [0, 2]), (2, []), (3, [1])):
        want = sum((dout[r] for r in rows), np.zeros(dout.shape[-1]))
        err, i = worst(dW[v], want)
        assert err < 1e-15, f"dweight[{v}]{i}: worst error {err}"


def test_attention_future_gets_no_weight_and_no_gradient():
    e = explain("attention", seed=2)
    upper = np.triu(np.ones((3, 3), bool), 1)
    assert np.all(e.step("att")[..., upper] == 0), "att above the diagonal is not 0"
    assert np.all(e.step("dscores")[..., upper] == 0), "dscores above the diagonal is not 0 (eq. 12)"
    err, i = worst(e.step("att").sum(-1), 1.0)
    assert err < 1e-12, f"att row {i} sums to {e.step('att').sum(-1)[i]}"


def test_a_wrong_module_is_reported(monkeypatch, capsys):
    monkeypatch.setattr(GELU, "backward", lambda self, dout: 2 * dout)
    e = explain("gelu")
    assert not e.passed, f"a broken GELU.backward went unnoticed: {e.checks}"
    assert main(["explain", "gelu"]) == 1, "npgpt explain must exit 1 on a mismatch"
    assert "MISMATCH with npgpt.GELU.backward" in capsys.readouterr().out


@pytest.mark.parametrize("component", COMPONENTS)
def test_cli_text_fits_80_columns_and_names_every_step(component, capsys):
    assert main(["explain", component]) == 0
    out = capsys.readouterr().out
    long = [line for line in out.splitlines() if len(line) > 80]
    assert not long, f"explain {component}: {len(long)} lines over 80 columns, first: {long[0]!r}"
    e = explain(component)
    heads = [
        line.split()[0]
        for line in out.splitlines()
        if line and not line.startswith((" ", "=", "npgpt", "match"))
    ]
    names = [s.name.split()[0] for s in e.forward + e.backward]
    assert heads == names, f"explain {component}: printed steps {heads}, expected {names}"
    name = type_name(component)
    assert re.search(rf"^matches npgpt\.{name}\.backward: max \|diff\| = \S+$", out, re.M), out[-300:]


def type_name(component):
    return {"layernorm": "LayerNorm", "gelu": "GELU", "linear": "Linear", "dropout": "Dropout",
            "embedding": "Embedding", "feedforward": "FeedForward", "attention": "MultiHeadAttention",
            "block": "TransformerBlock", "crossentropy": "CrossEntropyLoss"}[component]  # fmt: skip


def test_cli_markdown_and_inputs(capsys):
    assert main(["explain", "gelu", "--input", "[-2, 0.5]", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# `npgpt explain gelu`") and "## Backward" in out and "```text" in out, out[:200]
    assert "[-2.   0.5]" in out, f"the --input values are not shown:\n{out}"
    assert main(["explain", "loss", "--input", "[[2, 1, 0]]", "--targets", "[0]"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\[\[-0\.3348\s+0\.2447\s+0\.09", out), f"dlogits for (2, 1, 0), target 0:\n{out}"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["explain", "gelu", "--input", "[1, 2"], "--input must be a JSON"),
        (["explain", "linear", "--unbiased"], "--unbiased applies to layernorm only"),
        (["explain", "gelu", "--targets", "[0]"], "--targets applies to loss only"),
        (["explain", "layernorm", "--dout", "[1, 2]"], "dout has shape (2,)"),
        (["explain", "loss", "--input", "[[1, 2]]", "--targets", "[5]"], "targets must be ids in [0, 2)"),
        (["explain", "embedding", "--input", "[0.5]"], "non-negative integer ids"),
    ],
)
def test_cli_bad_input_is_a_clear_error(argv, message, capsys):
    assert main(argv) == 2, f"{argv} should exit 2"
    err = capsys.readouterr().err
    assert message in err, f"{argv}: stderr {err!r} lacks {message!r}"
