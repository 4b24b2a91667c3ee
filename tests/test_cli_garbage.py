"""Garbage into every `npgpt` subcommand: each row is one bad input and the one-line error it
must give (exit 2, no traceback, no NaN, no silently ignored value). Rows found by feeding the
commands garbage as a new user would; each failed before its fix (internal error, a NaN loss
written with exit 0, a flag or a JSON key ignored, a MemoryError, a checkpoint in the cwd)."""

import json
import re

import pytest

from npgpt import cli

TINY_CFG = {
    "vocab_size": 11,
    "context_length": 4,
    "emb_dim": 4,
    "n_heads": 2,
    "n_layers": 1,
    "drop_rate": 0.0,
    "qkv_bias": False,
}


# a run that takes a second, should a row's check ever let `train` start
TINY_TRAIN = ["--max-iters", "1", "--n-layer", "1", "--n-embd", "8", "--n-head", "1", "--block-size", "4"]
TINY_TRAIN += ["--eval-iters", "1", "--no-progress"]


def _run(argv, capsys):
    """-> (exit status, stderr) of `npgpt ARGV` run in this process."""
    try:
        status = cli.main(argv)
    except SystemExit as e:  # argparse's usage errors
        status = e.code
    return status, capsys.readouterr().err


def _assert_one_line_error(argv, pattern, capsys):
    status, err = _run(argv, capsys)
    assert status == 2, f"npgpt {' '.join(argv)}: exit {status}, want 2; stderr: {err!r}"
    assert "Traceback" not in err and "Warning" not in err, f"npgpt {' '.join(argv)}: {err!r}"
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert re.search(pattern, last), f"npgpt {' '.join(argv)}: last stderr line {last!r} !~ {pattern!r}"


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        # before: ValueError from NumPy's default_rng, "internal error", exit 1
        (["check", "--seed", "-1"], r"--seed: must be >= 0, got -1"),
        # before: overflow warnings, then FAIL and exit 1, for a step that measures nothing
        (["check", "--only", "gelu", "--eps", "1e308"], r"--eps: must be in \(0, 1\], got 1e308"),
        # before: accepted; the cosine "decay" raised the rate from 1e-3 to 1
        (
            ["train", "--min-lr", "1", "--learning-rate", "0.001", "--out-dir", "{tmp}/o", *TINY_TRAIN],
            r"--min-lr \(1\) must be <= --learning-rate \(0.001\)",
        ),
        # before: "expected non-negative integer", naming no flag
        (["explain", "layernorm", "--seed", "-5"], r"--seed: must be >= 0, got -5"),
        # before: two RuntimeWarnings and "cannot reshape array of size 0"
        (["explain", "layernorm", "--input", "[]"], r"--input is empty"),
        (["explain", "layernorm", "--input", "[[]]"], r"--input is empty"),
        # before: NaN/inf explained step by step, MISMATCH, exit 1
        (["explain", "layernorm", "--input", "[NaN, 1, 2]"], r"--input holds NaN or infinity"),
        (["explain", "layernorm", "--input", "[Infinity, 1, 2]"], r"--input holds NaN or infinity"),
        (["explain", "layernorm", "--input", "[1e999, 1, 2]"], r"--input holds NaN or infinity"),
        (["explain", "layernorm", "--dout", "[NaN, 1, 2]"], r"--dout holds NaN or infinity"),
        # before: true/false taken as 1/0
        (["explain", "layernorm", "--input", "[true, false]"], r"--input must hold numbers only"),
        (["explain", "gelu", "--input", '{"a": 1}'], r"--input must hold numbers only"),
        # before: overflow warnings, then MISMATCH and exit 1
        (["explain", "gelu", "--input", "[1e300, -1e300]"], r"explain gelu: forward step \w+ overflows"),
        # before: MemoryError (a 21.8 TiB table), internal error, exit 1
        (["explain", "embedding", "--input", "[999999999999, 2]"], r"ids must be < 1000"),
        # before: the starter file went to stdout, -o "" ignored
        (["assignment", "layernorm", "-o", ""], r"-o is empty"),
        # before: a traceback from NumPy's SeedSequence inside the grader, then exit 2
        (["grade", "sub.py", "--seed", "-1"], r"--seed: must be >= 0, got -1"),
        # before: nan passed `timeout <= 0` and graded with no time limit
        (["grade", "sub.py", "--timeout", "nan"], r"--timeout must be a finite number > 0"),
        (["grade", "sub.py", "--timeout", "inf"], r"--timeout must be a finite number > 0"),
        # before: "[Errno 2] No such file or directory: ...", "Expecting value: ...": no --rubric named
        (
            ["grade", "sub.py", "--rubric", "/nonexistent/rubric.json"],
            r"rubric /nonexistent/rubric.json: No such",
        ),
        (["grade", "sub.py", "--rubric", "{tmp}/bad.json"], r"rubric .*bad.json: not valid JSON"),
        # before: --only "" was taken as no --only: every component graded
        (["grade", "sub.py", "--only", ""], r"--only: no component named"),
        # before: the submission (or --gradescope-zip) was ignored in silence
        (["grade", "--self-test", "sub.py"], r"--self-test grades no submission; .*sub.py would be ignored"),
        (["grade", "--gradescope-zip", "{tmp}/a.zip", "sub.py"], r"--gradescope-zip grades no submission"),
        (
            ["grade", "--self-test", "--gradescope-zip", "{tmp}/a.zip"],
            r"--self-test and --gradescope-zip: give one",
        ),
        # before: ".results.4149.tmp: Is a directory", naming a file the user never gave
        (["grade", "sub.py", "--results", "{tmp}"], r"--results .*: is a directory; name a file"),
        # before: "only 0-dimensional arrays can be converted to Python scalars"
        (
            ["explain", "loss", "--dout", "[1, 2]"],
            r"--dout for loss is the loss's gradient: one number, got shape \(2,\)",
        ),
        # before: the whole benchmark ran, then the write failed
        (
            ["bench", "--quick", "--no-torch", "--json", "/nonexistent/x.json"],
            r"folder /nonexistent does not exist",
        ),
        (["bench", "--quick", "--no-torch", "--json", "{tmp}"], r"--json .*: is a directory"),
    ],
)
def test_bad_input_is_a_one_line_error(argv, pattern, tmp_path, capsys):
    (tmp_path / "bad.json").write_text('{"points":')
    (tmp_path / "sub.py").write_text("")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("sub.py", str(tmp_path / "sub.py")) for a in argv]
    _assert_one_line_error(argv, pattern, capsys)


def test_train_sizes_that_cannot_fit_are_a_one_line_error(tmp_path, capsys):
    """before: MemoryError, "internal error", exit 1 (one 400000 x 400000 weight is 1.2 TiB: no
    machine allocates it; the embeddings before it take about 0.5 GB)."""
    argv = ["train", "--n-embd", "400000", "--n-head", "1", "--n-layer", "1", "--block-size", "8"]
    argv += ["--max-iters", "1", "--no-progress", "--out-dir", str(tmp_path / "o")]
    _assert_one_line_error(argv, r"error: out of memory: .*TiB.*; choose smaller sizes", capsys)


def test_train_refuses_an_empty_or_uncreatable_out_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    small = ["--max-iters", "1", "--n-layer", "1", "--n-embd", "8", "--n-head", "1", "--block-size", "4"]
    # before: an empty --out-dir trained and wrote ckpt.npz, last.npz into the current directory
    _assert_one_line_error(["train", "--out-dir", "", *small], r"--out-dir is empty", capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a checkpoint was written to the cwd"
    # before: the whole run trained first, then failed at the first save
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _assert_one_line_error(
        ["train", "--out-dir", str(blocker / "sub"), *small],
        r"--out-dir .*file/sub: cannot create it",
        capsys,
    )


@pytest.mark.parametrize(
    ("cfg_change", "extra", "pattern"),
    [
        # before: an unknown key was dropped in silence
        ({"n_layer": 12}, [], r"--config .*cfg.json: unknown key\(s\) n_layer"),
        # before: --max-memory 0 and nan were ignored (the test `if args.max_memory` is false for 0)
        ({}, ["--max-memory", "0"], r"--max-memory must be a finite number of GiB > 0, got 0.0"),
        ({}, ["--max-memory", "nan"], r"--max-memory must be a finite number of GiB > 0, got nan"),
        # before: accepted, the dump said perturb_norms -1
        ({}, ["--perturb-norms", "-1"], r"--perturb-norms must be a finite number >= 0, got -1.0"),
        ({}, ["--perturb-norms", "inf"], r"--perturb-norms must be a finite number >= 0, got inf"),
        # before: overflow warnings, then a dump with loss nan and exit 0
        ({}, ["--scale-weights", "1e308"], r"the step overflowed: \d+ tensors hold inf or NaN"),
        ({}, ["--scale-weights", "1e200"], r"the step overflowed: \d+ tensors hold inf or NaN"),
    ],
)
def test_reference_bad_config_and_numbers(cfg_change, extra, pattern, tmp_path, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({**TINY_CFG, **cfg_change}))
    out = tmp_path / "out.npz"
    argv = ["reference", "--config", str(cfg), "-o", str(out), "--batch", "1", "--seq-len", "2", *extra]
    _assert_one_line_error(argv, pattern, capsys)
    assert not out.exists(), f"{out} was written despite the error"


def test_reference_tiny_config_still_writes_a_finite_dump(tmp_path, capsys):
    """The control row: the same tiny configuration with sane numbers is accepted."""
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(TINY_CFG))
    out = tmp_path / "out.npz"
    argv = ["reference", "--config", str(cfg), "-o", str(out), "--batch", "1", "--seq-len", "2"]
    status, err = _run([*argv, "--scale-weights", "2", "--max-memory", "1"], capsys)
    assert status == 0 and out.exists(), f"exit {status}: {err!r}"


def _gpt2_folder(path, config=None, tensors=None, raw=None):
    """A tiny Hugging Face GPT-2 folder (E = 8, one layer, 50 tokens), damaged as asked."""
    import numpy as np
    from safetensors.numpy import save_file

    E, f = 8, np.float32
    good = {"wte.weight": np.zeros((50, E), f), "wpe.weight": np.zeros((8, E), f)}
    good |= {"ln_f.weight": np.ones(E, f), "ln_f.bias": np.zeros(E, f)}
    shapes = {
        "ln_1.weight": (E,),
        "ln_1.bias": (E,),
        "ln_2.weight": (E,),
        "ln_2.bias": (E,),
        "attn.c_attn.weight": (E, 3 * E),
        "attn.c_attn.bias": (3 * E,),
        "attn.c_proj.weight": (E, E),
        "attn.c_proj.bias": (E,),
        "mlp.c_fc.weight": (E, 4 * E),
        "mlp.c_fc.bias": (4 * E,),
        "mlp.c_proj.weight": (4 * E, E),
        "mlp.c_proj.bias": (E,),
    }
    good |= {f"h.0.{k}": np.zeros(s, f) for k, s in shapes.items()}
    path.mkdir()
    cfg = {"n_embd": E, "n_head": 2, "n_layer": 1, "n_positions": 8, "vocab_size": 50}
    (path / "config.json").write_text(json.dumps({**cfg, **(config or {})}))
    if raw is not None:
        (path / "model.safetensors").write_bytes(raw)
    else:
        save_file(
            {k: v for k, v in {**good, **(tensors or {})}.items() if v is not None},
            str(path / "model.safetensors"),
        )
    (path / "vocab.json").write_text('{"a": 0}')
    (path / "merges.txt").write_text("#version: 0.2\n")
    return path


@pytest.mark.parametrize(
    ("damage", "pattern"),
    [
        # before: SafetensorError, "internal error", exit 1
        ({"raw": b"\xff" * 8 + b"garbage"}, r"model.safetensors cannot be read \(SafetensorError"),
        # before: KeyError, "internal error", exit 1
        ({"tensors": {"wpe.weight": None}}, r"model.safetensors has no tensor 'wpe.weight'"),
        # before: RuntimeError from load_state_dict, "internal error", exit 1
        (
            {"tensors": {"h.0.mlp.c_proj.bias": __import__("numpy").zeros(5, "float32")}},
            r"mis-shaped keys: trf_blocks.0.ff.layers.2.bias has shape \(5,\), expected \(8,\)",
        ),
        # before: "slice indices must be integers or None", internal error
        ({"config": {"n_embd": "x"}}, r"embedding_dim must be an integer >= 0, got 'x'"),
        # before: TypeError from the slicing in convert_state_dict, internal error
        ({"config": {"n_embd": None}}, r"Embedding: embedding_dim must be an integer >= 0, got None"),
    ],
)
def test_generate_from_a_damaged_gpt2_folder_is_a_one_line_error(damage, pattern, tmp_path, capsys):
    pytest.importorskip("safetensors", reason="--gpt2 needs the `gpt2` extra (safetensors)")
    folder = _gpt2_folder(tmp_path / "gpt2", **damage)
    _assert_one_line_error(["generate", "--gpt2", str(folder), "--max-new-tokens", "1"], pattern, capsys)


@pytest.mark.parametrize(
    "argv, pattern",
    [
        (
            ["train", "--dropout", "1.5"],
            r"^npgpt train: error: argument --dropout: must be in \[0, 1\), got 1\.5",
        ),
        (["bogus"], r"^npgpt: error: argument COMMAND: invalid choice: 'bogus'"),
        ([], r"^npgpt: error: the following arguments are required: COMMAND"),
        (["check", "--only"], r"^npgpt check: error: argument --only: expected one argument"),
        (["explain", "layernorm", "extra"], r"^npgpt: error: unrecognized arguments: extra"),
    ],
)
def test_usage_errors_are_one_line_without_the_usage_block(argv, pattern, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, f"{argv}: exit {e.value.code}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"{argv}: expected one line, got:\n{err}"
    assert re.search(pattern, lines[0]), f"{argv}: {lines[0]!r} does not match {pattern!r}"
