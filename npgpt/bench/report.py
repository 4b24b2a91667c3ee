"""The benchmark's report: its tables as text, its figures as JSON, and the line that says
which NumPy and BLAS ran them.
"""

import os

import numpy as np


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
    name = "npgpt fast" if res.get("fast", True) else "npgpt reference"
    if res["components"]:
        head = (
            f"{'forward+backward':<36} {name:>22} {'reference':>22} {'torch book':>22} {'torch fused':>22} "
            f"{'ref/fast':>8} {'/book':>7} {'/fused':>7}"
        )
        lines += [head, "-" * len(head)]
        for r in res["components"]:
            lines.append(
                f"{r['label']:<36} {_ms(r['npgpt']):>22} {_ms(r.get('reference')):>22} "
                f"{_ms(r.get('torch_book')):>22} {_ms(r.get('torch_fused')):>22} "
                f"{_ratio(r, 'reference', 'npgpt'):>8} {_ratio(r, 'npgpt', 'torch_book'):>7} "
                f"{_ratio(r, 'npgpt', 'torch_fused'):>7}"
            )
        lines.append("")
    if "build_seconds" in res:
        lines.append(f"GPTModel built (float64 init, astype float32) in {res['build_seconds']:.1f} s")
    for r in res["steps"]:
        gflops = r["flops"] / r["floor"].median / 1e9
        lines += [
            f"{r['label']}: forward + CrossEntropyLoss + backward ({r['flops'] / 1e9:.0f} GFLOP of matmul)",
            f"  {name:<16} {_ms(r['npgpt'])}   / floor = {_ratio(r, 'npgpt', 'floor').strip()}",
        ]
        if "reference" in r:
            lines.append(
                f"  {'npgpt reference':<16} {_ms(r['reference'])}   / floor = "
                f"{_ratio(r, 'reference', 'floor').strip()}   reference / fast = {_ratio(r, 'reference', 'npgpt').strip()}"
            )
        lines.append(f"  {'GEMM floor':<16} {_ms(r['floor'])}   ({gflops:.0f} GFLOP/s)")
        for k in ("torch_book", "torch_fused"):
            if k in r:
                lines.append(f"  {k:<16} {_ms(r[k])}   npgpt / {k} = {_ratio(r, 'npgpt', k).strip()}")
        for k, v in r.get("peak", {}).items():
            lines.append(f"  peak RSS {k:<16} {v / 2**30:6.2f} GiB")
        if "profile" in r:
            total = sum(r["profile"].values())
            lines.append(f"  profile (exclusive time per component, one step = {1e3 * total:.0f} ms):")
            for k, v in r["profile"].items():
                if v >= 0.001 * total:
                    lines.append(f"    {k:<32} {1e3 * v:8.1f} ms {100 * v / total:5.1f}%")
        lines.append("")
    return "\n".join(lines)


def jsonable(res):
    """`res` of run() with each Timing as a dict of median, min, max and times (for json.dump)."""

    def conv(v):
        if hasattr(v, "times"):
            return {"median": v.median, "min": v.min, "max": v.max, "times": v.times}
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v

    return conv(res)


def blas_info():
    """Which BLAS numpy runs (threadpoolctl when installed), the OPENBLAS_CORETYPE setting and
    OPENBLAS_THREAD_TIMEOUT (npgpt sets 16 when it is imported before NumPy)."""
    core = os.environ.get("OPENBLAS_CORETYPE", "unset")
    timeout = os.environ.get("OPENBLAS_THREAD_TIMEOUT", "unset")
    try:
        from threadpoolctl import threadpool_info

        libs = [
            f"{i['internal_api']} {i.get('version')} {i.get('architecture', '')} ({i['num_threads']} threads)"
            for i in threadpool_info()
            if i["user_api"] == "blas" and "numpy" in i["filepath"]
        ]
        blas = "; ".join(libs) or "unknown"
    except ImportError:
        blas = "unknown (pip install npgpt[bench], i.e. threadpoolctl, to see the kernel)"
    return f"numpy {np.__version__}, BLAS {blas}, OPENBLAS_CORETYPE={core}, OPENBLAS_THREAD_TIMEOUT={timeout}"
