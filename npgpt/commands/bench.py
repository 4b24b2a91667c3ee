"""`npgpt bench`: time components and the GPT-2 124M training step against the GEMM floor and
PyTorch eager (the book's code and fused ops), when torch is installed: from a checkout by
itself, otherwise with --torch-twin FILE. Method: docs/bench.md.
"""

import json
import os
import sys

from ..bench.report import format_report, jsonable
from ..registry import UnknownComponent, resolve_list, supported

HELP = "benchmark components and the training step (float32) against the GEMM floor and PyTorch"


def add_arguments(parser):
    from .argtypes import at_least, fraction

    parser.add_argument("--quick", action="store_true", help="tiny sizes: runs in seconds (for tests)")
    parser.add_argument("--repeats", type=at_least(1), default=5, help="timed runs per case (default 5)")
    parser.add_argument("--warmup", type=at_least(0), default=1, help="untimed runs first (default 1)")
    parser.add_argument(
        "--profile", action="store_true", help="show where the step's time goes, per component"
    )
    torch = parser.add_mutually_exclusive_group()
    torch.add_argument(
        "--torch-twin",
        default=None,
        metavar="FILE",
        help="time PyTorch too: the twin models in FILE (needs torch installed; default: the "
        "checkout's benchmarks/torch_twin.py, when npgpt runs from a checkout and torch is installed)",
    )
    torch.add_argument("--no-torch", action="store_true", help="do not time PyTorch, even when installed")
    parser.add_argument("--no-peak", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument(
        "--only",
        default=None,
        metavar="WHAT",
        help="run one part only: components, steps, or comma-separated components ("
        + ", ".join(c.name for c in supported("bench"))
        + "; model is the training step)",
    )
    parser.add_argument("--dropout", type=fraction, default=0.0, help="drop_rate of the model (default 0.0)")
    parser.add_argument(
        "--reference",
        action="store_true",
        help="time the plain reference code alone (by default the fast path, npgpt.fast, beside it)",
    )
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the raw timings here")


def parts(only):
    """(components, steps) for run(): True/False or the list of registry Components to time."""
    if only in (None, "components", "steps"):
        return only != "steps", only != "components"
    chosen = resolve_list(only, "bench", allow_all=False)
    comps = [c for c in chosen if c.bench.part == "components"]
    return comps or False, any(c.bench.part == "steps" for c in chosen)


def run(args):
    from ..bench import default_twin, load_twin
    from ..bench import run as bench_run

    try:
        components, steps = parts(args.only)
    except UnknownComponent as e:
        print(f"npgpt bench: --only: {e}", file=sys.stderr)
        return 2

    if args.json is not None:  # a --json that cannot be written fails now, not after the whole run
        folder = os.path.dirname(args.json) or "."
        if not args.json or os.path.isdir(args.json) or not os.path.isdir(folder):
            why = (
                "is a directory"
                if args.json and os.path.isdir(args.json)
                else f"folder {folder} does not exist"
            )
            print(f"npgpt bench: --json {args.json!r}: {why if args.json else 'is empty'}", file=sys.stderr)
            return 2

    twin = None if args.no_torch else args.torch_twin or default_twin()
    try:
        load_twin(twin)  # a missing file or a missing torch: one line, before anything runs
    except (FileNotFoundError, ImportError) as e:
        print(e, file=sys.stderr)
        return 2
    res = bench_run(
        quick=args.quick,
        repeats=args.repeats,
        warmup=args.warmup,
        torch_twin=twin,
        profile=args.profile,
        peak=not args.no_peak,
        drop_rate=args.dropout,
        fast=not args.reference,
        components=components,
        steps=steps,
        progress=lambda msg: print(f"... {msg}", file=sys.stderr, flush=True),
    )
    print(format_report(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(jsonable(res), f, indent=1)
    return 0
