"""MultiHeadAttention properties: causality of the output and of the gradient, attention weights
that are causal probability rows, batch independence, gradcheck on drawn configurations,
float32 against float64.
"""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from npgpt import MultiHeadAttention, gradcheck
from tests.asserts import assert_below, assert_equal, assert_gradcheck, assert_normwise, assert_true
from tests.strategies import arrays, attention_setups, dtypes, seeds, unit_roundoff

# float32 vs float64, relative to the output's largest element: ~4 matmuls of <= 12 terms and a
# softmax; measured worst 6.4e-7 (about 11 u) over 300 random configurations, so 2e-5
F32_RTOL = 2e-5


def build(setup, dtype, seed):
    keys = ("d_in", "d_out", "context_length", "dropout", "num_heads", "qkv_bias")
    return MultiHeadAttention(**{k: setup[k] for k in keys}, rng=seed).astype(dtype)


def attention_weights(mha):
    """The softmax weights (B, nh, T, T) of the last forward, before dropout."""
    return mha.cache.weights()


@given(setup=attention_setups(), dtype=dtypes(), seed=seeds, data=st.data())
def test_outputs_up_to_t_ignore_tokens_after_t(setup, dtype, seed, data):
    B, T, d_in = setup["B"], setup["T"], setup["d_in"]
    t = data.draw(st.integers(0, T - 1), label="t")
    x = data.draw(arrays(dtype, (B, T, d_in), bound=3.0), label="x")
    y = x.copy()
    y[:, t + 1 :] = data.draw(arrays(dtype, (B, T - t - 1, d_in), bound=3.0), label="later tokens")
    mha = build(setup, dtype, seed).eval()  # dropout off: two forwards must see the same weights
    assert_equal(
        f"out[:, :{t + 1}] after changing x[:, {t + 1}:]",
        mha.forward(y)[:, : t + 1],
        mha.forward(x)[:, : t + 1],
    )


@given(setup=attention_setups(), dtype=dtypes(), seed=seeds, data=st.data())
def test_gradient_of_outputs_up_to_t_is_zero_for_later_tokens(setup, dtype, seed, data):
    B, T = setup["B"], setup["T"]
    t = data.draw(st.integers(0, T - 1), label="t")
    mha = build(setup, dtype, seed)  # training mode: dropout (if any) is on
    mha.forward(data.draw(arrays(dtype, (B, T, setup["d_in"]), bound=3.0), label="x"))
    dout = data.draw(arrays(dtype, (B, T, setup["d_out"]), bound=3.0), label="dout")
    dout[:, t + 1 :] = 0.0  # only outputs 0..t reach the loss
    dx = mha.backward(dout)
    assert_equal(f"dx[:, {t + 1}:]", dx[:, t + 1 :], np.zeros_like(dx[:, t + 1 :]))


@given(setup=attention_setups(), dtype=dtypes(), seed=seeds, data=st.data())
def test_attention_weights_are_causal_probability_rows(setup, dtype, seed, data):
    B, T = setup["B"], setup["T"]
    mha = build(setup, dtype, seed)
    mha.forward(data.draw(arrays(dtype, (B, T, setup["d_in"]), bound=5.0), label="x"))
    att = attention_weights(mha)
    assert att.shape == (B, setup["num_heads"], T, T), f"attention weights have shape {att.shape}"
    assert_true("attention weights", att >= 0, att, "att >= 0")
    future = np.triu(np.ones((T, T), bool), k=1)
    assert_equal("attention weights above the diagonal", att[..., future], np.zeros_like(att[..., future]))
    assert_below(
        "row sums of attention weights - 1",
        att.astype(np.float64).sum(-1) - 1.0,
        2 * T * unit_roundoff(dtype),
    )


@given(setup=attention_setups(max_batch=1), dtype=dtypes(), seed=seeds, data=st.data())
def test_batch_items_are_independent(setup, dtype, seed, data):
    T, d_in = setup["T"], setup["d_in"]
    x = data.draw(arrays(dtype, (3, T, d_in), bound=3.0), label="x")
    y = x.copy()
    y[1] = data.draw(arrays(dtype, (T, d_in), bound=3.0), label="new item 1")
    mha = build(setup, dtype, seed).eval()
    assert_equal("items 0 and 2 after changing item 1", mha.forward(y)[[0, 2]], mha.forward(x)[[0, 2]])


@given(setup=attention_setups(), seed=seeds, train=st.booleans(), data=st.data())
def test_backward_agrees_with_gradcheck(setup, seed, train, data):
    mha = build(setup, np.float64, seed).train(train)
    x = data.draw(arrays(np.float64, (setup["B"], setup["T"], setup["d_in"]), bound=3.0), label="x")
    assert_gradcheck(gradcheck(mha, x, seed=seed, max_coords=24))


@given(setup=attention_setups(), seed=seeds, data=st.data())
def test_float32_agrees_with_float64_and_keeps_its_dtype(setup, seed, data):
    m32 = build(setup, np.float32, seed).eval()
    m64 = build(setup, np.float64, seed).eval().load_state_dict(m32.state_dict())
    x = data.draw(arrays(np.float32, (setup["B"], setup["T"], setup["d_in"]), bound=3.0), label="x")
    dout = data.draw(arrays(np.float32, x.shape[:-1] + (setup["d_out"],), bound=3.0), label="dout")
    out32, out64 = m32.forward(x), m64.forward(x.astype(np.float64))
    dx32, dx64 = m32.backward(dout), m64.backward(dout.astype(np.float64))
    assert_normwise("out float32 vs float64", out32, out64, F32_RTOL)
    assert_normwise("dx float32 vs float64", dx32, dx64, F32_RTOL)
    assert out32.dtype == np.float32 and dx32.dtype == np.float32, f"dtypes {out32.dtype}, {dx32.dtype}"
    grad_scale = max(np.abs(p.grad).max() for p in m64.parameters())  # the largest gradient entry
    for (name, p32), (_, p64) in zip(m32.named_parameters(), m64.named_parameters()):
        assert p32.grad.dtype == np.float32, f"{name}.grad: dtype {p32.grad.dtype}"
        assert_normwise(f"{name}.grad float32 vs float64", p32.grad, p64.grad, F32_RTOL, scale=grad_scale)


@given(setup=attention_setups().filter(lambda s: s["qkv_bias"]), dtype=dtypes(), seed=seeds, data=st.data())
def test_key_bias_gets_zero_gradient(setup, dtype, seed, data):
    """q . (k + b) = q . k + q . b adds the same number to a whole row of scores, which the
    softmax ignores: dL/d(W_key.bias) is 0 in exact arithmetic, rounding-level here."""
    mha = build(setup, dtype, seed)
    mha.forward(data.draw(arrays(dtype, (setup["B"], setup["T"], setup["d_in"]), bound=3.0), label="x"))
    mha.backward(data.draw(arrays(dtype, (setup["B"], setup["T"], setup["d_out"]), bound=3.0), label="dout"))
    scale = max(np.abs(p.grad).max() for p in mha.parameters())
    n = setup["B"] * setup["T"] * (setup["T"] + setup["d_out"])  # terms summed into each entry
    assert_below("W_key.bias.grad", mha.W_key.bias.grad, 4 * n * unit_roundoff(dtype) * scale + 1e-300)
