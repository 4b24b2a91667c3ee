"""The `npgpt` command: `npgpt check` passes, prints its table, and fails on a broken layer;
every option has help and shows its default; every bad input is one line and exit 2."""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from npgpt import cli
from npgpt.data import load_corpus
from npgpt.errors import CheckpointError
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


# ---- help: every option of every subcommand (also those added later) -------------------------


def _subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _shown_default(action):
    """The default an option's help must show, or None when there is none to show: no default,
    an on/off flag, or the help hidden."""
    if action.help == argparse.SUPPRESS or action.default in (None, argparse.SUPPRESS):
        return None
    if action.nargs == 0:  # store_true / store_false / help / version: the flag is the value
        return None
    return action.default


def test_every_option_has_help_and_shows_its_default():
    parser = cli.build_parser([])  # no command chosen: every subcommand is loaded
    commands = dict(_subparsers(parser))
    assert set(cli.COMMANDS) <= set(commands), (
        f"subcommands missing from the parser: {set(cli.COMMANDS) - set(commands)}"
    )
    problems = []
    for name, sub in [("npgpt", parser), *commands.items()]:
        formatter = sub._get_formatter()
        for action in sub._actions:
            label = f"{name} {'/'.join(action.option_strings) or action.dest}"
            if action.help == argparse.SUPPRESS:
                continue
            if not (action.help or "").strip():
                problems.append(f"{label}: no help text")
                continue
            default = _shown_default(action)
            if default is None:
                continue
            text = formatter._expand_help(action)
            forms = {str(default), repr(default)}
            if isinstance(default, float):
                forms |= {f"{default:g}", f"{default:.0f}" if default == int(default) else str(default)}
            explicit = re.search(r"\(default:? [^)]+\)", text)  # "(default: a newline)", said in words
            if not explicit and not any(f in text for f in forms):
                problems.append(f"{label}: help {text!r} does not show its default {default!r}")
    assert not problems, "options without help or default shown:\n" + "\n".join(problems)


def test_help_formatter_adds_the_default_once():
    p = argparse.ArgumentParser(formatter_class=cli.HelpFormatter)
    a = p.add_argument("--n", type=int, default=3, help="count")
    b = p.add_argument("--m", type=int, default=4, help="count (default: %(default)s)")
    c = p.add_argument("--flag", action="store_true", help="a switch")
    d = p.add_argument("--seed", type=int, default=0, help="seed for the default inputs")
    f = p._get_formatter()
    assert f._expand_help(d) == "seed for the default inputs (default: 0)", f._expand_help(d)
    assert f._expand_help(a) == "count (default: 3)", f._expand_help(a)
    assert f._expand_help(b) == "count (default: 4)", f._expand_help(b)
    assert f._expand_help(c) == "a switch", f._expand_help(c)


# ---- bad input: one line, exit 2, no traceback; --debug / NPGPT_DEBUG show it ----------------

TINY = (
    "--block-size 8 --batch-size 4 --n-layer 1 --n-head 2 --n-embd 16 --eval-interval 5 "
    "--eval-iters 2 --warmup-iters 2 --lr-decay-iters 6 --dtype float64 --no-progress"
).split()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """An out dir of a finished 6-step run: ckpt and last."""
    d = tmp_path_factory.mktemp("trained")
    corpus = d / "corpus.txt"
    corpus.write_text(load_corpus()[:5000], encoding="utf-8")
    out = d / "out"
    assert cli.main(["train", *TINY, "--max-iters", "6", "--data", str(corpus), "--out-dir", str(out)]) == 0
    return out


def _one_line_error(capsys, argv, pattern, status=2):
    got = cli.main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("npgpt generate: loaded")]
    assert got == status, f"{argv}: exit status {got}, expected {status}; stderr:\n{err}"
    assert len(lines) == 1 and "Traceback" not in err, f"{argv}: not one line:\n{err}"
    assert re.search(pattern, lines[0]), f"{argv}: {lines[0]!r} does not match {pattern!r}"


def _copy(trained, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(trained, d)
    return d


def test_train_refuses_an_out_dir_holding_a_checkpoint(trained, tmp_path, capsys):
    d = _copy(trained, tmp_path)
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix in (".npz", ".json")}
    _one_line_error(
        capsys,
        ["train", *TINY, "--max-iters", "5", "--out-dir", str(d)],
        rf"npgpt train: error: {re.escape(str(d))} already holds a checkpoint .*--resume.*--force",
    )
    after = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix in (".npz", ".json")}
    assert after == before, "a refused run changed the checkpoints"


def test_bad_files_and_checkpoints_are_one_line_errors(trained, tmp_path, capsys):
    d = _copy(trained, tmp_path)
    binary = tmp_path / "binary.dat"
    binary.write_bytes(bytes(range(256)) * 4)
    out = str(tmp_path / "new")
    rows = [  # the table, row by row
        (["train", *TINY, "--data", str(binary), "--out-dir", out], r"binary.dat is not UTF-8 text"),
        (["train", *TINY, "--data", str(tmp_path), "--out-dir", out], r"is a directory, not a text file"),
        (["generate", "--checkpoint", "/nonexistent"], r"/nonexistent: no such checkpoint or directory"),
    ]
    for argv, pattern in rows:
        _one_line_error(capsys, argv, pattern)
    (d / "ckpt.npz").write_bytes((d / "ckpt.npz").read_bytes()[:500])
    _one_line_error(
        capsys, ["generate", "--checkpoint", str(d)], r"ckpt.npz cannot be read as an .npz archive.*truncated"
    )
    shutil.copy(trained / "ckpt.npz", d)
    (d / "ckpt.json").write_text((d / "ckpt.json").read_text()[:100])
    _one_line_error(capsys, ["generate", "--checkpoint", str(d)], r"ckpt.json is not valid JSON.*truncated")
    shutil.copy(trained / "ckpt.json", d)
    (d / "ckpt.npz").write_bytes(np.random.default_rng(0).bytes(4000))
    _one_line_error(capsys, ["generate", "--checkpoint", str(d)], r"ckpt.npz is not an .npz archive")
    (d / "last.npz").write_bytes((trained / "last.npz").read_bytes()[:-10])
    _one_line_error(
        capsys,
        ["train", *TINY, "--resume", "--max-iters", "8", "--out-dir", str(d)],
        r"last.npz cannot be read",
    )


def test_generate_uses_last_only_when_asked(trained, tmp_path, capsys):
    d = _copy(trained, tmp_path)
    (d / "ckpt.json").unlink()
    _one_line_error(
        capsys, ["generate", "--checkpoint", str(d)], r"has no checkpoint `ckpt`.*it has `last`.*--last"
    )
    for argv in (["--checkpoint", str(d), "--last"], ["--checkpoint", str(d / "last")]):
        assert cli.main(["generate", *argv, "--max-new-tokens", "3"]) == 0
        err = capsys.readouterr().err
        assert f"loaded {d}/last (step 6" in err, f"generate {argv} did not say what it loaded: {err!r}"
    assert cli.main(["generate", "--checkpoint", str(trained), "--max-new-tokens", "3"]) == 0
    best = json.loads((trained / "ckpt.json").read_text())["step"]
    assert f"loaded {trained}/ckpt (step {best}, val loss" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (["train", "--dropout", "1.5"], r"--dropout: must be in \[0, 1\), got 1.5"),
        (["train", "--max-iters", "-3"], r"--max-iters: must be >= 1, got -3"),
        (["train", "--max-iters", "0"], r"--max-iters: must be >= 1, got 0"),
        (["train", "--learning-rate", "nan"], r"--learning-rate: 'nan' is not a finite number"),
        (["train", "--learning-rate", "0"], r"--learning-rate: must be > 0"),
        (["train", "--beta2", "1"], r"--beta2: must be in \[0, 1\)"),
        (["train", "--batch-size", "x"], r"--batch-size: 'x' is not an integer"),
        (["train", "--seed", "-1"], r"--seed: must be >= 0"),
        (["train", "--resume", "--force"], r"--force: not allowed with argument --resume"),
        (["generate", "--checkpoint", "x", "--top-k", "0"], r"--top-k: must be >= 1"),
        (["generate", "--checkpoint", "x", "--temperature", "-1"], r"--temperature: must be >= 0"),
        (["generate", "--checkpoint", "x", "--max-new-tokens", "-1"], r"--max-new-tokens: must be >= 0"),
    ],
)
def test_bad_arguments_are_usage_errors(argv, pattern, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err, err
    assert re.search(pattern, err.splitlines()[-1]), f"{argv}: {err!r}"


def test_argument_combinations_are_one_line_errors(tmp_path, capsys):
    _one_line_error(
        capsys,
        ["train", "--n-embd", "10", "--n-head", "4"],
        r"--n-embd \(10\) must be divisible by --n-head \(4\)",
    )
    f = tmp_path / "file"
    f.write_text("x")
    _one_line_error(
        capsys, ["train", *TINY, "--out-dir", str(f)], r"--out-dir .*file is a file, not a directory"
    )
    _one_line_error(
        capsys,
        ["train", *TINY, "--resume", "--out-dir", str(tmp_path)],
        r"--resume: .* has no checkpoint `last`",
    )
    _one_line_error(capsys, ["generate", "--gpt2", str(tmp_path), "--last"], r"--last goes with --checkpoint")


def test_debug_flag_and_env_show_the_traceback(monkeypatch, capsys):
    monkeypatch.delenv("NPGPT_DEBUG", raising=False)
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        cli.main(["--debug", "generate", "--checkpoint", "/nonexistent"])
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        cli.main(["generate", "--checkpoint", "/nonexistent", "--debug"])
    monkeypatch.setenv("NPGPT_DEBUG", "1")
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        cli.main(["generate", "--checkpoint", "/nonexistent"])
    monkeypatch.setenv("NPGPT_DEBUG", "0")
    assert cli.main(["generate", "--checkpoint", "/nonexistent"]) == 2


def test_an_unexpected_exception_is_one_line_and_exit_1(monkeypatch, capsys):
    monkeypatch.delenv("NPGPT_DEBUG", raising=False)

    def boom(args):
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr("npgpt.commands.explain.run", boom)
    assert cli.main(["explain", "gelu"]) == 1
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and "internal error: RuntimeError: something broke" in err and "--debug" in err
    ), err


def test_the_command_prints_no_traceback_in_a_real_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NPGPT_DEBUG"}
    r = subprocess.run(
        [sys.executable, "-m", "npgpt", "train", "--data", str(tmp_path), "--out-dir", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "npgpt", "train", "--data", str(tmp_path), "--out-dir", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "NPGPT_DEBUG": "1"},
    )
    assert r.returncode == 1 and "Traceback" in r.stderr and "DataError" in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (["bench", "--repeats", "0"], r"--repeats: must be >= 1, got 0"),
        (["bench", "--warmup", "-1"], r"--warmup: must be >= 0"),
        (["bench", "--dropout", "1"], r"--dropout: must be in \[0, 1\)"),
        (["check", "--eps", "-1"], r"--eps: must be > 0"),
        (["check", "--atol", "-0.001"], r"--atol: must be >= 0.0"),
    ],
)
def test_bad_numbers_in_other_commands_are_usage_errors(argv, pattern, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and re.search(pattern, err.splitlines()[-1]), err
