"""Input checks shared by every component: bad input gets a clear error naming the module,
the argument and the shapes, never a NaN, a silent broadcast or a crash deep inside NumPy.

NaN and inf are not rejected: like PyTorch, they propagate to the output (documented in
docs/index.md), since scanning every activation for them would cost a pass over the data.
"""

import numpy as np


def size(where, name, value, low=0):
    """Return `value` as an int after checking that it is an integer (not a bool) >= low: a
    constructor's dimension, named in the error, not NumPy's "negative dimensions"."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an integer >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"{where}: {name} must be an integer >= {low}, got {value!r}")
    return int(value)


def float_input(where, name, x, dtype, ndim_min=1, last_dim=None):
    """Return `x` as an ndarray of `dtype`, after checking its kind, rank and last dimension.

    `where` is the "Module.method" to name in errors. Floating input of another precision is
    cast to `dtype` (the parameters' dtype); integer, bool, complex and object input is refused.
    """
    if not isinstance(x, np.ndarray):
        try:
            x = np.asarray(x)
        except (ValueError, TypeError) as e:
            raise TypeError(f"{where}: {name} must be a float array, could not convert: {e}") from None
    if x.dtype.kind != "f":
        raise TypeError(
            f"{where}: {name} must be a float array (float32 or float64), got dtype {x.dtype} "
            f"with shape {x.shape}"
        )
    if x.ndim < ndim_min:
        raise ValueError(f"{where}: {name} must have at least {ndim_min} dimension(s), got shape {x.shape}")
    if last_dim is not None and x.shape[-1] != last_dim:
        raise ValueError(f"{where}: {name} has shape {x.shape}, but its last dimension must be {last_dim}")
    if dtype is not None and x.dtype != dtype:
        x = x.astype(dtype)
    return x


def index_input(where, name, idx, high, ndim=None):
    """Return integer indices `idx` as an int64 array after checking dtype, rank and range."""
    idx = np.asarray(idx)
    if idx.dtype.kind not in "iu":
        raise TypeError(
            f"{where}: {name} must be an integer array of token ids, got dtype {idx.dtype} "
            f"with shape {idx.shape}"
        )
    if ndim is not None and idx.ndim != ndim:
        raise ValueError(f"{where}: {name} must have {ndim} dimensions, got shape {idx.shape}")
    if idx.size and (idx.min() < 0 or idx.max() >= high):
        bad = idx[(idx < 0) | (idx >= high)].flat[0]
        raise IndexError(f"{where}: {name} holds id {int(bad)} outside [0, {high}) (shape {idx.shape})")
    return idx.astype(np.int64, copy=False)


def cache_of(module, cache):
    """Refuse a backward that has no forward to undo."""
    if cache is None:
        raise RuntimeError(
            f"{type(module).__name__}.backward called before forward: there is no cached "
            "forward to differentiate"
        )
    return cache


def grad_output(module, dout, shape, dtype):
    """Check that `dout` matches the last forward's output `shape`; return it in `dtype`."""
    where = f"{type(module).__name__}.backward"
    dout = float_input(where, "dout", dout, dtype, ndim_min=0)  # its shape is checked below
    if dout.shape != tuple(shape):
        raise ValueError(
            f"{where}: dout has shape {dout.shape}, expected {tuple(shape)} "
            "(the shape of the last forward's output)"
        )
    return dout
