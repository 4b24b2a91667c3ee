"""The benchmark machinery runs at a tiny size and reports a sane structure.

No wall-clock assertions: timings are only checked to be positive and ordered (min <= median
<= max). Expected figures (FLOP counts, memory floors) come from hand formulas.
"""

import time

import numpy as np
import pytest

import npgpt
from npgpt import bench
from npgpt.bench import format_report
from npgpt.cli import main


def test_interleave_runs_each_case_once_per_round_and_drops_warmup():
    calls = []
    fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    res = bench.interleave(fns, repeats=3, warmup=2)
    assert calls == ["a", "b"] * 5, f"calls were not interleaved round by round: {calls}"
    for label, t in res.items():
        assert len(t.times) == 3, f"{label}: kept {len(t.times)} timings, expected 3 (warm-up dropped)"
        assert t.min <= t.median <= t.max, (
            f"{label}: min {t.min}, median {t.median}, max {t.max} out of order"
        )


def test_interleave_repeats_a_fast_case_back_to_back_and_reports_time_per_call():
    calls = {"fast": 0, "slow": 0}

    def fast():
        calls["fast"] += 1

    def slow():
        calls["slow"] += 1
        time.sleep(0.002)

    res = bench.interleave({"fast": fast, "slow": slow}, repeats=2, warmup=0, min_time=0.001)
    assert calls["slow"] == 3, f"slow case (longer than min_time) ran {calls['slow']} times, expected 1 + 2"
    assert calls["fast"] > 3 * 2, f"fast case ran {calls['fast']} times: not repeated back to back"
    assert len(res["fast"].times) == 2 and res["fast"].max < res["slow"].min, (
        f"fast per-call times {res['fast'].times} not below slow's {res['slow'].times}"
    )


@pytest.mark.parametrize("B,T", [(4, 128), (1, 1024), (2, 7)])
def test_gemm_shapes_count_the_step_flops_of_the_hand_formula(B, T):
    cfg = bench.GPT_CONFIG_124M
    E, V, L, N = cfg["emb_dim"], cfg["vocab_size"], cfg["n_layers"], B * T
    # forward: 12 E^2 weights per block (q, k, v, out: 4 E^2; ff: 8 E^2), 2 flops per weight per
    # token; scores and att @ v: 2 * 2 * B T^2 E; the head: 2 N E V. Backward costs twice that.
    expected = 3 * (L * (24 * N * E * E + 4 * B * T * T * E) + 2 * N * E * V)
    got = bench.gemm_flops(cfg, B, T)
    assert got == expected, f"gemm_flops(B={B}, T={T}) = {got}, hand formula gives {expected}"


def test_gemm_floor_runs_exactly_the_listed_products():
    cfg, _, steps = bench.settings(quick=True)
    for B, T in steps:
        fn = bench.gemm_floor_fn(cfg, B, T)
        assert fn.shapes == bench.gemm_shapes(cfg, B, T), (
            f"B{B}xT{T}: the floor's products differ from gemm_shapes"
        )
        fn()  # runs without error


def test_quick_run_reports_every_case_with_positive_ordered_timings():
    res = bench.run(quick=True, repeats=2, warmup=1, torch_twin=None, profile=True, peak=True)
    labels = [r["label"].split()[0] for r in res["components"]]
    assert labels == ["LayerNorm", "GELU", "FeedForward", "MultiHeadAttention", "TransformerBlock"], labels
    rows = res["components"] + res["steps"]
    for row in rows:
        for key in ("npgpt", "floor"):
            if key in row:
                t = row[key]
                assert len(t.times) == 2, f"{row['label']} {key}: {len(t.times)} timings, expected 2"
                assert 0 < t.min <= t.median <= t.max, f"{row['label']} {key}: times {t.times}"
        assert "torch_book" not in row, f"{row['label']}: torch timed without a torch twin"
    assert [(r["B"], r["T"]) for r in res["steps"]] == [(2, 16), (1, 64)]
    cfg, _, _ = bench.settings(quick=True)
    n_params = sum(p.data.size for p in bench.build_model(cfg)[0].parameters())
    for r in res["steps"]:
        # parameters and gradients alone take 2 * 4 bytes per parameter in float32
        assert r["peak"]["npgpt"] >= 8 * n_params, f"{r['label']}: peak RSS {r['peak']} below params+grads"
        prof = r["profile"]
        for kind in (
            "Linear ff forward",
            "LayerNorm backward",
            "GELU forward",
            "CrossEntropyLoss forward",
            "MultiHeadAttention backward",
            "Embedding backward",
        ):
            assert prof.get(kind, 0) > 0, f"{r['label']}: profile has no time for {kind!r}: {sorted(prof)}"
    text = format_report(res)
    for row in rows:
        assert row["label"] in text, f"report misses the row {row['label']!r}"
    assert "GEMM floor" in text and "profile" in text


def test_step_fn_runs_a_real_backward_and_profile_restores_the_methods():
    cfg, _, _ = bench.settings(quick=True)
    model, _ = bench.build_model(cfg)
    idx, targets = bench.step_batch(cfg, 2, 8)
    loss = bench.step_fn(model, idx, targets)()
    # at initialization the loss is far from 0 and finite
    assert np.isfinite(loss) and loss > 0, f"step loss {loss}"
    for name, p in model.named_parameters():
        assert p.grad.dtype == np.float32, f"{name}.grad is {p.grad.dtype}, the step must run in float32"
    zero = [n for n, p in model.named_parameters() if not np.any(p.grad) and not n.startswith("tok_emb")]
    assert not zero, f"parameters with no gradient after the step: {zero}"
    bench.profile_step(model, idx, targets)
    left = [n for n, m in model.named_modules() if "forward" in m.__dict__ or "backward" in m.__dict__]
    assert not left, f"profile_step left timing wrappers on: {left}"


def test_cli_bench_quick_prints_the_step_rows(capsys):
    status = main(["bench", "--quick", "--repeats", "1", "--warmup", "0", "--no-peak", "--only", "steps"])
    out = capsys.readouterr().out
    assert status == 0, f"npgpt bench exited {status}"
    for label in (
        "step B2xT16",
        "step B1xT64",
        "GEMM floor",
        "npgpt fast",
        "npgpt reference",
        "reference / fast",
    ):
        assert label in out, f"npgpt bench output misses {label!r}:\n{out}"


def test_the_package_never_imports_torch():
    import re
    from pathlib import Path

    pkg = Path(npgpt.__file__).resolve().parent
    users = [
        str(p.relative_to(pkg))
        for p in pkg.rglob("*.py")
        if re.search(r"^\s*(import torch|from torch)", p.read_text(encoding="utf-8"), flags=re.M)
    ]
    assert not users, f"npgpt/ imports torch in {users}; the torch twin lives in benchmarks/"


def test_a_missing_torch_twin_is_a_clear_error(tmp_path):
    assert bench.load_twin(None) is None
    with pytest.raises(FileNotFoundError, match="no torch twin at"):
        bench.load_twin(str(tmp_path / "absent.py"))


def test_the_checkouts_twin_is_found_only_when_torch_is_installed(monkeypatch):
    import importlib.util
    from pathlib import Path

    real_find_spec = importlib.util.find_spec
    expected = Path(npgpt.__file__).resolve().parent.parent / "benchmarks" / "torch_twin.py"

    def find_spec(installed):
        return lambda name, *a: (
            (object() if installed else None) if name == "torch" else real_find_spec(name, *a)
        )

    monkeypatch.setattr(importlib.util, "find_spec", find_spec(installed=True))
    found = str(expected) if expected.is_file() else None  # None: npgpt imported from outside a checkout
    assert bench.default_twin() == found, (
        f"with torch installed: {bench.default_twin()!r}, expected {found!r}"
    )
    monkeypatch.setattr(importlib.util, "find_spec", find_spec(installed=False))
    assert bench.default_twin() is None, f"without torch: {bench.default_twin()!r}, expected None"


def test_cli_bench_refuses_both_a_twin_and_no_torch(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--quick", "--no-torch", "--torch-twin", "benchmarks/torch_twin.py"])
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [([], "found.py"), (["--torch-twin", "named.py"], "named.py"), (["--no-torch"], None)],
)
def test_cli_bench_times_torch_by_default_and_not_with_no_torch(monkeypatch, capsys, flags, expected):
    seen, real_run = {}, bench.run

    def fake_run(**kw):
        seen.update(kw)
        return real_run(quick=True, repeats=1, warmup=0, peak=False, components=False, steps=False)

    monkeypatch.setattr(bench, "default_twin", lambda: "found.py")
    monkeypatch.setattr(bench, "load_twin", lambda path: None)  # the names are not files
    monkeypatch.setattr(bench, "run", fake_run)
    assert main(["bench", "--quick", *flags]) == 0
    assert seen["torch_twin"] == expected, (
        f"npgpt bench {flags}: torch_twin={seen['torch_twin']!r}, expected {expected!r}"
    )
    assert "npgpt bench (quick sizes" in capsys.readouterr().out


def test_cli_bench_names_a_missing_or_unloadable_twin_in_one_line(tmp_path, capsys):
    assert main(["bench", "--quick", "--torch-twin", str(tmp_path / "absent.py")]) == 2
    assert "no torch twin at" in capsys.readouterr().err
    twin = tmp_path / "twin.py"
    twin.write_text("import npgpt_test_no_such_module\n")
    assert main(["bench", "--quick", "--torch-twin", str(twin)]) == 2
    err = capsys.readouterr().err
    assert "needs PyTorch installed" in err and "npgpt_test_no_such_module" in err, err
