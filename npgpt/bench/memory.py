"""Peak resident memory of training steps, each measured in a fresh process so that one
case's arrays and allocator state do not count against another. Method: docs/bench.md.
"""

import json
import os
import subprocess
import sys

from .cases import build_model, load_twin, step_batch, step_fn


def _rss_peak_reset():
    """Reset the kernel's peak-RSS mark to the current RSS; False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _rss_peak():
    """Peak resident set size of this process, in bytes (since the last reset where possible)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _peak_main(spec):
    """Entry point of the peak-memory subprocess: build, reset the peak, run steps, print JSON."""
    cfg, B, T, kind, steps = spec["cfg"], spec["B"], spec["T"], spec["kind"], spec["steps"]
    model, _ = build_model(cfg)
    idx, targets = step_batch(cfg, B, T)
    if kind not in ("npgpt", "reference"):
        twin = load_twin(spec["twin"])
        model = twin.like(model, cfg, book=kind == "torch_book")
        fn = twin.step_fn(model, idx, targets)
    elif kind == "npgpt" and spec.get("fast", True):
        from ..fast import accelerate
        from ..loss import CrossEntropyLoss

        fn = step_fn(accelerate(model), idx, targets, accelerate(CrossEntropyLoss()))
    else:
        fn = step_fn(model, idx, targets)
    reset = _rss_peak_reset()
    for _ in range(steps):
        fn()
    print(json.dumps({"peak": _rss_peak(), "since_reset": reset}))


def peak_rss(cfg, B, T, kind="npgpt", steps=2, twin=None, fast=True):
    """Peak RSS in bytes of `steps` training steps (params and grads included), in a fresh process.
    kind: "npgpt" (the fast path, or the reference when `fast` is False), "reference",
    "torch_book" or "torch_fused"."""
    twin = os.path.abspath(twin) if twin else None
    spec = json.dumps({"cfg": cfg, "B": B, "T": T, "kind": kind, "steps": steps, "twin": twin, "fast": fast})
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # above npgpt/
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    code = f"import json, npgpt.bench.memory as m; m._peak_main(json.loads({spec!r}))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"peak_rss({kind}, B={B}, T={T}): subprocess failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])["peak"]
