"""Benchmark: components and the GPT-2 training step against the GEMM floor and PyTorch eager.

    from npgpt.bench import run, format_report
    print(format_report(run(quick=True)))

Every case times forward + backward (the step: forward, CrossEntropyLoss, backward) in float32,
repeated after a warm-up, with the cases of one row run interleaved, run by run, so a noisy
neighbour slows them alike. The GEMM floor is the same step's matrix products alone, with
reused output buffers. PyTorch (optional, never required) runs the book's module code and
its fused ops. Method and results: docs/bench.md.

One file per part: timing.py (interleaved repeats), cases.py (what is timed), floor.py (the
GEMM floor), profile.py (--profile), memory.py (peak RSS in a fresh process), report.py (the
tables), runner.py (run, all of it in order).
"""

from ..model import GPT_CONFIG_124M
from .cases import (
    QUICK_CFG,
    build_model,
    component_cases,
    default_twin,
    fwd_bwd,
    load_twin,
    settings,
    step_batch,
    step_fn,
)
from .floor import gemm_floor_fn, gemm_flops, gemm_shapes
from .memory import peak_rss
from .profile import profile_step
from .report import blas_info, format_report, jsonable
from .runner import run
from .timing import Timing, interleave

__all__ = [
    "GPT_CONFIG_124M",
    "QUICK_CFG",
    "Timing",
    "blas_info",
    "build_model",
    "component_cases",
    "default_twin",
    "format_report",
    "fwd_bwd",
    "gemm_floor_fn",
    "gemm_flops",
    "gemm_shapes",
    "interleave",
    "jsonable",
    "load_twin",
    "peak_rss",
    "profile_step",
    "run",
    "settings",
    "step_batch",
    "step_fn",
]
