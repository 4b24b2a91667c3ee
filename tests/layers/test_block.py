"""TransformerBlock: the pre-LN composition with two shortcuts, gradcheck with dropout."""

import numpy as np
import pytest

from npgpt import TransformerBlock, gradcheck
from tests.asserts import assert_close, assert_gradcheck

CFG = {
    "vocab_size": 10,
    "context_length": 6,
    "emb_dim": 8,
    "n_heads": 2,
    "n_layers": 1,
    "drop_rate": 0.0,
    "qkv_bias": False,
}


def test_forward_is_the_pre_ln_composition():
    block = TransformerBlock(CFG, rng=0)
    x = np.random.default_rng(1).standard_normal((2, 5, 8))
    x1 = x + block.att.forward(block.norm1.forward(x))
    expected = x1 + block.ff.forward(block.norm2.forward(x1))
    assert_close("out", block.forward(x), expected, rtol=1e-13)


@pytest.mark.parametrize("drop_rate", [0.0, 0.2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradcheck(drop_rate, dtype):
    block = TransformerBlock(dict(CFG, drop_rate=drop_rate, qkv_bias=True), rng=2).astype(dtype)
    x = np.random.default_rng(3).standard_normal((2, 4, 8)).astype(dtype)
    out = block.forward(x)
    assert out.dtype == block.backward(np.ones_like(out)).dtype == dtype
    assert_gradcheck(gradcheck(block, x))


def test_eval_mode_is_deterministic_with_dropout():
    block = TransformerBlock(dict(CFG, drop_rate=0.5), rng=4).eval()
    x = np.random.default_rng(5).standard_normal((1, 3, 8))
    assert np.array_equal(block.forward(x), block.forward(x))


def test_shortcut_carries_dout_straight_through():
    # with the branches' output projections zeroed, the block is the identity, and so is its
    # input gradient: dout flows through both shortcuts unchanged
    block = TransformerBlock(CFG, rng=6)
    for lin in (block.att.out_proj, block.ff.layers[2]):
        lin.weight.data[:] = 0
        lin.bias.data[:] = 0
    x = np.random.default_rng(7).standard_normal((2, 3, 8))
    dout = np.random.default_rng(8).standard_normal((2, 3, 8))
    assert_close("out", block.forward(x), x)
    assert_close("dx", block.backward(dout), dout)
