"""`--profile`: where the training step's time goes, per component kind, exclusive of the
components each one calls. Method: docs/bench.md.
"""

import time

from .. import CrossEntropyLoss
from .cases import step_fn


def profile_step(model, idx, targets, repeats=1, loss_fn=None):
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

    loss_fn = CrossEntropyLoss() if loss_fn is None else loss_fn
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
