"""GPTModel properties: causal logits, independent batch rows, gradcheck on drawn
configurations (heads dividing emb_dim, 1..3 layers, T up to context_length), float32 against
float64.
"""

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from npgpt import CrossEntropyLoss, GPTModel, gradcheck
from tests.asserts import assert_equal, assert_gradcheck, assert_normwise
from tests.strategies import gpt_configs, seeds, token_ids

# float32 vs float64, relative to the largest element, through up to 3 blocks and the loss;
# measured worst 8.8e-7 for logits and 4.9e-6 for parameter gradients over 300 random
# configurations, so 1e-4
F32_RTOL = 1e-4


def ids_for(cfg, data, max_batch=2):
    B = data.draw(st.integers(1, max_batch), label="B")
    T = data.draw(st.integers(1, cfg["context_length"]), label="T")
    return data.draw(token_ids(cfg["vocab_size"], (B, T)), label="in_idx")


@given(cfg=gpt_configs(), seed=seeds, data=st.data())
def test_logits_up_to_t_ignore_tokens_after_t(cfg, seed, data):
    idx = ids_for(cfg, data)
    T = idx.shape[1]
    t = data.draw(st.integers(0, T - 1), label="t")
    other = idx.copy()
    other[:, t + 1 :] = data.draw(token_ids(cfg["vocab_size"], other[:, t + 1 :].shape), label="later ids")
    model = GPTModel(cfg, rng=seed).eval()
    assert_equal(f"logits[:, :{t + 1}]", model.forward(other)[:, : t + 1], model.forward(idx)[:, : t + 1])


@given(cfg=gpt_configs(), seed=seeds, data=st.data())
def test_batch_rows_are_independent(cfg, seed, data):
    idx = np.concatenate([ids_for(cfg, data, max_batch=1)] * 2)  # (2, T)
    other = idx.copy()
    other[1] = data.draw(token_ids(cfg["vocab_size"], idx[1].shape), label="new row 1")
    model = GPTModel(cfg, rng=seed).eval()
    assert_equal("logits of row 0 after changing row 1", model.forward(other)[0], model.forward(idx)[0])


@given(cfg=gpt_configs(), seed=seeds, train=st.booleans(), data=st.data())
def test_backward_agrees_with_gradcheck(cfg, seed, train, data):
    model = GPTModel(cfg, rng=seed).train(train)
    assert_gradcheck(gradcheck(model, ids_for(cfg, data), seed=seed, mode="fast", directions=2))


@given(cfg=gpt_configs(), seed=seeds, data=st.data())
def test_float32_agrees_with_float64_and_keeps_its_dtype(cfg, seed, data):
    # LayerNorm over 1 or 2 features is degenerate: its output is 0 or +-1 whatever the input,
    # and its float32 dx is rounding noise in any summation order (measured: relative error
    # above 1 at C = 2 over 2000 random rows); C >= 3 is where float32 tracks float64
    assume(cfg["emb_dim"] >= 3)
    m32 = GPTModel(cfg, rng=seed).eval().astype(np.float32)
    m64 = GPTModel(cfg).eval().load_state_dict(m32.state_dict())
    idx = ids_for(cfg, data)
    targets = data.draw(token_ids(cfg["vocab_size"], idx.shape), label="targets")
    ce32, ce64 = CrossEntropyLoss(), CrossEntropyLoss()
    logits32, logits64 = m32.forward(idx), m64.forward(idx)
    assert logits32.dtype == np.float32, f"logits: dtype {logits32.dtype} from a float32 model"
    assert_normwise("logits float32 vs float64", logits32, logits64, F32_RTOL)
    loss32, loss64 = ce32.forward(logits32, targets), ce64.forward(logits64, targets)
    assert abs(loss32 - loss64) <= F32_RTOL * max(1.0, abs(loss64)), f"loss {loss32!r} vs {loss64!r}"
    m32.backward(ce32.backward())
    m64.backward(ce64.backward())
    scale = max(np.abs(p.grad).max() for p in m64.parameters())
    for (name, p32), (_, p64) in zip(m32.named_parameters(), m64.named_parameters()):
        assert p32.grad.dtype == np.float32, f"{name}.grad: dtype {p32.grad.dtype}"
        assert_normwise(f"{name}.grad float32 vs float64", p32.grad, p64.grad, F32_RTOL, scale=scale)
