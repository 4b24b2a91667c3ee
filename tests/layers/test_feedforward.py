"""FeedForward: the book's Linear(E, 4E) -> GELU -> Linear(4E, E), gradcheck."""

import numpy as np
import pytest

from npgpt import GELU, FeedForward, Linear, gradcheck
from tests.asserts import assert_close, assert_gradcheck


def test_structure_and_names():
    ff = FeedForward({"emb_dim": 6}, rng=0)
    assert isinstance(ff.layers[0], Linear) and isinstance(ff.layers[1], GELU)
    shapes = {n: p.data.shape for n, p in ff.named_parameters()}
    assert shapes == {
        "layers.0.weight": (24, 6),
        "layers.0.bias": (24,),
        "layers.2.weight": (6, 24),
        "layers.2.bias": (6,),
    }


def test_forward_is_the_composition():
    ff = FeedForward({"emb_dim": 4}, rng=1)
    x = np.random.default_rng(2).standard_normal((2, 3, 4))
    h = x @ ff.layers[0].weight.data.T + ff.layers[0].bias.data
    h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    assert_close("out", ff.forward(x), h @ ff.layers[2].weight.data.T + ff.layers[2].bias.data, rtol=1e-12)


@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (1, 1, 1, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradcheck(shape, dtype):
    ff = FeedForward({"emb_dim": 4}, rng=3).astype(dtype)
    x = np.random.default_rng(4).standard_normal(shape).astype(dtype)
    assert ff.forward(x).dtype == dtype
    assert_gradcheck(gradcheck(ff, x))
