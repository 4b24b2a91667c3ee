"""Scratch buffers kept across calls, so a training step does not allocate its big arrays afresh.

Why: NumPy hands an array of more than a few MB straight from the operating system, and the
first write to each new page costs a page fault; on the benchmark machine that runs at about
0.4 GB/s, slower than the arithmetic on the array (docs/bench.md). A buffer reused from one
step to the next has its pages already mapped.

Two kinds, both sized on first use and reallocated only when the shape or dtype changes:
- `buffer(module, name, shape, dtype)`: owned by one module, e.g. a cache its backward reads.
  Its contents live until that module's next forward, exactly like the cache they hold.
- `scratch(name, shape, dtype)`: shared by every module of one thread, for a temporary that
  is dead as soon as the call that filled it returns (a weight-gradient product before it is
  added to .grad). Per thread, so two models trained in two threads never share one.
Neither is ever returned to the caller: what a forward or backward returns is a fresh array.
(Recycling returned arrays once nobody holds them, judged by reference counts, was measured
and dropped: CPython 3.14 no longer counts every reference, so a held array could be
overwritten.)
"""

import threading

import numpy as np

from . import _blas_threads

_LOCAL = threading.local()  # .scratch: this thread's temporaries


def buffer(module, name, shape, dtype):
    """`module`'s reusable array `name` of `shape` and `dtype` (contents undefined)."""
    ws = module.__dict__.get("_workspace")
    if ws is None:
        ws = {}
        object.__setattr__(module, "_workspace", ws)  # not a parameter or buffer: no state_dict entry
    shape, dtype = tuple(shape), np.dtype(dtype)
    buf = ws.get(name)
    if buf is None or buf.shape != shape or buf.dtype != dtype:  # one per name: T may vary
        buf = ws[name] = np.empty(shape, dtype)
    return buf


def scratch(name, shape, dtype):
    """A temporary of `shape` and `dtype` for this thread (contents undefined); dead after the
    call. Kept per (name, shape, dtype): used for weight shapes, of which a model has a handful."""
    pool = _LOCAL.__dict__.setdefault("scratch", {})
    key = (name, tuple(shape), np.dtype(dtype))
    buf = pool.get(key)
    if buf is None:
        if len(pool) >= 16:  # many shapes (tests sweeping sizes): start over, stay small
            pool.clear()
        buf = pool[key] = np.empty(key[1], key[2])
    return buf


def clear_scratch():
    """Free this thread's temporaries (they are reallocated on the next use)."""
    _LOCAL.__dict__.pop("scratch", None)


# ---- blockwise elementwise passes over the policy's threads (_blas_threads.py) -------------
BLOCK = (
    1 << 17
)  # elements per block and array (512 KB in float32): measured best here, 2x better than 1 << 15


def blockwise(fn, *arrays):
    """Call fn(*blocks) on matching blocks of rows of `arrays`, the blocks spread over the threads.

    Every array is C-contiguous and viewed as (rows, its last dim), all with the same rows;
    fn works in place on its blocks (NumPy ufuncs with out=) and returns None or a value that
    is returned in block order. Buys: NumPy runs each pass on one core and over the whole
    array, so a chain of passes streams memory each time; in blocks the chain runs in cache,
    on every core (NumPy releases the GIL inside each pass).
    """
    if not all(a.flags.c_contiguous for a in arrays):
        raise ValueError("blockwise: every array must be C-contiguous (a reshape would copy an output)")
    rows2d = [a.reshape(-1, a.shape[-1] if a.ndim else 1) for a in arrays]
    n = rows2d[0].shape[0]
    step = max(1, BLOCK // max(1, rows2d[0].shape[1]))  # rows per block
    starts = list(range(0, n, step))
    nthreads = _blas_threads.threads()
    if len(starts) < 2 or nthreads == 1:  # small: one call, no threads
        return [fn(*rows2d)]
    results = [None] * len(starts)

    def run(lo, hi):
        for b in range(lo, hi):
            i = starts[b]
            results[b] = fn(*(a[i : i + step] for a in rows2d))

    nthreads = min(nthreads, len(starts))
    cut = [len(starts) * k // nthreads for k in range(nthreads + 1)]
    workers = _blas_threads.pool()
    futures = [workers.submit(run, cut[k], cut[k + 1]) for k in range(1, nthreads)]
    run(cut[0], cut[1])  # the calling thread takes the first share
    for f in futures:
        f.result()
    return results
