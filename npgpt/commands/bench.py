"""`npgpt bench`: time components and the GPT-2 124M training step against the GEMM floor and,
with --torch-twin, PyTorch eager (the book's code and fused ops). Method: docs/bench.md.
"""

import json
import sys

HELP = "benchmark components and the training step (float32) against the GEMM floor and PyTorch"


def add_arguments(parser):
    parser.add_argument("--quick", action="store_true", help="tiny sizes: runs in seconds (for tests)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per case (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    parser.add_argument(
        "--profile", action="store_true", help="show where the step's time goes, per component"
    )
    parser.add_argument(
        "--torch-twin",
        default=None,
        metavar="FILE",
        help="also time PyTorch: the twin models in FILE (benchmarks/torch_twin.py in a checkout; "
        "needs torch installed)",
    )
    parser.add_argument("--no-peak", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--only", choices=["components", "steps"], default=None, help="run one part only")
    parser.add_argument("--dropout", type=float, default=0.0, help="drop_rate of the model (default 0.0)")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the raw timings here")


def _ms(t):
    return f"{1e3 * t.median:9.1f} [{1e3 * t.min:.1f}-{1e3 * t.max:.1f}]" if t else ""


def _ratio(row, a, b):
    return f"{row[a].median / row[b].median:6.2f}x" if a in row and b in row else ""


def format_report(res):
    """The benchmark's tables as text (medians in ms, [min-max], ratios of medians)."""
    lines = [
        f"npgpt bench ({'quick' if res['quick'] else '124M'} sizes, float32, drop_rate "
        f"{res['drop_rate']}): median [min-max] ms of {res['repeats']} interleaved runs after "
        f"{res['warmup']} warm-up",
        res["env"],
        "",
    ]
    if res["components"]:
        head = f"{'forward+backward':<36} {'npgpt':>22} {'torch book':>22} {'torch fused':>22} {'/book':>7} {'/fused':>7}"
        lines += [head, "-" * len(head)]
        for r in res["components"]:
            lines.append(
                f"{r['label']:<36} {_ms(r['npgpt']):>22} {_ms(r.get('torch_book')):>22} "
                f"{_ms(r.get('torch_fused')):>22} {_ratio(r, 'npgpt', 'torch_book'):>7} "
                f"{_ratio(r, 'npgpt', 'torch_fused'):>7}"
            )
        lines.append("")
    if "build_seconds" in res:
        lines.append(f"GPTModel built (float64 init, astype float32) in {res['build_seconds']:.1f} s")
    for r in res["steps"]:
        gflops = r["flops"] / r["floor"].median / 1e9
        lines += [
            f"{r['label']}: forward + CrossEntropyLoss + backward ({r['flops'] / 1e9:.0f} GFLOP of matmul)",
            f"  npgpt        {_ms(r['npgpt'])}",
            f"  GEMM floor   {_ms(r['floor'])}   ({gflops:.0f} GFLOP/s)   npgpt / floor = "
            f"{_ratio(r, 'npgpt', 'floor').strip()}",
        ]
        for k in ("torch_book", "torch_fused"):
            if k in r:
                lines.append(f"  {k:<12} {_ms(r[k])}   npgpt / {k} = {_ratio(r, 'npgpt', k).strip()}")
        for k, v in r.get("peak", {}).items():
            lines.append(f"  peak RSS {k:<12} {v / 2**30:6.2f} GiB")
        if "profile" in r:
            total = sum(r["profile"].values())
            lines.append(f"  profile (exclusive time per component, one step = {1e3 * total:.0f} ms):")
            for k, v in r["profile"].items():
                if v >= 0.001 * total:
                    lines.append(f"    {k:<32} {1e3 * v:8.1f} ms {100 * v / total:5.1f}%")
        lines.append("")
    return "\n".join(lines)


def _jsonable(res):
    def conv(v):
        if hasattr(v, "times"):
            return {"median": v.median, "min": v.min, "max": v.max, "times": v.times}
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v

    return conv(res)


def run(args):
    from ..bench import run as bench_run

    res = bench_run(
        quick=args.quick,
        repeats=args.repeats,
        warmup=args.warmup,
        torch_twin=args.torch_twin,
        profile=args.profile,
        peak=not args.no_peak,
        drop_rate=args.dropout,
        components=args.only != "steps",
        steps=args.only != "components",
        progress=lambda msg: print(f"... {msg}", file=sys.stderr, flush=True),
    )
    print(format_report(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(_jsonable(res), f, indent=1)
    return 0
