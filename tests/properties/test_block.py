"""FeedForward and TransformerBlock properties: position-wise feed-forward, causal block,
gradcheck on drawn configurations (dropout on and off), float32 against float64.
"""

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from npgpt import FeedForward, TransformerBlock, gradcheck
from tests.asserts import assert_equal, assert_gradcheck, assert_normwise
from tests.strategies import arrays, gpt_configs, seeds, spread_rows

# float32 vs float64 relative to the largest element: two LayerNorms, attention, a 4E-wide
# feed-forward; measured worst 6.5e-7 (about 11 u) over 300 random configurations, so 2e-5
F32_RTOL = 2e-5


def input_for(cfg, data, dtype, max_batch=2):
    B = data.draw(st.integers(1, max_batch), label="B")
    T = data.draw(st.integers(1, cfg["context_length"]), label="T")
    # rows of spread >= 0.1: on a (nearly) constant row LayerNorm's rstd is 1/sqrt(eps) ~ 316 and
    # its third derivative ~ rstd^3, so central differences with step 1e-6 are off by ~5e-3
    # there (measured; 1e-8 steps agree to 5e-7): a limit of the checker, not of the backward
    return data.draw(spread_rows(dtype, (B, T, cfg["emb_dim"]), bound=3.0, min_spread=0.1), label="x")


@given(cfg=gpt_configs(max_layers=1), seed=seeds, data=st.data())
def test_feedforward_acts_on_each_position_alone(cfg, seed, data):
    x = input_for(cfg, data, np.float64)
    B, T, _ = x.shape
    b, t = data.draw(st.integers(0, B - 1), label="b"), data.draw(st.integers(0, T - 1), label="t")
    y = x.copy()
    y[b, t] = data.draw(arrays(np.float64, (cfg["emb_dim"],), bound=3.0), label="new x[b, t]")
    ff = FeedForward(cfg, rng=seed)
    keep = np.ones((B, T), bool)
    keep[b, t] = False
    assert_equal(f"FeedForward out except at {(b, t)}", ff.forward(y)[keep], ff.forward(x)[keep])


@given(cfg=gpt_configs(max_layers=1), seed=seeds, data=st.data())
def test_block_outputs_up_to_t_ignore_tokens_after_t(cfg, seed, data):
    x = input_for(cfg, data, np.float64)
    T = x.shape[1]
    t = data.draw(st.integers(0, T - 1), label="t")
    y = x.copy()
    y[:, t + 1 :] = data.draw(arrays(np.float64, y[:, t + 1 :].shape, bound=3.0), label="later tokens")
    block = TransformerBlock(cfg, rng=seed).eval()
    assert_equal(f"block out[:, :{t + 1}]", block.forward(y)[:, : t + 1], block.forward(x)[:, : t + 1])


@given(cfg=gpt_configs(max_layers=1), seed=seeds, train=st.booleans(), data=st.data())
def test_feedforward_and_block_backward_agree_with_gradcheck(cfg, seed, train, data):
    x = input_for(cfg, data, np.float64)
    assert_gradcheck(gradcheck(FeedForward(cfg, rng=seed), x, seed=seed, max_coords=16))
    block = TransformerBlock(cfg, rng=seed).train(train)  # train: dropout masks replayed by gradcheck
    assert_gradcheck(gradcheck(block, x, seed=seed, mode="fast", directions=3))


@given(cfg=gpt_configs(max_layers=1), seed=seeds, data=st.data())
def test_block_float32_agrees_with_float64_and_keeps_its_dtype(cfg, seed, data):
    # LayerNorm over 1 or 2 features is degenerate: its output is 0 or +-1 whatever the input,
    # and its float32 dx is rounding noise in any summation order (measured: relative error
    # above 1 at C = 2 over 2000 random rows); C >= 3 is where float32 tracks float64
    assume(cfg["emb_dim"] >= 3)
    b32 = TransformerBlock(cfg, rng=seed).eval().astype(np.float32)
    b64 = TransformerBlock(cfg).eval().load_state_dict(b32.state_dict())
    x = input_for(cfg, data, np.float32)
    dout = data.draw(arrays(np.float32, x.shape, bound=3.0), label="dout")
    out32, out64 = b32.forward(x), b64.forward(x.astype(np.float64))
    dx32, dx64 = b32.backward(dout), b64.backward(dout.astype(np.float64))
    assert out32.dtype == np.float32 and dx32.dtype == np.float32, f"dtypes {out32.dtype}, {dx32.dtype}"
    assert_normwise("block out float32 vs float64", out32, out64, F32_RTOL)
    assert_normwise("block dx float32 vs float64", dx32, dx64, F32_RTOL)
    scale = max(np.abs(p.grad).max() for p in b64.parameters())
    for (name, p32), (_, p64) in zip(b32.named_parameters(), b64.named_parameters()):
        assert p32.grad.dtype == np.float32, f"{name}.grad: dtype {p32.grad.dtype}"
        assert_normwise(f"{name}.grad float32 vs float64", p32.grad, p64.grad, F32_RTOL, scale=scale)
