"""What the benchmark times: the configurations, the components at the 124M sizes, the model
and its training step, and the PyTorch twin loaded from its file (benchmarks/torch_twin.py).
"""

import os
import time

import numpy as np

from .. import CrossEntropyLoss
from ..model import GPT_CONFIG_124M
from ..registry import resolve, supported

QUICK_CFG = {
    "vocab_size": 500,
    "context_length": 64,
    "emb_dim": 64,
    "n_heads": 4,
    "n_layers": 2,
    "drop_rate": 0.0,
    "qkv_bias": False,
}


def settings(quick=False, drop_rate=0.0):
    """The configuration, component input shape and step shapes of a full or quick run."""
    cfg = dict(QUICK_CFG if quick else GPT_CONFIG_124M, drop_rate=drop_rate)
    E = cfg["emb_dim"]
    comp_shape = (2, 16, E) if quick else (8, 128, E)  # (B, T, C)
    steps = [(2, 16), (1, 64)] if quick else [(4, 128), (1, 1024)]  # (B, T)
    return cfg, comp_shape, steps


def component_cases(cfg, shape, seed=0, components=None):
    """(label, module, x) for each of `components` (default: every one the registry's bench
    settings time as a component) at `shape` (B, T, E), or (B, T, width * E), in float32."""
    rng = np.random.default_rng(seed)
    B, T, E = shape
    cases = []
    for comp in components or supported("bench"):
        if comp.bench.part != "components":
            continue
        x = rng.standard_normal((B, T, comp.bench.width * E)).astype(np.float32)  # (B, T, width E)
        module = comp.bench.build(cfg, rng).astype(np.float32)
        cases.append((f"{comp.cls.__name__} {x.shape}", module, x))
    return cases


def fwd_bwd(module, x, dout):
    """A callable running module's forward and backward once."""

    def fn():
        module.forward(x)
        module.backward(dout)

    return fn


def build_model(cfg, seed=0):
    """GPTModel in float32 (built in float64, then cast); returns (model, seconds taken)."""
    t0 = time.perf_counter()
    model = resolve("model").bench.build(cfg, seed).astype(np.float32)
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


def default_twin():
    """benchmarks/torch_twin.py of the checkout this npgpt is imported from, when torch is
    installed (looked up, not imported); otherwise None. A pip-installed npgpt has no checkout
    beside it: pass the file's path instead (`npgpt bench --torch-twin FILE`)."""
    import importlib.util

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # above npgpt/
    path = os.path.join(root, "benchmarks", "torch_twin.py")
    if os.path.isfile(path) and importlib.util.find_spec("torch") is not None:
        return path
    return None


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
    try:
        spec.loader.exec_module(module)
    except ImportError as e:  # torch (or what the twin imports) is not installed here
        raise ImportError(f"npgpt bench: the torch twin at {path!r} needs PyTorch installed: {e}") from e
    return module
