"""`npgpt check`: gradcheck every component and the whole model at small sizes, in float64.

Prints one row per component and tensor with the worst errors and PASS/FAIL; exit status 1
if anything fails. The cases are small enough that the full run takes a few seconds.
"""

import inspect
import sys
import time

import numpy as np

from ..registry import Ids, UnknownComponent, resolve_list, supported

HELP = "check every hand-written backward against finite differences (float64)"


def _inputs(spec, rng):
    if isinstance(spec, Ids):
        ids = rng.integers(0, spec.high, spec.shape)
        for pos in spec.ignored:
            ids[pos] = -100  # CrossEntropyLoss's ignore_index
        return ids
    return spec.scale * rng.standard_normal(spec.shape)


def cases(seed, components=None):
    """(label, module, inputs, gradcheck options) for each case of `components` (default: all),
    at the small sizes of the registry's check settings (npgpt/registry.py)."""
    rng = np.random.default_rng(seed)
    for comp in components or supported("check"):
        for case in comp.check:
            kwargs = dict(case.kwargs)
            if "rng" in inspect.signature(comp.cls).parameters:
                kwargs["rng"] = rng
            module = comp.cls(*case.args, **kwargs)
            yield case.label, module, tuple(_inputs(i, rng) for i in case.inputs), {}


def _step(text):
    """--eps: a finite-difference step in (0, 1]; a larger one measures nothing and overflows."""
    import argparse

    from .argtypes import positive_float

    v = positive_float(text)
    if v > 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return v


def add_arguments(parser):
    from .argtypes import at_least

    nonneg = at_least(0.0, float)
    parser.add_argument("--seed", type=at_least(0), default=0, help="seed for inputs, weights and dout")
    parser.add_argument(
        "--only",
        default=None,
        metavar="NAMES",
        help="comma-separated components to check: " + ", ".join(c.name for c in supported("check")),
    )
    parser.add_argument("--eps", type=_step, default=1e-6, help="finite-difference step, in (0, 1]")
    parser.add_argument("--atol", type=nonneg, default=1e-6, help="absolute tolerance of each gradient")
    parser.add_argument("--rtol", type=nonneg, default=1e-5, help="relative tolerance of each gradient")


def run(args):
    from ..gradcheck import gradcheck

    try:
        only = resolve_list(args.only, "check") if args.only is not None else None
    except UnknownComponent as e:
        print(f"npgpt check: --only: {e}", file=sys.stderr)
        return 2
    head = f"{'component':<20} {'tensor':<34} {'shape':<14} {'max abs':>9} {'max rel':>9}  result"
    print(head)
    print("-" * len(head))
    failed, t0 = [], time.perf_counter()
    for label, module, inputs, opts in cases(args.seed, only):
        report = gradcheck(
            module, *inputs, eps=args.eps, atol=args.atol, rtol=args.rtol, seed=args.seed, **opts
        )
        for r in report.rows:
            print(
                f"{label:<20} {r.name:<34} {str(r.shape):<14} {r.max_abs:>9.2e} {r.max_rel:>9.2e}  "
                f"{'PASS' if r.passed else 'FAIL'}",
                flush=True,
            )
        for desc, ok, detail in report.checks:
            if not ok:
                print(f"{label:<20} {desc}: FAIL {detail}", flush=True)
        if not report.passed:
            failed.append(label)
    took = time.perf_counter() - t0
    if failed:
        print(f"\nFAIL: {', '.join(failed)} ({took:.1f} s)")
        return 1
    print(f"\nall components PASS ({took:.1f} s; relative errors are |num - ana| / (|num| + atol))")
    return 0
