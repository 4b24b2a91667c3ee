"""npgpt/fast/_workspace.py: reused buffers and blockwise passes.

The fast components' other tests run at small sizes, where `blockwise` makes one call on whole arrays.
Here the sizes are large enough for several blocks on several threads, and every result is
compared with the same module run with blocking off (one call, the path gradcheck and the
PyTorch fixtures verify), and with plain NumPy formulas where one is short.
"""

import math

import numpy as np
import pytest

from npgpt.fast import GELU, LayerNorm, MultiHeadAttention, _blas_threads, _workspace
from tests.asserts import assert_close


class Owner:
    pass


def test_blockwise_covers_every_row_once_in_order_across_threads(monkeypatch):
    monkeypatch.setattr(_workspace, "BLOCK", 64)
    monkeypatch.setattr(_blas_threads, "_threads", 2)
    x = np.arange(40 * 16, dtype=np.float64).reshape(40, 16)  # 4 rows per block: 10 blocks
    out = np.zeros_like(x)

    def double(x, out):
        np.multiply(x, 2.0, out=out)
        return x[0, 0]

    firsts = _workspace.blockwise(double, x, out)
    assert_close("blockwise(2 x)", out, 2.0 * x, rtol=0, atol=0)
    assert firsts == [16.0 * 4 * b for b in range(10)], f"block results out of order: {firsts}"
    with pytest.raises(ValueError, match="C-contiguous"):
        _workspace.blockwise(double, x.T, out.T)


def test_buffer_is_reused_per_name_and_reallocated_on_a_new_shape():
    m = Owner()
    a = _workspace.buffer(m, "a", (3, 4), np.float32)
    assert _workspace.buffer(m, "a", (3, 4), np.float32) is a, "same name and shape: same array"
    b = _workspace.buffer(m, "a", (5, 4), np.float32)
    assert b.shape == (5, 4) and b is not a and _workspace.buffer(m, "a", (5, 4), np.float32) is b


def test_scratch_is_per_thread():
    import threading

    here = _workspace.scratch("t", (2, 2), np.float64)
    assert _workspace.scratch("t", (2, 2), np.float64) is here, "same thread, same key: reused"
    seen = []
    worker = threading.Thread(target=lambda: seen.append(_workspace.scratch("t", (2, 2), np.float64)))
    worker.start()
    worker.join()
    assert seen and seen[0] is not here, "another thread must get its own temporary"


def _fwd_bwd(module, x, dout):
    out = module.forward(x)
    return out.copy(), module.backward(dout).copy()


@pytest.fixture
def unblocked(monkeypatch):
    """Run a callable with blocking off (one call on whole arrays)."""

    def run(fn):
        with monkeypatch.context() as m:
            m.setattr(_workspace, "BLOCK", 1 << 40)
            return fn()

    return run


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_and_layernorm_blocked_equal_unblocked(dtype, unblocked, monkeypatch):
    monkeypatch.setattr(_workspace, "BLOCK", 1 << 12)  # many blocks at this size
    rng = np.random.default_rng(1)
    x = (3 * rng.standard_normal((4, 37, 96))).astype(dtype)  # (B, T, C)
    dout = rng.standard_normal(x.shape).astype(dtype)
    g = GELU()
    out, dx = _fwd_bwd(g, x, dout)
    ref_out, ref_dx = unblocked(lambda: _fwd_bwd(GELU(), x, dout))
    assert_close("GELU out, blocked", out, ref_out, rtol=0, atol=0)
    assert_close("GELU dx, blocked", dx, ref_dx, rtol=0, atol=0)
    ln, ref_ln = LayerNorm(96).astype(dtype), LayerNorm(96).astype(dtype)
    out, dx = _fwd_bwd(ln, x, dout)
    ref_out, ref_dx = unblocked(lambda: _fwd_bwd(ref_ln, x, dout))
    assert_close("LayerNorm out, blocked", out, ref_out, rtol=0, atol=0)
    assert_close("LayerNorm dx, blocked", dx, ref_dx, rtol=0, atol=0)
    tol = 1e-5 if dtype == np.float32 else 1e-12  # the blocks' partial sums add in another order
    assert_close("LayerNorm scale.grad, blocked", ln.scale.grad, ref_ln.scale.grad, rtol=tol, atol=tol)
    assert_close("LayerNorm shift.grad, blocked", ln.shift.grad, ref_ln.shift.grad, rtol=tol, atol=tol)


def test_attention_blocked_softmax_skips_only_masked_columns(unblocked, monkeypatch):
    # T = 64 and 16 rows per block: blocks end before the last key, so the skipped-column path runs
    monkeypatch.setattr(_workspace, "BLOCK", 16 * 64)
    B, T, E, nh = 2, 64, 8, 2
    rng = np.random.default_rng(2)
    x = rng.standard_normal((B, T, E))  # (B, T, E)
    dout = rng.standard_normal((B, T, E))
    att = MultiHeadAttention(E, E, T, 0.0, nh, qkv_bias=True, rng=3)
    ref = MultiHeadAttention(E, E, T, 0.0, nh, qkv_bias=True, rng=3)
    out, dx = _fwd_bwd(att, x, dout)
    ref_out, ref_dx = unblocked(lambda: _fwd_bwd(ref, x, dout))
    # plain NumPy forward, written from the book's formulas
    hs = E // nh
    q, k, v = (x @ lin.weight.data.T + lin.bias.data for lin in (ref.W_query, ref.W_key, ref.W_value))
    q, k, v = (t.reshape(B, T, nh, hs).transpose(0, 2, 1, 3) for t in (q, k, v))  # (B, nh, T, hs)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs) + np.triu(np.full((T, T), -np.inf), 1)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    plain = (w @ v).transpose(0, 2, 1, 3).reshape(
        B, T, E
    ) @ ref.out_proj.weight.data.T + ref.out_proj.bias.data
    assert_close("attention out vs plain NumPy", out, plain, rtol=1e-12, atol=1e-12)
    assert_close("attention out, blocked", out, ref_out, rtol=1e-13, atol=1e-13)
    assert_close("attention dx, blocked", dx, ref_dx, rtol=1e-12, atol=1e-12)
    for (name, p), (_, p_ref) in zip(att.named_parameters(), ref.named_parameters(), strict=True):
        assert_close(f"attention {name}.grad, blocked", p.grad, p_ref.grad, rtol=1e-12, atol=1e-12)
