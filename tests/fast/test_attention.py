"""npgpt.fast's MultiHeadAttention: equal to the reference (npgpt/layers/attention.py) with the
same dropout mask; tiles of query rows change nothing but rounding; against the loop-per-head
attention of tests/layers/test_attention.py, gradcheck, empty input, errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npgpt import MultiHeadAttention as ReferenceAttention
from npgpt import gradcheck
from npgpt.fast import MultiHeadAttention
from tests.asserts import assert_close, assert_gradcheck, assert_normwise_rel
from tests.fast.twins import assert_twins_agree, pair, small_blocks_two_threads  # noqa: F401
from tests.layers.test_attention import reference_attention
from tests.strategies import TWIN_RTOL, arrays, attention_setups, dtypes, seeds


@given(
    B=st.integers(1, 2),
    T=st.integers(1, 5),
    d_in=st.integers(1, 5),
    nh=st.integers(1, 3),
    hs=st.integers(1, 3),
    qkv_bias=st.booleans(),
    tile_rows=st.integers(1, 6),
    seed=seeds,
)
def test_forward_matches_loop_reference(B, T, d_in, nh, hs, qkv_bias, tile_rows, seed):
    rng = np.random.default_rng(seed)
    mha = MultiHeadAttention(d_in, nh * hs, 5, 0.0, nh, qkv_bias=qkv_bias, rng=rng)
    mha.tile_rows = tile_rows  # 1 to 6 query rows per tile: T = 5 takes 1 to 5 tiles
    x = rng.standard_normal((B, T, d_in))
    assert_close("out", mha.forward(x), reference_attention(mha, x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "d_in,d_out,nh,T,ctx,qkv_bias,p",
    [
        (4, 4, 1, 3, 5, False, 0.0),
        (5, 6, 3, 4, 4, True, 0.0),  # d_in != d_out, T == context_length
        (6, 8, 2, 5, 7, True, 0.3),  # with attention dropout
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tile_rows", [2, 128])  # several tiles, and one
def test_gradcheck(d_in, d_out, nh, T, ctx, qkv_bias, p, dtype, tile_rows):
    rng = np.random.default_rng(0)
    mha = MultiHeadAttention(d_in, d_out, ctx, p, nh, qkv_bias=qkv_bias, rng=rng).astype(dtype)
    mha.tile_rows = tile_rows
    x = rng.standard_normal((2, T, d_in)).astype(dtype)
    out = mha.forward(x)
    assert out.dtype == mha.backward(np.ones_like(out)).dtype == dtype
    assert_gradcheck(gradcheck(mha, x))


@pytest.mark.parametrize("tile_rows", [1, 7, 128, 300])
def test_tiles_change_nothing_but_rounding(tile_rows):
    """T = 300 spans three 128-row tiles with a short last one; any tiling computes the same
    function, so outputs and all gradients agree with one untiled pass to float64 rounding."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 300, 8))
    dout = rng.standard_normal((2, 300, 8))
    results = []
    for rows in (tile_rows, 300):
        mha = MultiHeadAttention(8, 8, 300, 0.0, 2, qkv_bias=True, rng=0)
        mha.tile_rows = rows
        out = mha.forward(x)
        results.append((out, mha.backward(dout), {n: p.grad for n, p in mha.named_parameters()}))
    (out, dx, grads), (out1, dx1, grads1) = results
    assert_close("out, tiled vs untiled", out, out1, rtol=1e-12, atol=1e-14)
    assert_close("dx, tiled vs untiled", dx, dx1, rtol=1e-12, atol=1e-14)
    for name in grads:
        assert_close(f"{name}.grad, tiled vs untiled", grads[name], grads1[name], rtol=1e-12, atol=1e-14)


def test_tiles_of_the_causal_mask():
    mha = MultiHeadAttention(2, 2, 300, 0.0, 1)
    future = mha.mask[:300, :300].astype(bool)
    # rows i0:i1 see keys up to i1 - 1; the first masked key of row i0 is i0 + 1
    assert mha._tiles(future) == [(0, 128, 1, 128), (128, 256, 129, 256), (256, 300, 257, 300)]
    mha.tile_rows = 1
    assert mha._tiles(future[:3, :3]) == [(0, 1, 1, 1), (1, 2, 2, 2), (2, 3, 3, 3)]


def test_empty_sequence():
    """T = 0: no tiles; the output and dx are empty, and no gradient accumulates."""
    mha = MultiHeadAttention(4, 4, 5, 0.0, 2, qkv_bias=True, rng=0)
    out = mha.forward(np.ones((2, 0, 4)))
    assert out.shape == (2, 0, 4), f"out has shape {out.shape}, expected (2, 0, 4)"
    assert mha.cache.weights().shape == (2, 2, 0, 0)
    dx = mha.backward(np.ones_like(out))
    assert dx.shape == (2, 0, 4), f"dx has shape {dx.shape}, expected (2, 0, 4)"
    for name, p in mha.named_parameters():
        assert_close(f"{name}.grad after an empty sequence", p.grad, np.zeros_like(p.grad), rtol=0, atol=0)


def test_tile_rows_error():
    mha = MultiHeadAttention(4, 4, 3, 0.0, 2, rng=0)
    mha.tile_rows = 0
    with pytest.raises(ValueError, match=r"MultiHeadAttention: tile_rows must be an int >= 1, got 0"):
        mha.forward(np.ones((1, 2, 4)))


# ---- the fast path against the reference (tests/fast/twins.py) -----------------------------


def key_bias_terms(mha, x):
    """The key bias's gradient, sum over positions of dk, is 0 in exact arithmetic (softmax
    ignores a shift of its row); its terms have the size of dk, at least ||dW_key|| / ||x||."""
    if mha.W_key.bias is None:
        return {}
    norm_x = float(np.linalg.norm(x.astype(np.float64)))
    return {"W_key.bias": float(np.linalg.norm(mha.W_key.weight.grad)) / max(norm_x, 1e-30)}


@given(setup=attention_setups(), dtype=dtypes(), seed=seeds, data=st.data())
def test_fast_equals_reference(setup, dtype, seed, data):
    """Output, dx, every gradient and the attention weights, with dropout on (the same seed
    draws the same mask on both paths) and tiles of 1 to 128 query rows."""
    B, T = setup["B"], setup["T"]
    keys = ("d_in", "d_out", "context_length", "dropout", "num_heads", "qkv_bias")

    def build(dt):
        mha = ReferenceAttention(**{k: setup[k] for k in keys}, rng=seed).astype(dt)
        mha.tile_rows = setup["tile_rows"]  # used once accelerate makes it the fast class
        return mha

    x = data.draw(arrays(dtype, (B, T, setup["d_in"]), bound=3.0), label="x")
    dout = data.draw(arrays(dtype, (B, T, setup["d_out"]), bound=3.0), label="dout")
    label = f"MultiHeadAttention {dtype.__name__} p={setup['dropout']}"
    ref, fast, _ = assert_twins_agree(label, build, (x,), dout, dtype, lambda ref: key_bias_terms(ref, x))
    rtol = TWIN_RTOL[np.dtype(dtype)]
    for dropped in (False, True):
        assert_normwise_rel(
            f"{label}: cache.weights(dropped={dropped}), fast vs reference",
            fast.cache.weights(dropped),
            ref.cache.weights(dropped),
            rtol,
        )


def test_fast_eval_and_no_dropout_skip_the_mask():
    """Dropout off (eval, or p = 0): the weights are used as they are, the draw is skipped, and
    the dropout generator is left untouched on both paths."""
    x = np.random.default_rng(0).standard_normal((2, 5, 4))
    for p, train in ((0.5, False), (0.0, True)):
        ref, fast = pair(lambda p=p: ReferenceAttention(4, 4, 5, p, 2, rng=1))
        ref.train(train)
        fast.train(train)
        before = fast.dropout.rng.bit_generator.state
        assert_close(f"out (p={p}, train={train})", fast.forward(x), ref.forward(x), rtol=1e-12, atol=1e-14)
        assert fast.dropout.rng.bit_generator.state == before, "the dropout generator advanced"
