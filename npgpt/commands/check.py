"""`npgpt check`: gradcheck every component and the whole model at small sizes, in float64.

Prints one row per component and tensor with the worst errors and PASS/FAIL; exit status 1
if anything fails. The cases are small enough that the full run takes a few seconds.
"""

import time

import numpy as np

HELP = "check every hand-written backward against finite differences (float64)"


def cases(seed):
    """(label, module, inputs, gradcheck options) for every component, at small sizes."""
    from .. import (
        GELU,
        CrossEntropyLoss,
        Dropout,
        Embedding,
        FeedForward,
        GPTModel,
        LayerNorm,
        Linear,
        MultiHeadAttention,
        TransformerBlock,
    )

    rng = np.random.default_rng(seed)
    cfg = {
        "vocab_size": 11,
        "context_length": 6,
        "emb_dim": 8,
        "n_heads": 2,
        "n_layers": 2,
        "drop_rate": 0.1,
        "qkv_bias": True,
    }
    x = rng.standard_normal((2, 4, 8))  # (B, T, C)
    yield "LayerNorm", LayerNorm(8), (x,), {}
    yield "LayerNorm(unbiased)", LayerNorm(8, eps=1e-6, unbiased=True), (x,), {}
    yield "GELU", GELU(), (3 * rng.standard_normal((2, 4, 8)),), {}
    yield "Linear", Linear(8, 5, rng=rng), (x,), {}
    yield "Linear(bias=False)", Linear(8, 5, bias=False, rng=rng), (x,), {}
    yield "Dropout", Dropout(0.3, rng=rng), (x,), {}
    yield "Embedding", Embedding(11, 8, rng=rng), (rng.integers(0, 11, (2, 4)),), {}
    yield "FeedForward", FeedForward(cfg, rng=rng), (x,), {}
    yield "MultiHeadAttention", MultiHeadAttention(8, 6, 6, 0.1, 3, qkv_bias=True, rng=rng), (x,), {}
    yield "TransformerBlock", TransformerBlock(cfg, rng=rng), (x,), {}
    logits = 3 * rng.standard_normal((2, 4, 11))
    targets = rng.integers(0, 11, (2, 4))
    targets[0, 1] = -100
    yield "CrossEntropyLoss", CrossEntropyLoss(), (logits, targets), {}
    yield "GPTModel", GPTModel(cfg, rng=rng), (rng.integers(0, 11, (2, 5)),), {}


def add_arguments(parser):
    from .argtypes import at_least, positive_float

    nonneg = at_least(0.0, float)
    parser.add_argument("--seed", type=int, default=0, help="seed for inputs, weights and dout")
    parser.add_argument("--only", default=None, help="comma-separated component labels to check")
    parser.add_argument("--eps", type=positive_float, default=1e-6, help="finite-difference step")
    parser.add_argument("--atol", type=nonneg, default=1e-6, help="absolute tolerance of each gradient")
    parser.add_argument("--rtol", type=nonneg, default=1e-5, help="relative tolerance of each gradient")


def run(args):
    from ..gradcheck import gradcheck

    only = {s.strip().lower() for s in args.only.split(",")} if args.only else None
    head = f"{'component':<20} {'tensor':<34} {'shape':<14} {'max abs':>9} {'max rel':>9}  result"
    print(head)
    print("-" * len(head))
    failed, t0 = [], time.perf_counter()
    for label, module, inputs, opts in cases(args.seed):
        if only and label.lower() not in only and label.split("(")[0].lower() not in only:
            continue
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
