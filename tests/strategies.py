"""Hypothesis strategies shared by every test: dtypes, shapes, arrays, configurations.

Arrays draw every element (`fill=st.nothing()`): hypothesis' default fill repeats one value
across most of a large array, which would make constant rows (a LayerNorm edge case that gets
its own tests) the common case. float32 elements are drawn with `width=32`, so they are exactly
representable, and bounded, so sums cannot overflow.
"""

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

DTYPES = (np.float32, np.float64)


def dtypes():
    return st.sampled_from(DTYPES)


def shapes(min_dims=1, max_dims=3, min_side=1, max_side=6, last=None):
    """Array shapes; `last` fixes the trailing dimension (the feature axis)."""
    if last is None:
        return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)
    lead = hnp.array_shapes(
        min_dims=max(min_dims - 1, 0), max_dims=max_dims - 1, min_side=min_side, max_side=max_side
    )
    return lead.map(lambda s: tuple(s) + (last,))


def elements(dtype, bound=10.0):
    width = 32 if np.dtype(dtype) == np.float32 else 64
    return st.floats(-bound, bound, width=width, allow_nan=False, allow_infinity=False)


def arrays(dtype, shape, bound=10.0):
    """Finite float arrays of `dtype` and `shape` with every element drawn in [-bound, bound]."""
    return hnp.arrays(dtype, shape, elements=elements(dtype, bound), fill=st.nothing())


@st.composite
def spread_rows(draw, dtype, shape, bound=10.0, min_spread=1e-2):
    """Like `arrays`, but no row (last axis) is nearly constant: its spread is >= min_spread."""
    x = draw(arrays(dtype, shape, bound))
    rows = x.reshape(-1, shape[-1])
    ramp = np.linspace(-min_spread, min_spread, shape[-1], dtype=dtype)
    flat = np.where((rows.max(-1) - rows.min(-1) < min_spread)[:, None], rows + ramp, rows)
    return flat.reshape(shape).astype(dtype)


@st.composite
def gpt_configs(draw, max_layers=3, max_context=8):
    """Small GPTModel configurations: heads divide emb_dim, 1..max_layers layers."""
    n_heads = draw(st.integers(1, 3))
    head_dim = draw(st.integers(1, 4))
    return {
        "vocab_size": draw(st.integers(2, 17)),
        "context_length": draw(st.integers(1, max_context)),
        "emb_dim": n_heads * head_dim,
        "n_heads": n_heads,
        "n_layers": draw(st.integers(1, max_layers)),
        "drop_rate": draw(st.sampled_from([0.0, 0.1])),
        "qkv_bias": draw(st.booleans()),
    }


seeds = st.integers(0, 2**32 - 1)


# ---- added for the property-based suite (tests/properties) ---------------------------------


def unit_roundoff(dtype):
    """u = eps / 2: one rounding changes a value v by at most u * |v|."""
    return float(np.finfo(dtype).eps) / 2.0


def token_ids(V, shape):
    """Integer token ids in [0, V) of `shape`."""
    return hnp.arrays(np.int64, shape, elements=st.integers(0, V - 1), fill=st.nothing())


@st.composite
def attention_setups(draw, max_heads=3, max_head_dim=4, max_context=7, max_batch=2):
    """MultiHeadAttention arguments plus an input shape (B, T, d_in) with T <= context_length."""
    num_heads = draw(st.integers(1, max_heads))
    d_out = num_heads * draw(st.integers(1, max_head_dim))
    context = draw(st.integers(1, max_context))
    return {
        "d_in": draw(st.integers(1, 6)),
        "d_out": d_out,
        "context_length": context,
        "num_heads": num_heads,
        "qkv_bias": draw(st.booleans()),
        "dropout": draw(st.sampled_from([0.0, 0.2])),
        "B": draw(st.integers(1, max_batch)),
        "T": draw(st.integers(1, context)),
        "tile_rows": draw(st.sampled_from([1, 2, 3, 128])),  # query rows per tile: many tiles, or one
    }


@st.composite
def logits_and_targets(draw, dtype, max_V=9, ignore_index=-100, bound=10.0):
    """(logits, targets): logits (N, V) or (B, T, V) drawn; targets in [0, V), some set to
    `ignore_index`, at least one not."""
    V = draw(st.integers(1, max_V))
    lead = draw(st.sampled_from([1, 2]))
    lead_shape = draw(hnp.array_shapes(min_dims=lead, max_dims=lead, min_side=1, max_side=5))
    logits = draw(arrays(dtype, tuple(lead_shape) + (V,), bound))
    targets = draw(token_ids(V, tuple(lead_shape)))
    ignored = draw(hnp.arrays(np.bool_, tuple(lead_shape), elements=st.booleans(), fill=st.nothing()))
    ignored.flat[draw(st.integers(0, ignored.size - 1))] = False
    return logits, np.where(ignored, ignore_index, targets)


def tiny(dtype):
    """An absolute floor for rounding bounds: 2^10 smallest normal numbers. Relative bounds stop
    holding once a product underflows into the subnormals; this covers that and stays far below
    every value the tests read."""
    return 1024.0 * float(np.finfo(dtype).smallest_normal)


# ---- the fast path against the reference (tests/fast) --------------------------------------

# norm-wise relative error allowed between npgpt.fast and the reference (issue 12)
TWIN_RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}


@st.composite
def feature_shapes(draw, max_features=9, max_lead=3, max_side=5):
    """(..., C) shapes for the twin tests: 1 to 3 leading axes (T = 1 and odd sides included),
    C from 1 to max_features."""
    C = draw(st.integers(1, max_features))
    lead = draw(hnp.array_shapes(min_dims=1, max_dims=max_lead, min_side=1, max_side=max_side))
    return tuple(lead) + (C,)
