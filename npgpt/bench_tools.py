"""The benchmark's measuring tools: the GEMM floor, the per-component profile, peak memory
of a step in a fresh process, and which BLAS NumPy runs. Used by npgpt/bench.py; method in
docs/bench.md.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

from . import CrossEntropyLoss


def gemm_shapes(cfg, B, T):
    """The step's matrix products as (batch, m, k, n): C[batch, m, n] = A[batch, m, k] @ B[batch, k, n]."""
    E, V, nh, L = cfg["emb_dim"], cfg["vocab_size"], cfg["n_heads"], cfg["n_layers"]
    N, hs = B * T, E // nh
    block = []
    for fan_in, fan_out, count in ((E, E, 4), (E, 4 * E, 1), (4 * E, E, 1)):  # q, k, v, out; ff1; ff2
        # forward x @ W^T; backward dW = dout^T @ x and dx = dout @ W
        block += [(1, N, fan_in, fan_out), (1, fan_out, N, fan_in), (1, N, fan_out, fan_in)] * count
    # scores q k^T, ctx att v; backward datt, dv, dq, dk
    block += [
        (B * nh, T, hs, T),
        (B * nh, T, T, hs),
        (B * nh, T, hs, T),
        (B * nh, T, T, hs),
        (B * nh, T, T, hs),
        (B * nh, T, T, hs),
    ]
    head = [(1, N, E, V), (1, V, N, E), (1, N, V, E)]
    return block * L + head


def gemm_floor_fn(cfg, B, T, seed=0):
    """A callable running the step's products (gemm_shapes, in that order) with np.matmul.

    As in the model: each layer's weight is its own (out, in) array, used as W^T in forward;
    activations of one shape are shared, and outputs go to buffers allocated once per shape.
    `fn.shapes` lists the (batch, m, k, n) of the products it runs.
    """
    rng = np.random.default_rng(seed)
    E, V, nh, L = cfg["emb_dim"], cfg["vocab_size"], cfg["n_heads"], cfg["n_layers"]
    N, hs, f32 = B * T, E // nh, np.float32
    arrays = {}

    def act(*shape, out=False):  # one shared input array, or one output buffer, per shape
        key = (out, *shape)
        if key not in arrays:
            arrays[key] = np.empty(shape, f32) if out else rng.standard_normal(shape, f32)
        return arrays[key]

    def linear(fan_in, fan_out):  # forward x @ W^T; backward dW = dout^T @ x and dx = dout @ W
        W = rng.standard_normal((fan_out, fan_in), f32)
        dout, x = act(N, fan_out), act(N, fan_in)
        return [
            (x, W.T, act(N, fan_out, out=True)),
            (dout.T, x, act(fan_out, fan_in, out=True)),
            (dout, W, act(N, fan_in, out=True)),
        ]

    ops = []
    for _ in range(L):
        for fan_in, fan_out in ((E, E),) * 4 + ((E, 4 * E), (4 * E, E)):  # q, k, v, out; ff1; ff2
            ops += linear(fan_in, fan_out)
        # scores q k^T, ctx att v; backward datt, dv, dq, dk
        q, kt, att = act(B * nh, T, hs), act(B * nh, hs, T), act(B * nh, T, T)
        scores, ctx = act(B * nh, T, T, out=True), act(B * nh, T, hs, out=True)
        ops += [(q, kt, scores), (att, q, ctx), (q, kt, scores), (att.swapaxes(1, 2), q, ctx)]
        ops += [(att, q, ctx), (att.swapaxes(1, 2), q, ctx)]
    ops += linear(E, V)

    def fn():
        for a, w, c in ops:
            np.matmul(a, w, out=c)

    fn.shapes = [((a.shape[0] if a.ndim == 3 else 1),) + a.shape[-2:] + w.shape[-1:] for a, w, _ in ops]
    return fn


def gemm_flops(cfg, B, T):
    return sum(2 * b * m * k * n for b, m, k, n in gemm_shapes(cfg, B, T))


def profile_step(model, idx, targets, repeats=1):
    """Seconds per component kind (exclusive of children) over `repeats` steps: {kind: s}."""
    totals, stack, patched = {}, [], []

    def kind(name, mod):
        kind = type(mod).__name__
        if kind == "Linear":
            last = name.split(".")[-2:]
            kind += " " + (
                "qkv"
                if last[-1] in ("W_query", "W_key", "W_value")
                else "out_proj"
                if last[-1] == "out_proj"
                else "ff"
                if last[0] == "layers"
                else last[-1]
            )
        return kind

    def wrap(mod, meth, key):
        orig = getattr(mod, meth)

        def timed(*a, **k):
            stack.append(0.0)
            t0 = time.perf_counter()
            try:
                return orig(*a, **k)
            finally:
                dt = time.perf_counter() - t0
                inner = stack.pop()
                totals[key] = totals.get(key, 0.0) + dt - inner
                if stack:
                    stack[-1] += dt

        object.__setattr__(mod, meth, timed)
        patched.append((mod, meth))

    from .bench import step_fn

    loss_fn = CrossEntropyLoss()
    for name, mod in [*model.named_modules(), ("loss", loss_fn)]:
        for meth in ("forward", "backward"):
            wrap(mod, meth, f"{kind(name, mod)} {meth}")
    try:
        run_ = step_fn(model, idx, targets, loss_fn)
        run_()  # warm-up, not counted
        totals.clear()
        for _ in range(repeats):
            run_()
    finally:
        for mod, meth in patched:
            del mod.__dict__[meth]
    return {k: v / repeats for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


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
    from .bench import build_model, step_batch, step_fn

    cfg, B, T, kind, steps = spec["cfg"], spec["B"], spec["T"], spec["kind"], spec["steps"]
    model, _ = build_model(cfg)
    idx, targets = step_batch(cfg, B, T)
    if kind != "npgpt":
        from .bench import load_twin

        twin = load_twin(spec["twin"])
        model = twin.like(model, cfg, book=kind == "torch_book")
        fn = twin.step_fn(model, idx, targets)
    else:
        fn = step_fn(model, idx, targets)
    reset = _rss_peak_reset()
    for _ in range(steps):
        fn()
    print(json.dumps({"peak": _rss_peak(), "since_reset": reset}))


def peak_rss(cfg, B, T, kind="npgpt", steps=2, twin=None):
    """Peak RSS in bytes of `steps` training steps (params and grads included), in a fresh process."""
    twin = os.path.abspath(twin) if twin else None
    spec = json.dumps({"cfg": cfg, "B": B, "T": T, "kind": kind, "steps": steps, "twin": twin})
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    code = f"import json, npgpt.bench_tools as b; b._peak_main(json.loads({spec!r}))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"peak_rss({kind}, B={B}, T={T}): subprocess failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])["peak"]


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
