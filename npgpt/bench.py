"""Benchmark: components and the GPT-2 training step against the GEMM floor and PyTorch eager.

    from npgpt.bench import run, format_report
    print(format_report(run(quick=True)))

Every case times forward + backward (the step: forward, CrossEntropyLoss, backward) in float32,
repeated after a warm-up, with the cases of one row run interleaved, run by run, so a noisy
neighbour slows them alike. The GEMM floor is the same step's matrix products alone, with
reused output buffers. PyTorch (optional, never required) runs the book's module code and
its fused ops. Method and results: docs/bench.md.
"""

import math
import os
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from . import GELU, CrossEntropyLoss, FeedForward, GPTModel, LayerNorm, MultiHeadAttention, TransformerBlock
from .bench_tools import blas_info, gemm_floor_fn, gemm_flops, gemm_shapes, peak_rss, profile_step
from .model import GPT_CONFIG_124M

__all__ = [
    "Timing",
    "interleave",
    "run",
    "settings",
    "step_fn",
    "build_model",
    "gemm_shapes",
    "gemm_flops",
    "gemm_floor_fn",
    "profile_step",
    "peak_rss",
    "blas_info",
]

QUICK_CFG = {
    "vocab_size": 500,
    "context_length": 64,
    "emb_dim": 64,
    "n_heads": 4,
    "n_layers": 2,
    "drop_rate": 0.0,
    "qkv_bias": False,
}


@dataclass
class Timing:
    """Seconds of each repeat of one case."""

    times: list = field(default_factory=list)

    @property
    def median(self):
        return statistics.median(self.times)

    @property
    def min(self):
        return min(self.times)

    @property
    def max(self):
        return max(self.times)


def interleave(fns, repeats=5, warmup=1, pause=0.0, min_time=0.0):
    """Run each callable of `fns` (label -> fn) once per round; warm-up rounds are not kept.

    `pause` seconds of sleep before each run let the previous case's idle threads (OpenMP's
    and OpenBLAS's spin a while after their work) go to sleep, so they do not slow this one.
    A case faster than `min_time` (measured in the first round) is repeated back to back
    enough times to take that long, and its time per call is kept.
    """
    out = {label: Timing() for label in fns}
    number = dict.fromkeys(fns, 1)
    for r in range(max(warmup, 1 if min_time else 0) + repeats):
        for label, fn in fns.items():
            if pause:
                time.sleep(pause)
            t0 = time.perf_counter()
            for _ in range(number[label]):
                fn()
            dt = (time.perf_counter() - t0) / number[label]
            if r == 0 and min_time:
                number[label] = max(1, math.ceil(min_time / max(dt, 1e-9)))
            if r >= max(warmup, 1 if min_time else 0):
                out[label].times.append(dt)
    return out


def settings(quick=False, drop_rate=0.0):
    """The configuration, component input shape and step shapes of a full or quick run."""
    cfg = dict(QUICK_CFG if quick else GPT_CONFIG_124M, drop_rate=drop_rate)
    E = cfg["emb_dim"]
    comp_shape = (2, 16, E) if quick else (8, 128, E)  # (B, T, C)
    steps = [(2, 16), (1, 64)] if quick else [(4, 128), (1, 1024)]  # (B, T)
    return cfg, comp_shape, steps


def component_cases(cfg, shape, seed=0):
    """(label, module, x) for each component at `shape` (B, T, E), in float32."""
    rng = np.random.default_rng(seed)
    B, T, E = shape
    x = rng.standard_normal(shape).astype(np.float32)  # (B, T, E)
    h = rng.standard_normal((B, T, 4 * E)).astype(np.float32)  # (B, T, 4E)
    att = MultiHeadAttention(
        E, E, cfg["context_length"], cfg["drop_rate"], cfg["n_heads"], cfg["qkv_bias"], rng=rng
    )
    return [
        (f"LayerNorm {shape}", LayerNorm(E).astype(np.float32), x),
        (f"GELU {h.shape}", GELU(), h),
        (f"FeedForward {shape}", FeedForward(cfg, rng=rng).astype(np.float32), x),
        (f"MultiHeadAttention {shape}", att.astype(np.float32), x),
        (f"TransformerBlock {shape}", TransformerBlock(cfg, rng=rng).astype(np.float32), x),
    ]


def fwd_bwd(module, x, dout):
    """A callable running module's forward and backward once."""

    def fn():
        module.forward(x)
        module.backward(dout)

    return fn


def build_model(cfg, seed=0):
    """GPTModel in float32 (built in float64, then cast); returns (model, seconds taken)."""
    t0 = time.perf_counter()
    model = GPTModel(cfg, rng=seed).astype(np.float32)
    return model, time.perf_counter() - t0


def step_batch(cfg, B, T, seed=0):
    rng = np.random.default_rng(seed + 1)
    return rng.integers(0, cfg["vocab_size"], (B, T)), rng.integers(0, cfg["vocab_size"], (B, T))


def step_fn(model, idx, targets, loss_fn=None):
    """One training step's compute (no optimizer): forward, loss, backward."""
    loss_fn = CrossEntropyLoss() if loss_fn is None else loss_fn

    def fn():
        loss = loss_fn.forward(model.forward(idx), targets)
        model.backward(loss_fn.backward())
        return loss

    return fn


def load_twin(path):
    """The PyTorch twin module at `path` (benchmarks/torch_twin.py in a checkout), or None.

    npgpt never imports torch itself: the comparison code lives outside the package and is
    loaded from its file only when asked for, in an environment that has torch."""
    if path is None:
        return None
    import importlib.util

    spec = importlib.util.spec_from_file_location("npgpt_torch_twin", path)
    if spec is None or not os.path.isfile(path):
        raise FileNotFoundError(f"npgpt bench: no torch twin at {path!r}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # raises ImportError when torch is not installed
    return module


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
):
    """Run the benchmark; returns a dict of Timing objects and figures (see format_report)."""
    tb = load_twin(torch_twin)
    say = progress or (lambda msg: None)
    pause = (0.05 if tb else 0.0) if pause is None else pause  # idle threads of the other library
    cfg, comp_shape, step_shapes = settings(quick, drop_rate)
    res = {
        "env": blas_info() + (f"; {tb.info()}" if tb else "; no torch twin (--torch-twin)"),
        "quick": quick,
        "repeats": repeats,
        "warmup": warmup,
        "drop_rate": drop_rate,
        "components": [],
        "steps": [],
    }
    rng = np.random.default_rng(0)
    for label, module, x in component_cases(cfg, comp_shape) if components else []:
        say(f"component {label}")
        dout = rng.standard_normal(module.forward(x).shape).astype(np.float32)
        fns = {"npgpt": fwd_bwd(module, x, dout)}
        if tb:
            fns["torch_book"] = tb.fwd_bwd(tb.like(module, cfg, book=True), x, dout)
            fns["torch_fused"] = tb.fwd_bwd(tb.like(module, cfg, book=False), x, dout)
        res["components"].append({"label": label, **interleave(fns, repeats, warmup, pause, min_time=0.2)})
    if not steps:
        return res
    model, res["build_seconds"] = build_model(cfg)
    for B, T in step_shapes:
        say(f"step B{B}xT{T}")
        idx, targets = step_batch(cfg, B, T)
        fns = {"npgpt": step_fn(model, idx, targets), "floor": gemm_floor_fn(cfg, B, T)}
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
            kinds = ["npgpt"] + (["torch_book", "torch_fused"] if tb else [])
            row["peak"] = {k: peak_rss(cfg, B, T, k, twin=torch_twin) for k in kinds}
        if profile:
            say(f"profile B{B}xT{T}")
            row["profile"] = profile_step(model, idx, targets, repeats=max(1, min(repeats, 3)))
        res["steps"].append(row)
    return res
