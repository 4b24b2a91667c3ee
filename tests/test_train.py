"""Training: the loop learns, checkpoints and resumes onto the uninterrupted loss curve, Ctrl-C
saves and exits cleanly, the CLI's defaults are nanoGPT's CPU configuration."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from npgpt.checkpoint import load_model
from npgpt.cli import build_parser, main
from npgpt.data import load_corpus
from npgpt.errors import DataError, InputError
from npgpt.model import GPTModel
from npgpt.train import init_nanogpt, train
from tests.asserts import assert_close, assert_equal

REPO = Path(__file__).resolve().parent.parent


def tiny(tmp_path, text=None, **over):
    data = tmp_path / "corpus.txt"
    tmp_path.mkdir(parents=True, exist_ok=True)
    if not data.exists():
        data.write_text(text if text is not None else load_corpus()[:20000], encoding="utf-8")
    cfg = {
        "data": str(data),
        "out_dir": str(tmp_path / "out"),
        "block_size": 8,
        "batch_size": 4,
        "n_layer": 1,
        "n_head": 2,
        "n_embd": 16,
        "max_iters": 12,
        "warmup_iters": 2,
        "lr_decay_iters": 12,
        "eval_interval": 5,
        "eval_iters": 2,
        "dtype": "float64",
        "learning_rate": 1e-2,
        "min_lr": 1e-3,
    }
    return {**cfg, **over}


def test_learns_a_deterministic_sequence(tmp_path):
    # "abcd" repeated: the next character is a function of the current one, so the entropy is 0
    r = train(
        tiny(
            tmp_path, text="abcd" * 300, max_iters=150, lr_decay_iters=150, eval_interval=150, dtype="float32"
        ),
        progress=False,
    )
    assert r["evals"][0][2] > math.log(4) - 0.3, f"initial val loss {r['evals'][0][2]} is not ~ln 4"
    assert r["val_loss"] < 0.05, f"val loss {r['val_loss']} after 150 iterations on a 4-cycle"


def test_checkpoints_and_summary(tmp_path):
    cfg = tiny(tmp_path)
    r = train(cfg, progress=False)
    assert r["step"] == 12 and not r["interrupted"]
    assert [e[0] for e in r["evals"]] == [0, 5, 10, 12], "evaluations at 0, every 5 and at the end"
    assert [c[0] for c in r["curve"]] == list(range(12))
    out = Path(cfg["out_dir"])
    best = json.loads((out / "ckpt.json").read_text())
    last = json.loads((out / "last.json").read_text())
    vals = [e[2] for e in r["evals"]]
    assert last["step"] == 12 and last["extra"]["best_val"] == min(vals)
    assert best["step"] == [e[0] for e in r["evals"]][int(np.argmin(vals))], "ckpt is not the best val step"
    assert r["tokens_per_s"] > 0 and r["best_val"] == min(vals)


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_resume_reproduces_the_uninterrupted_run(tmp_path, dropout):
    full = train(tiny(tmp_path / "a", dropout=dropout), progress=False)
    part = train(tiny(tmp_path / "b", dropout=dropout), should_stop=lambda it: it == 7, progress=False)
    assert part["step"] == 7 and part["interrupted"]
    rest = train(tiny(tmp_path / "b", dropout=dropout, resume=True), progress=False)
    assert_equal("loss curve (resumed vs uninterrupted)", np.array(rest["curve"]), np.array(full["curve"]))
    assert_equal("evaluations", np.array(rest["evals"]), np.array(full["evals"]))
    for (k, p), (_, q) in zip(
        full["model"].named_parameters(), rest["model"].named_parameters(), strict=True
    ):
        assert_equal(k, q.data, p.data)


def test_nanogpt_init():
    cfg = dict(
        vocab_size=50, context_length=8, emb_dim=64, n_heads=4, n_layers=3, drop_rate=0.0, qkv_bias=True
    )
    model = init_nanogpt(GPTModel(cfg, rng=0), np.random.default_rng(0))
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            assert not p.data.any(), f"{name} is not zero"
        elif name.endswith("weight"):
            std = 0.02 / math.sqrt(6) if ("out_proj" in name or "layers.2" in name) else 0.02
            assert abs(p.data.std() - std) < 0.15 * std, f"{name}: std {p.data.std():.4g}, expected {std:.4g}"
    assert_equal("final_norm.scale", model.final_norm.scale.data, np.ones(64))


def test_cli_defaults_are_nanogpts_cpu_run():
    a = build_parser().parse_args(["train"])
    expected = {
        "block_size": 64,
        "batch_size": 12,
        "n_layer": 4,
        "n_head": 4,
        "n_embd": 128,
        "max_iters": 2000,
        "learning_rate": 1e-3,
        "min_lr": 1e-4,
        "warmup_iters": 100,
        "lr_decay_iters": 2000,
        "dropout": 0.0,
        "weight_decay": 0.1,
        "beta2": 0.99,
        "grad_clip": 1.0,
        "dtype": "float32",
        "data": None,
        "resume": False,
    }
    got = {k: getattr(a, k) for k in expected}
    assert got == expected, (
        f"defaults differ: { {k: (got[k], v) for k, v in expected.items() if got[k] != v} }"
    )


def _cli(tmp_path, *extra):
    c = tiny(tmp_path)
    args = (
        f"train --data {c['data']} --out-dir {c['out_dir']} --block-size 8 --batch-size 4 --n-layer 1 "
        "--n-head 2 --n-embd 16 --warmup-iters 2 --lr-decay-iters 12 --eval-interval 5 --eval-iters 2 "
        "--learning-rate 1e-2 --min-lr 1e-3 --dtype float64"
    )
    return [sys.executable, "-m", "npgpt", *args.split(), *extra]


def test_ctrl_c_saves_and_resume_continues(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        _cli(tmp_path, "--max-iters", "1000000"),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    last = tmp_path / "out" / "last.json"
    deadline = time.monotonic() + 60
    while not last.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"exit status {proc.returncode} after Ctrl-C; stderr:\n{err[-2000:]}"
    assert "stopping at step" in out + err and "stopped at step" in out, f"stdout:\n{out}\nstderr:\n{err}"
    meta = json.loads(last.read_text())
    k = meta["step"]
    assert 1 <= k < 1000000 and len(meta["extra"]["curve"]) == k
    # the losses printed are those of the model saved at the stop, not of the last evaluation
    m = re.search(r"stopped at step (\d+): train loss ([\d.]+), val loss ([\d.]+)", out)
    assert m and int(m[1]) == k, f"the stop message does not give the loss at step {k}:\n{out}"
    model, tok, _ = load_model(tmp_path / "out", "last")
    c = tiny(tmp_path)
    ids = np.array(tok.encode(load_corpus(c["data"])))
    n = int(0.9 * len(ids))
    rng = np.random.default_rng([1337, 4, k])  # the stop's own batches (train.py, _loss_at_stop)
    for split, data, printed in (("train", ids[:n], m[2]), ("val", ids[n:], m[3])):
        losses = []
        for _ in range(c["eval_iters"]):
            ix = rng.integers(0, len(data) - 8, size=4)
            x = data[ix[:, None] + np.arange(8)]
            y = data[ix[:, None] + np.arange(1, 9)]
            logits = model.forward(x)  # (B, T, V); the log-softmax by hand
            z = logits - logits.max(-1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
            losses.append(-np.take_along_axis(logp, y[..., None], -1).mean())
        assert abs(float(printed) - np.mean(losses)) < 1e-4, (
            f"{split} loss printed at the stop {printed}, the saved model's {np.mean(losses):.4f}"
        )
    # continue in-process for 3 more steps; compare with an uninterrupted run of k + 3 steps
    rest = train(tiny(tmp_path, max_iters=k + 3, resume=True), progress=False)
    full = train(tiny(tmp_path / "ref", max_iters=k + 3), progress=False)
    assert_close(
        "resumed loss curve", np.array(rest["curve"]), np.array(full["curve"]), rtol=1e-9, atol=1e-12
    )


def test_cli_train_end_to_end(tmp_path):
    r = subprocess.run(
        _cli(tmp_path, "--max-iters", "6", "--no-progress"),
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "done at step 6" in r.stdout and "val loss" in r.stdout, r.stdout
    assert (tmp_path / "out" / "ckpt.npz").exists() and (tmp_path / "out" / "last.npz").exists()


def test_loss_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="the loss plot needs matplotlib (the `plots` extra)")
    r = train(tiny(tmp_path, max_iters=3), progress=False)
    assert r["plot"] and Path(r["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_out_dir_holding_a_checkpoint_needs_resume_or_force(tmp_path):
    first = train(tiny(tmp_path), progress=False)
    out = Path(tiny(tmp_path)["out_dir"])
    saved = {p.name: p.read_bytes() for p in out.glob("*.npz")}
    with pytest.raises(
        InputError, match=r"already holds a checkpoint \(ckpt.npz, ckpt.json, last.npz, last.json\)"
    ):
        train(tiny(tmp_path, max_iters=3), progress=False)
    assert {p.name: p.read_bytes() for p in out.glob("*.npz")} == saved, (
        "a refused run touched the checkpoints"
    )
    again = train(tiny(tmp_path, max_iters=3, force=True), progress=False)
    assert again["step"] == 3 and json.loads((out / "last.json").read_text())["step"] == 3
    assert first["step"] == 12
    (out / "last.json").unlink()  # a half checkpoint still counts
    with pytest.raises(InputError, match=r"already holds a checkpoint \(ckpt.npz, ckpt.json, last.npz\)"):
        train(tiny(tmp_path), progress=False)


def test_a_corpus_too_short_for_the_block_is_a_data_error(tmp_path):
    with pytest.raises(
        DataError,
        match=r"corpus.txt: its validation split has 5 characters, fewer than --block-size \+ 1 = 9",
    ):
        train(tiny(tmp_path, text="abcdefghij" * 5), progress=False)


def test_resume_on_another_corpus_names_the_characters(tmp_path):
    train(tiny(tmp_path, text="abcd" * 100, max_iters=3), progress=False)
    other = tmp_path / "other.txt"
    other.write_text("xyz" * 100)
    with pytest.raises(
        DataError, match=r"other.txt: CharTokenizer.encode: characters not in the vocabulary.*'xyz'"
    ):
        train(tiny(tmp_path, data=str(other), resume=True), progress=False)


def test_stop_reports_the_loss_measured_at_the_stop(tmp_path):
    r = train(tiny(tmp_path), should_stop=lambda it: it == 7, progress=False)
    assert r["interrupted"] and r["step"] == 7 and r["eval_step"] == 7
    assert [e[0] for e in r["evals"]] == [0, 5], "the stop's measurement must not join the run's evaluations"
    assert r["val_loss"] != r["evals"][-1][2], "the stop printed the step-5 evaluation"
    # a stop right after an evaluation reports that evaluation
    r = train(tiny(tmp_path / "b"), should_stop=lambda it: it == 5, progress=False)
    assert r["eval_step"] == 5 and r["step"] == 5


def test_a_skipped_plot_is_said(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    c = tiny(tmp_path, max_iters=3)
    argv = ["train", "--data", c["data"], "--out-dir", c["out_dir"], "--max-iters", "3", "--block-size", "8"]
    argv += [
        "--batch-size",
        "2",
        "--n-layer",
        "1",
        "--n-head",
        "2",
        "--n-embd",
        "8",
        "--eval-iters",
        "1",
        "--no-progress",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "no loss.png: matplotlib is not installed" in out, out
    assert not (Path(c["out_dir"]) / "loss.png").exists()


def test_the_progress_bar_closes_once(tmp_path, monkeypatch):
    pytest.importorskip("tqdm", reason="the bar is tqdm's (the `train` extra)")
    import io

    for stop in (None, 7):
        err = io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        train(
            tiny(tmp_path / str(stop)),
            should_stop=stop and (lambda it: it == 7),
            progress=True,
            log=lambda m: None,
        )
        monkeypatch.undo()
        n = 12 if stop is None else 7
        draws = re.findall(rf"\b{n}/12\b", err.getvalue())
        assert len(draws) == 1, f"the final bar ({n}/12) was drawn {len(draws)} times:\n{err.getvalue()!r}"


def test_threads_reach_the_fast_path(tmp_path, monkeypatch, capsys):
    import npgpt.train as train_module

    seen = []
    real = train_module.accelerate

    def spy(module, threads=None):
        seen.append((type(module).__name__, threads))
        return real(module, threads=threads)

    monkeypatch.setattr(train_module, "accelerate", spy)
    c = tiny(tmp_path)
    argv = ["train", "--data", c["data"], "--out-dir", c["out_dir"], "--max-iters", "2", "--block-size", "8"]
    argv += ["--batch-size", "2", "--n-layer", "1", "--n-head", "2", "--n-embd", "8", "--eval-iters", "1"]
    assert main([*argv, "--no-progress", "--threads", "1"]) == 0
    assert ("GPTModel", 1) in seen, f"--threads 1 did not reach accelerate(model): {seen}"
    seen.clear()
    assert main([*argv, "--no-progress", "--reference", "--force"]) == 0
    assert not seen, f"--reference still switched to the fast path: {seen}"
    assert main([*argv, "--no-progress", "--reference", "--force", "--threads", "2"]) == 2
    assert "--threads sets the fast path's threads" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main([*argv, "--threads", "0"])
    assert e.value.code == 2 and "--threads: must be >= 1, got 0" in capsys.readouterr().err


def test_resume_refuses_a_shape_flag_that_differs_from_the_checkpoint(tmp_path, capsys):
    c = tiny(tmp_path)
    argv = ["train", "--data", c["data"], "--out-dir", c["out_dir"], "--block-size", "8", "--batch-size", "2"]
    argv += ["--n-layer", "1", "--n-head", "2", "--n-embd", "8", "--eval-iters", "1", "--no-progress"]
    assert main([*argv, "--max-iters", "2"]) == 0
    capsys.readouterr()
    for flag, value, saved in (
        ("--n-embd", "16", "8"),
        ("--block-size", "4", "8"),
        ("--dtype", "float64", "float32"),
    ):
        resume = [
            "train",
            "--data",
            c["data"],
            "--out-dir",
            c["out_dir"],
            "--resume",
            "--max-iters",
            "3",
            flag,
            value,
        ]
        assert main(resume) == 2
        err = capsys.readouterr().err
        assert f"{flag} {value} differs from {c['out_dir']}/last's {saved}" in err, err
    # the same values, given again, are fine; so is leaving them out
    assert main([*argv, "--resume", "--max-iters", "3"]) == 0
    assert "done at step 3" in capsys.readouterr().out


def test_a_second_ctrl_c_during_the_stop_measurement_says_which_step_was_measured(
    tmp_path, monkeypatch, capsys
):
    import functools

    import npgpt.train as train_module

    monkeypatch.setattr(train_module, "train", functools.partial(train, should_stop=lambda it: it == 7))
    monkeypatch.setattr(train_module, "_loss_at_stop", lambda *a: None)  # as when cut short
    c = tiny(tmp_path)
    argv = ["train", "--data", c["data"], "--out-dir", c["out_dir"], "--block-size", "8", "--batch-size", "4"]
    argv += ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--eval-interval", "5", "--eval-iters", "2"]
    assert main([*argv, "--max-iters", "12", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "stopped at step 7: loss not measured; last evaluated at step 5: train loss" in out, out
