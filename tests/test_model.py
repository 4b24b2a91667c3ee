"""GPTModel: the book's composition, gradcheck of every parameter, tied head, errors."""

import numpy as np
import pytest
from hypothesis import given, settings

from npgpt import GPTModel, gradcheck
from tests.asserts import assert_close, assert_gradcheck
from tests.strategies import gpt_configs, seeds

CFG = {
    "vocab_size": 13,
    "context_length": 6,
    "emb_dim": 8,
    "n_heads": 2,
    "n_layers": 2,
    "drop_rate": 0.1,
    "qkv_bias": False,
}


def test_forward_is_the_books_composition():
    model = GPTModel(CFG, rng=0).eval()
    idx = np.array([[1, 5, 2], [0, 12, 12]])
    x = model.tok_emb.weight.data[idx] + model.pos_emb.weight.data[:3]
    for block in model.trf_blocks:
        x = block.forward(x)
    expected = model.final_norm.forward(x) @ model.out_head.weight.data.T
    assert_close("logits", model.forward(idx), expected, rtol=1e-13)
    assert model.forward(idx).shape == (2, 3, 13)


def test_gradcheck_every_parameter_with_dropout():
    model = GPTModel(CFG, rng=1)
    idx = np.random.default_rng(2).integers(0, 13, (2, 6))  # T == context_length
    assert_gradcheck(gradcheck(model, idx))


@settings(max_examples=8)
@given(cfg=gpt_configs(max_layers=3), seed=seeds)
def test_gradcheck_drawn_configurations_fast_mode(cfg, seed):
    rng = np.random.default_rng(seed)
    model = GPTModel(cfg, rng=rng)
    T = int(rng.integers(1, cfg["context_length"] + 1))
    idx = rng.integers(0, cfg["vocab_size"], (2, T))
    assert_gradcheck(gradcheck(model, idx, mode="fast", directions=4, seed=seed))


def test_tied_head_accumulates_both_gradients():
    tied = GPTModel(CFG, rng=3).eval()
    tied.out_head.weight = tied.tok_emb.weight  # share one Parameter, as GPT-2 does
    idx = np.array([[3, 1, 4, 1]])
    dlogits = np.random.default_rng(4).standard_normal((1, 4, 13))
    tied.forward(idx)
    tied.backward(dlogits)
    # the same gradient, computed as the sum of the two uses with untied copies
    untied = GPTModel(CFG, rng=3).eval()
    untied.out_head.weight.data = untied.tok_emb.weight.data.copy()
    untied.forward(idx)
    untied.backward(dlogits)
    assert_close(
        "shared weight.grad",
        tied.tok_emb.weight.grad,
        untied.tok_emb.weight.grad + untied.out_head.weight.grad,
        rtol=1e-12,
        atol=1e-14,
    )


def test_tied_gradient_is_head_plus_embedding_eq6():
    """docs/model.md eq. 6: the tied W gets dlogits^T xn (the head, by hand from its input) plus
    the embedding's scatter-add; finite differences of the tied model agree with the sum."""
    tied = GPTModel(CFG, rng=7).eval()
    tied.out_head.weight = tied.tok_emb.weight
    idx = np.array([[2, 5, 2], [0, 5, 12]])
    dlogits = np.random.default_rng(8).standard_normal((2, 3, 13))
    tied.forward(idx)
    xn = tied.out_head.cache.reshape(-1, 8)  # the head's input: final_norm's output
    tied.backward(dlogits)
    head = dlogits.reshape(-1, 13).T @ xn  # (V, E), by hand
    emb = tied.tok_emb.weight.grad - head
    unused = sorted(set(range(13)) - set(idx.ravel().tolist()))
    assert_close("embedding part of rows no id uses", emb[unused], np.zeros((len(unused), 8)), atol=1e-13)
    assert np.abs(emb[[0, 2, 5, 12]]).min() > 0, "the embedding part is missing from the tied gradient"
    assert_gradcheck(gradcheck(tied, idx, dout=dlogits, mode="fast", directions=4, seed=1))


def test_dtype_float32_end_to_end():
    model = GPTModel(CFG, rng=5).astype(np.float32)
    logits = model.forward(np.array([[1, 2, 3]]))
    assert logits.dtype == np.float32
    model.backward(np.ones_like(logits))
    assert all(p.grad.dtype == np.float32 for p in model.parameters())


def test_errors():
    model = GPTModel(CFG, rng=6)
    with pytest.raises(ValueError, match=r"T = 7 tokens \(shape \(1, 7\)\), more than context_length = 6"):
        model.forward(np.zeros((1, 7), int))
    with pytest.raises(IndexError, match=r"GPTModel.forward: in_idx holds id 13 outside \[0, 13\)"):
        model.forward(np.array([[1, 13]]))
    with pytest.raises(ValueError, match=r"in_idx must have 2 dimensions, got shape \(3,\)"):
        model.forward(np.array([1, 2, 3]))
    with pytest.raises(TypeError, match="in_idx must be an integer array"):
        model.forward(np.ones((1, 2)))
    with pytest.raises(RuntimeError, match="GPTModel.backward called before forward"):
        model.backward(np.ones((1, 2, 13)))
