"""`run`: the whole benchmark, components then steps, as a dict of timings and figures that
`format_report` (npgpt/bench/report.py) turns into the tables of docs/bench.md.
"""

import copy

import numpy as np

from ..fast import accelerate
from ..loss import CrossEntropyLoss
from .cases import build_model, component_cases, fwd_bwd, load_twin, settings, step_batch, step_fn
from .floor import gemm_floor_fn, gemm_flops
from .memory import peak_rss
from .profile import profile_step
from .report import blas_info
from .timing import interleave


def run(
    quick=False,
    repeats=5,
    warmup=1,
    torch_twin=None,
    profile=False,
    peak=True,
    drop_rate=0.0,
    components=True,
    steps=True,
    progress=None,
    pause=None,
    fast=True,
):
    """Run the benchmark; returns a dict of Timing objects and figures (see format_report).

    fast: time npgpt's fast path (npgpt.fast.accelerate) as "npgpt" and, side by side, the plain
    reference code as "reference" (a copy of the same weights); else the reference alone, as
    "npgpt". `components` is True, False, or a list of registry Components to time
    (npgpt/registry.py)."""
    paths = {"npgpt": accelerate, "reference": lambda m: m} if fast else {"npgpt": lambda m: m}
    tb = load_twin(torch_twin)
    say = progress or (lambda msg: None)
    pause = (0.05 if tb else 0.0) if pause is None else pause  # idle threads of the other library
    cfg, comp_shape, step_shapes = settings(quick, drop_rate)
    torch = (
        f"; {tb.info()}" if tb else "; PyTorch not timed (not installed, --no-torch, or no --torch-twin FILE)"
    )
    res = {
        "env": blas_info() + torch,
        "quick": quick,
        "repeats": repeats,
        "warmup": warmup,
        "drop_rate": drop_rate,
        "fast": fast,
        "components": [],
        "steps": [],
    }
    rng = np.random.default_rng(0)
    chosen = None if components is True else components
    for label, module, x in component_cases(cfg, comp_shape, components=chosen) if components else []:
        say(f"component {label}")
        dout = rng.standard_normal(module.forward(x).shape).astype(np.float32)
        fns = {k: fwd_bwd(to(copy.deepcopy(module)), x, dout) for k, to in paths.items()}
        if tb:
            fns["torch_book"] = tb.fwd_bwd(tb.like(module, cfg, book=True), x, dout)
            fns["torch_fused"] = tb.fwd_bwd(tb.like(module, cfg, book=False), x, dout)
        res["components"].append({"label": label, **interleave(fns, repeats, warmup, pause, min_time=0.2)})
    if not steps:
        return res
    model, res["build_seconds"] = build_model(cfg)
    models = {k: to(copy.deepcopy(model) if k != "npgpt" else model) for k, to in paths.items()}
    for B, T in step_shapes:
        say(f"step B{B}xT{T}")
        idx, targets = step_batch(cfg, B, T)
        fns = {k: step_fn(models[k], idx, targets, paths[k](CrossEntropyLoss())) for k in paths}
        fns["floor"] = gemm_floor_fn(cfg, B, T)
        if tb:
            fns["torch_book"] = tb.step_fn(tb.like(model, cfg, book=True), idx, targets)
            fns["torch_fused"] = tb.step_fn(tb.like(model, cfg, book=False), idx, targets)
        row = {
            "label": f"step B{B}xT{T}",
            "B": B,
            "T": T,
            "flops": gemm_flops(cfg, B, T),
            **interleave(fns, repeats, warmup, pause),
        }
        del fns
        if peak:
            say(f"peak memory B{B}xT{T}")
            kinds = list(paths) + (["torch_book", "torch_fused"] if tb else [])
            row["peak"] = {k: peak_rss(cfg, B, T, k, twin=torch_twin, fast=fast) for k in kinds}
        if profile:
            say(f"profile B{B}xT{T}")
            row["profile"] = profile_step(
                model,
                idx,
                targets,
                repeats=max(1, min(repeats, 3)),
                loss_fn=paths["npgpt"](CrossEntropyLoss()),
            )
        res["steps"].append(row)
    return res
