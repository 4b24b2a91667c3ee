"""Embedding: lookup, scatter-add with repeated ids, range errors."""

import numpy as np
import pytest

from npgpt import Embedding, gradcheck
from tests.asserts import assert_close, assert_gradcheck


def test_lookup_and_repeated_ids_accumulate():
    emb = Embedding(4, 2, rng=0)
    idx = np.array([[1, 3, 1]])
    assert_close("out", emb.forward(idx), emb.weight.data[[[1, 3, 1]]])
    dout = np.array([[[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]]])
    assert emb.backward(dout) is None
    # id 1 appears at positions 0 and 2: its row gets both gradients
    assert_close("weight.grad", emb.weight.grad, [[0, 0], [101.0, 202.0], [0, 0], [10.0, 20.0]])


def test_init_is_standard_normal():
    w = Embedding(500, 100, rng=0).weight.data
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1.0) < 0.02


def test_gradcheck_weight():
    emb = Embedding(7, 3, rng=1)
    assert_gradcheck(gradcheck(emb, np.array([[0, 6, 6, 2], [3, 3, 3, 1]])))


def test_errors():
    emb = Embedding(5, 2, rng=0)
    with pytest.raises(
        IndexError, match=r"Embedding.forward: idx holds id 5 outside \[0, 5\) \(shape \(2,\)\)"
    ):
        emb.forward(np.array([0, 5]))
    with pytest.raises(IndexError, match="id -1 outside"):
        emb.forward(np.array([-1]))
    with pytest.raises(TypeError, match="Embedding.forward: idx must be an integer array.*float64"):
        emb.forward(np.array([0.0, 1.0]))
    with pytest.raises(RuntimeError, match="Embedding.backward called before forward"):
        emb.backward(np.ones((2, 2)))
