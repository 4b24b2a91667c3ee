"""MultiHeadAttention: against a loop-per-head reference written here, gradcheck, mask, errors."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npgpt import MultiHeadAttention, gradcheck
from tests.asserts import assert_close, assert_gradcheck
from tests.strategies import seeds


def reference_attention(mha, x):
    """The book's computation spelled out with loops over batch, heads and query positions."""
    B, T, _ = x.shape
    hs = mha.head_dim

    def lin(layer, a):
        out = a @ layer.weight.data.T
        return out + layer.bias.data if layer.bias is not None else out

    q, k, v = lin(mha.W_query, x), lin(mha.W_key, x), lin(mha.W_value, x)
    ctx = np.zeros((B, T, mha.d_out))
    for b in range(B):
        for h in range(mha.num_heads):
            cols = slice(h * hs, (h + 1) * hs)
            for t in range(T):
                scores = [float(q[b, t, cols] @ k[b, s, cols]) / math.sqrt(hs) for s in range(t + 1)]
                m = max(scores)
                w = [math.exp(s - m) for s in scores]
                w = [wi / sum(w) for wi in w]
                ctx[b, t, cols] = sum(w[s] * v[b, s, cols] for s in range(t + 1))
    return lin(mha.out_proj, ctx)


@given(
    B=st.integers(1, 2),
    T=st.integers(1, 5),
    d_in=st.integers(1, 5),
    nh=st.integers(1, 3),
    hs=st.integers(1, 3),
    qkv_bias=st.booleans(),
    seed=seeds,
)
def test_forward_matches_loop_reference(B, T, d_in, nh, hs, qkv_bias, seed):
    rng = np.random.default_rng(seed)
    mha = MultiHeadAttention(d_in, nh * hs, 5, 0.0, nh, qkv_bias=qkv_bias, rng=rng)
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
def test_gradcheck(d_in, d_out, nh, T, ctx, qkv_bias, p, dtype):
    rng = np.random.default_rng(0)
    mha = MultiHeadAttention(d_in, d_out, ctx, p, nh, qkv_bias=qkv_bias, rng=rng).astype(dtype)
    x = rng.standard_normal((2, T, d_in)).astype(dtype)
    out = mha.forward(x)
    assert out.dtype == mha.backward(np.ones_like(out)).dtype == dtype
    assert_gradcheck(gradcheck(mha, x))


def test_empty_sequence():
    """T = 0: the output and dx are empty, and no gradient accumulates."""
    mha = MultiHeadAttention(4, 4, 5, 0.0, 2, qkv_bias=True, rng=0)
    out = mha.forward(np.ones((2, 0, 4)))
    assert out.shape == (2, 0, 4), f"out has shape {out.shape}, expected (2, 0, 4)"
    assert mha.cache.weights().shape == (2, 2, 0, 0)
    dx = mha.backward(np.ones_like(out))
    assert dx.shape == (2, 0, 4), f"dx has shape {dx.shape}, expected (2, 0, 4)"
    for name, p in mha.named_parameters():
        assert_close(f"{name}.grad after an empty sequence", p.grad, np.zeros_like(p.grad), rtol=0, atol=0)


def test_errors():
    with pytest.raises(ValueError, match=r"d_out \(6\) must be divisible by num_heads \(4\)"):
        MultiHeadAttention(4, 6, 8, 0.0, 4)
    mha = MultiHeadAttention(4, 4, 3, 0.0, 2, rng=0)
    with pytest.raises(ValueError, match=r"T = 4 tokens \(shape \(1, 4, 4\)\), more than context_length = 3"):
        mha.forward(np.ones((1, 4, 4)))
    with pytest.raises(
        ValueError, match=r"MultiHeadAttention.forward: x must be \(B, T, d_in\), got shape \(3, 4\)"
    ):
        mha.forward(np.ones((3, 4)))
    with pytest.raises(RuntimeError, match="MultiHeadAttention.backward called before forward"):
        mha.backward(np.ones((1, 2, 4)))
    mha.forward(np.ones((1, 2, 4)))
    with pytest.raises(ValueError, match=r"dout has shape \(1, 3, 4\), expected \(1, 2, 4\)"):
        mha.backward(np.ones((1, 3, 4)))


@given(
    T=st.integers(1, 7),
    seed=seeds,
    scale=st.sampled_from([0.1, 1.0, 10.0]),
)
def test_dscores_rows_sum_to_zero(T, seed, scale):
    """docs/attention.md eq. 11: each row of dscores sums to 0 (the row of att sums to 1, so the
    softmax cannot change along (1, ..., 1)), and the masked future gets exactly 0 (eq. 12)."""
    rng = np.random.default_rng(seed)
    mha = MultiHeadAttention(4, 4, T, 0.0, 2, rng=rng)
    scores = scale * rng.standard_normal((2, 2, T, T))
    future = np.triu(np.ones((T, T), bool), 1)
    att = mha.softmax(np.where(future, -np.inf, scores))
    datt = rng.standard_normal((2, 2, T, T))
    dscores = mha.softmax_backward(datt, att)
    sums = dscores.sum(-1)
    bound = 16 * np.finfo(np.float64).eps * (np.abs(att * datt).sum(-1) + np.abs(datt).max(-1))
    worst = np.unravel_index(int(np.argmax(np.abs(sums) - bound)), sums.shape)
    assert np.all(np.abs(sums) <= bound), f"dscores row {worst} sums to {sums[worst]:.3e}"
    assert np.all(dscores[..., future] == 0), "dscores above the diagonal is not exactly 0"
    # and the rows of dscores are what the quotient rule gives, entry by entry (plain Python)
    a, d = att[0, 0, T - 1], datt[0, 0, T - 1]
    for j in range(T):
        want = sum(d[i] * a[i] * ((i == j) - a[j]) for i in range(T))
        assert abs(dscores[0, 0, T - 1, j] - want) <= 1e-12 * (1 + abs(want)), f"dscores[..., {j}]"


@pytest.mark.parametrize("path", ["reference", "fast"])
@pytest.mark.parametrize("chunks", [(1, 1, 1, 1, 1), (2, 3), (5,)])
def test_decoding_with_key_values_equals_the_full_forward(chunks, path):
    """forward(x, kv) over chunks of positions gives the rows of one forward over all of them
    (causality: row t depends on positions <= t only), leaves no cache to differentiate, and
    refuses to go past context_length."""
    from npgpt.fast import accelerate
    from npgpt.layers.attention import KeyValues

    rng = np.random.default_rng(4)
    mha = MultiHeadAttention(6, 6, 5, 0.0, 2, qkv_bias=True, rng=rng)
    if path == "fast":
        accelerate(mha)
    x = rng.standard_normal((2, 5, 6))
    full = mha.forward(x)
    kv, rows, at = KeyValues(), [], 0
    for n in chunks:
        rows.append(mha.forward(x[:, at : at + n], kv=kv))
        at += n
        assert len(kv) == at, f"KeyValues holds {len(kv)} positions after {at}"
    assert_close(
        f"decoded in chunks {chunks} ({path})", np.concatenate(rows, axis=1), full, rtol=1e-12, atol=1e-13
    )
    with pytest.raises(RuntimeError, match="backward called before forward"):
        mha.backward(np.ones((2, chunks[-1], 6)))
    with pytest.raises(
        ValueError, match=r"T = 1 tokens \(shape \(2, 1, 6\)\) after 5 cached, more than context_length = 5"
    ):
        mha.forward(x[:, :1], kv=kv)
