"""The `npgpt` command: `npgpt check` passes, prints its table, and fails on a broken layer."""

import subprocess
import sys

from npgpt import cli
from npgpt.layers import gelu


def test_python_dash_m_npgpt_check_passes():
    res = subprocess.run(
        [sys.executable, "-m", "npgpt", "check"], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stdout + res.stderr
    for component in (
        "LayerNorm",
        "GELU",
        "Linear",
        "Dropout",
        "Embedding",
        "FeedForward",
        "MultiHeadAttention",
        "TransformerBlock",
        "CrossEntropyLoss",
        "GPTModel",
    ):
        assert f"\n{component} " in res.stdout, f"no row for {component}:\n{res.stdout}"
    assert "FAIL" not in res.stdout


def test_check_exits_1_when_a_backward_is_wrong(monkeypatch, capsys):
    def broken_backward(self, dout):
        _x, t = self.cache
        return dout * 0.5 * (1.0 + t)  # the product rule's second term is missing

    monkeypatch.setattr(gelu.GELU, "backward", broken_backward)
    status = cli.main(["check", "--only", "gelu"])
    out = capsys.readouterr().out
    assert status == 1
    assert "GELU" in out and "FAIL" in out and "LayerNorm" not in out


def test_only_selects_components(capsys):
    assert cli.main(["check", "--only", "linear,layernorm"]) == 0
    out = capsys.readouterr().out
    assert "Linear(bias=False)" in out and "LayerNorm(unbiased)" in out and "GELU" not in out


def test_only_with_an_unknown_name_exits_2_listing_the_valid_names(capsys):
    assert cli.main(["check", "--only", "bogus"]) == 2
    out, err = capsys.readouterr()
    assert out == "", f"npgpt check --only bogus checked something:\n{out}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line error, got:\n{err}"
    for name in ("layernorm", "gelu", "attention", "crossentropy", "model"):
        assert name in lines[0], f"{name} is not listed in: {lines[0]}"


def test_only_checks_every_component_of_a_comma_list(capsys):
    assert cli.main(["check", "--only", "attention,crossentropy,gelu"]) == 0
    out = capsys.readouterr().out
    checked = {line.split()[0] for line in out.splitlines()[2:] if line and not line.startswith("all ")}
    assert checked == {"MultiHeadAttention", "CrossEntropyLoss", "GELU"}, f"checked {sorted(checked)}"
