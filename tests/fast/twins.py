"""Running a reference component and its npgpt.fast twin on the same input and comparing every
tensor: the output, dx and each parameter's gradient.

The criterion is the norm-wise relative error, ||fast - ref|| <= rtol * ||ref|| with rtol =
TWIN_RTOL (1e-12 in float64, 1e-5 in float32), wherever the case is well-conditioned. Where it
is not (a gradient that nearly cancels: LayerNorm's dx at C = 2, the softmax backward of nearly
equal values, dlogits where softmax is nearly one-hot) two correct implementations that sum in
different orders differ by more than that, and so does the reference from the exact result. The
test measures that: it runs the reference in float64 and, four times, in float32 (the inputs
as given, then moved by one float32 ulp in random directions, so each run rounds differently),
takes the reference's own rounding error E = max ||ref32 - ref64|| (scaled by the unit roundoff
to the tested dtype), and accepts ||fast - ref|| <= max(rtol * ||ref||, ROUNDING_FACTOR * E).
So the fast path is as close to the reference as the tolerance asks, or about as close as the
reference is to itself in another precision, whichever is looser. A tensor that vanishes in
exact arithmetic whatever the input (the key bias's gradient: softmax ignores a shift of its
row) can come out exactly 0 in every float32 run of the reference, so E says nothing about it;
the test gives such tensors a floor of their own: the size of the terms they sum.

The twin tests run with small blocks (64 elements) on two threads, so the fast path's blockwise
passes split even these small arrays into several blocks over the pool.
"""

import numpy as np
import pytest

from npgpt.fast import _blas_threads, _workspace, accelerate, is_fast
from tests.asserts import assert_normwise_rel
from tests.strategies import TWIN_RTOL, unit_roundoff

ROUNDING_FACTOR = 64.0  # times the reference's own rounding error (worst ratio seen in thorough runs: ~30)
ROUNDING_RUNS = 4  # float32 runs of the reference, each rounding differently


@pytest.fixture(scope="module", autouse=True)
def small_blocks_two_threads():
    block, threads = _workspace.BLOCK, _blas_threads._threads
    _workspace.BLOCK = 64
    _blas_threads.set_threads(2)
    yield
    _workspace.BLOCK = block
    _blas_threads.set_threads(threads if threads is not None else _blas_threads.available_cpus())


def randomize(module, seed, bound=1.0):
    """Set every parameter to values drawn from `seed` (the same seed gives the same values)."""
    rng = np.random.default_rng(seed)
    for _, p in module.named_parameters():
        p.data = rng.uniform(-bound, bound, p.data.shape).astype(p.data.dtype)
    return module


def cast(a, dtype):
    """Float arrays and Python floats to `dtype`; anything else (token ids, targets) unchanged."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return a.astype(dtype)
    return a


def run(module, inputs, dout):
    """{tensor name: value} of one forward and backward: "out", "dx" (absent when None) and each
    parameter's gradient by its name; copies."""
    out = module.forward(*inputs)
    dx = module.backward(dout)
    res = {"out": np.array(out, copy=True, dtype=np.float64)}
    if dx is not None:
        res["dx"] = np.array(dx, copy=True)
    res.update({n: p.grad.copy() for n, p in module.named_parameters()})
    return res


def nudge(a, rng):
    """A float32 array moved by one ulp, up or down at random per element; others unchanged."""
    if isinstance(a, np.ndarray) and a.dtype == np.float32:
        return np.nextafter(a, np.where(rng.random(a.shape) < 0.5, -np.inf, np.inf).astype(np.float32))
    return a


def rounding_floors(build, inputs, dout, dtype):
    """{tensor: ROUNDING_FACTOR * E / rtol}: the reference's own rounding error, measured as its
    float32 results against its float64 result and scaled to `dtype` (module docstring)."""
    r64 = run(build(np.float64), [cast(a, np.float64) for a in inputs], cast(dout, np.float64))
    rng = np.random.default_rng(0)
    err = dict.fromkeys(r64, 0.0)
    for i in range(ROUNDING_RUNS):
        x32 = [cast(a, np.float32) for a in inputs]
        r32 = run(build(np.float32), [nudge(a, rng) for a in x32] if i else x32, cast(dout, np.float32))
        for k in r64:
            err[k] = max(err[k], float(np.linalg.norm((r32[k].astype(np.float64) - r64[k]).ravel())))
    scale = unit_roundoff(dtype) / unit_roundoff(np.float32)
    rtol = TWIN_RTOL[np.dtype(dtype)]
    return {k: ROUNDING_FACTOR * scale * e / rtol for k, e in err.items()}


def pair(build):
    """(reference, fast): two modules from `build()`, the second switched to the fast path."""
    ref, fast = build(), accelerate(build())
    assert not is_fast(ref) and is_fast(fast), "accelerate did not switch the module"
    return ref, fast


def assert_twins_agree(label, build, inputs, dout, dtype, term_sizes=None):
    """Build the reference (`build(dtype)`) and its fast twin, run both, compare every tensor
    (module docstring); return (reference module, fast module, reference results).
    `term_sizes(ref)`, called after the reference's step: {tensor: the norm of the terms it
    sums} for tensors that vanish in exact arithmetic."""
    ref, fast = pair(lambda: build(dtype))
    r, f = run(ref, inputs, dout), run(fast, inputs, dout)
    assert list(f) == list(r), f"{label}: fast tensors {list(f)}, reference {list(r)}"
    floors = rounding_floors(build, inputs, dout, dtype)
    for name, size in (term_sizes(ref) if term_sizes else {}).items():
        floors[name] = max(floors[name], size)
    rtol = TWIN_RTOL[np.dtype(dtype)]
    for name, value in r.items():
        if name != "out":
            assert f[name].dtype == value.dtype, (
                f"{label}: {name} dtype {f[name].dtype}, reference {value.dtype}"
            )
        what = name if name in ("out", "dx") else f"{name}.grad"
        assert_normwise_rel(f"{label}: {what}, fast vs reference", f[name], value, rtol, floors[name])
    return ref, fast, r
