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
    stem = "loss" if component == "crossentropy" else component  # the loss keeps the stem loss
    page = (DOCS / f"{stem}.md").read_text()
    labels = {f"eq. {n}" for n in re.findall(r"\\tag\{(\d+)\}", page)}
    labels |= set(re.findall(r"^\| (g\d+) \|", page, re.M))  # the gate-by-gate tables
    labels |= {"loss"} if component == "model" else set()
    for s in e.forward + e.backward:
        if s.eq:
            assert s.eq in labels, (
                f"explain {component}: step {s.name} cites {s.eq}, absent from docs/{stem}.md"
            )
    gates = [s.eq for s in e.backward if s.eq.startswith("g")]
    numbers = [int(g[1:]) for g in gates]
    assert numbers == sorted(numbers, reverse=True), (
        f"explain {component}: the backward gates are not in reverse order: {gates}"
    )


@pytest.mark.parametrize("component", COMPONENTS)
def test_the_checks_are_independent_of_the_module(component, monkeypatch):
    """Break the reference module's backward: the hand steps, which never call it, must disagree.
    (The block's old check ran the modules on a deep copy and compared the code with itself.)"""
    import npgpt

    victims = {"feedforward": "GELU", "block": "LayerNorm", "model": "LayerNorm"}  # through a part
    target = getattr(npgpt, victims.get(component, type_name(component)))
    real = target.backward

    def wrong(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        return None if out is None else out * 1.001

    if component == "embedding":
        real_emb = target.backward

        def wrong(self, dout):  # noqa: F811 - the embedding returns None: spoil its gradient
            real_emb(self, dout)
            self.weight.grad *= 1.001

    monkeypatch.setattr(target, "backward", wrong)
    e = explain(component, seed=1)
    assert not e.passed, f"explain {component} missed a wrong {target.__name__}.backward: {e.checks}"


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
    dout, scale, shift = e.step("dout"), e.step("scale"), e.step("shift")

    def loss(z):
        mu = z.mean(-1, keepdims=True)
        var = ((z - mu) ** 2).sum(-1, keepdims=True) / (4 if unbiased else 5)
        return scale * (z - mu) / np.sqrt(var + 1e-5) + shift

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
            "block": "TransformerBlock", "crossentropy": "CrossEntropyLoss", "loss": "CrossEntropyLoss",
            "model": "GPTModel"}[component]  # fmt: skip


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
        (["explain", "gelu", "--targets", "[0]"], "--targets applies to loss and model only"),
        (["explain", "gelu", "--qkv-bias"], "--qkv-bias applies to attention only"),
        (["explain", "layernorm", "--dout", "[1, 2]"], "dout has shape (2,)"),
        (["explain", "loss", "--input", "[[1, 2]]", "--targets", "[5]"], "targets must be ids in [0, 2)"),
        (["explain", "loss", "--input", "[[1, 2]]", "--targets", "[-100]"], "every target is ignore_index"),
        (["explain", "model", "--input", "[[1, 9]]"], "token ids must be in [0, 5)"),
        (["explain", "embedding", "--input", "[0.5]"], "non-negative integer ids"),
    ],
)
def test_cli_bad_input_is_a_clear_error(argv, message, capsys):
    assert main(argv) == 2, f"{argv} should exit 2"
    err = capsys.readouterr().err
    assert message in err, f"{argv}: stderr {err!r} lacks {message!r}"
    assert err.count("\n") == 1 and err.count("explain") <= 2 and "explain loss: explain" not in err, err


def test_loss_ignore_index_row_gets_no_gradient(capsys):
    assert main(["explain", "loss", "--targets", "[1, -100, 2]"]) == 0, capsys.readouterr().err
    e = explain("loss", targets=np.array([1, -100, 2]))
    assert np.all(e.step("dlogits")[1] == 0), "the ignored row has a gradient"
    assert e.step("nll")[1] == 0 and int(e.step("keep").sum()) == 2, "the ignored row counts"
    z, y = e.step("logits"), [1, 2]  # the loss by hand over the two kept rows, plain Python
    want = sum(math.log(sum(math.exp(v) for v in z[r])) - z[r][t] for r, t in zip((0, 2), y)) / 2
    assert abs(float(e.step("loss")) - want) < 1e-12, f"loss {e.step('loss')} != {want}"


@pytest.mark.parametrize("component", COMPONENTS)
def test_no_negative_zero_is_printed(component, capsys):
    for seed in range(3):
        main(["explain", component, "--seed", str(seed)])
        out = capsys.readouterr().out
        assert not re.search(r"-0\.(?!\d*[1-9])", out), f"explain {component} --seed {seed} prints -0."


def test_attention_and_block_show_weights_masks_and_every_gradient():
    from npgpt import MultiHeadAttention, TransformerBlock

    for comp, cls, args in (
        ("attention", MultiHeadAttention, (4, 4, 3, 0.5, 2, True)),
        ("block", TransformerBlock, ({"emb_dim": 4, "context_length": 3, "n_heads": 2, "drop_rate": 0.25},)),
    ):
        e = explain(comp, seed=2, **({"qkv_bias": True} if comp == "attention" else {}))
        names = {s.name for s in e.forward + e.backward}
        for name, _ in cls(*args).named_parameters():
            assert name in names and "d" + name in names, f"explain {comp}: {name} or d{name} not shown"
        masks = [s for s in e.forward if s.name in ("keep", "att.keep", "m1", "m2")]
        assert masks and any(np.any(m.value == 0) for m in masks), f"explain {comp}: dropout is off"


def test_layernorm_scale_and_shift_are_not_trivial():
    e = explain("layernorm")
    assert np.all(e.step("scale") != 1) and np.any(e.step("shift") != 0), "scale 1 / shift 0 hide their role"
    assert not np.allclose(e.step("out"), e.step("xhat")), "out == xhat: the scale's role never shows"


def test_model_end_to_end_by_hand():
    e = explain("model")
    assert e.passed, e.checks
    names = [s.name for s in e.forward + e.backward]
    for name in ("tok", "pos", "h_0", "x_0", "logits", "loss", "dlogits", "dh_0", "dtok_emb.weight"):
        assert name in names, f"explain model: no step {name}"
    assert np.any(e.step("drop_emb.mask") == 0), "explain model: drop_emb is off"
    # eq. 4: dpos sums dh_0 over the batch, checked in plain Python
    dh0, dpos = e.step("dh_0"), e.step("dpos")
    for t in range(dpos.shape[0]):
        for j in range(dpos.shape[1]):
            want = sum(dh0[b][t][j] for b in range(dh0.shape[0]))
            assert abs(dpos[t][j] - want) < 1e-15, f"dpos[{t},{j}]"
