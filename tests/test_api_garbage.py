"""Misuse of the public Python API: each row is one bad call and the error it must raise, naming
the class (or function), the argument and what is wrong. Each row failed before its fix with an
error from inside NumPy or Python that named none of them ("negative dimensions are not
allowed", "'NoneType' object has no attribute 'parameters'", KeyError: 'emb_dim',
ZeroDivisionError), or was accepted in silence (gradcheck with atol=-1 or eps=nan,
a GPTModel with n_layers=-1 and no blocks)."""

import re

import numpy as np
import pytest

import npgpt
import npgpt.fast
from npgpt import (
    GPT_CONFIG_124M,
    Embedding,
    GPTModel,
    LayerNorm,
    Linear,
    MultiHeadAttention,
    gradcheck,
)

TINY = dict(GPT_CONFIG_124M, vocab_size=11, context_length=4, emb_dim=4, n_heads=2, n_layers=1)
X = np.linspace(-1.0, 1.0, 12).reshape(2, 6)  # (B, C) for LayerNorm(6)

ROWS = [
    # constructors: a dimension that is negative, fractional, a string or a bool
    (lambda: LayerNorm(-1), ValueError, r"^LayerNorm: emb_dim must be an integer >= 0, got -1$"),
    (lambda: LayerNorm(2.5), TypeError, r"^LayerNorm: emb_dim must be an integer >= 0, got 2.5$"),
    (lambda: LayerNorm("6"), TypeError, r"^LayerNorm: emb_dim must be an integer >= 0, got '6'$"),
    (lambda: LayerNorm(True), TypeError, r"^LayerNorm: emb_dim must be an integer >= 0, got True$"),
    (lambda: Linear(3, -1), ValueError, r"^Linear: out_features must be an integer >= 0, got -1$"),
    (lambda: Linear(3.0, 2), TypeError, r"^Linear: in_features must be an integer >= 0, got 3.0$"),
    (lambda: Embedding(-5, 3), ValueError, r"^Embedding: num_embeddings must be an integer >= 0"),
    (
        lambda: MultiHeadAttention(6, 6, 0, 0.0, 2),
        ValueError,
        r"^MultiHeadAttention: context_length must be an integer >= 1, got 0$",
    ),
    (
        lambda: MultiHeadAttention(6, 6, 4, 0.0, 0),
        ValueError,
        r"^MultiHeadAttention: num_heads must be an integer >= 1, got 0$",
    ),
    (
        lambda: GPTModel({"vocab_size": 3}),
        ValueError,
        r"^GPTModel: cfg is missing key\(s\) context_length, emb_dim, n_heads, n_layers, drop_rate$",
    ),
    (
        lambda: GPTModel(dict(TINY, n_layers=-1)),
        ValueError,
        r"^GPTModel: cfg\['n_layers'\] must be an integer >= 0, got -1$",
    ),
    (lambda: GPTModel(dict(TINY, vocab_size=-1)), ValueError, r"^Embedding: num_embeddings must be"),
    # load_state_dict: not a dict, and values that are not numbers
    (
        lambda: LayerNorm(6).load_state_dict([1, 2]),
        TypeError,
        r"^LayerNorm.load_state_dict: state_dict must be a dict of name -> array, got list$",
    ),
    (
        lambda: LayerNorm(6).load_state_dict(None),
        TypeError,
        r"^LayerNorm.load_state_dict: state_dict must be a dict of name -> array, got NoneType$",
    ),
    (
        lambda: LayerNorm(6).load_state_dict({"scale": np.array(["a"] * 6), "shift": np.zeros(6)}),
        RuntimeError,
        r"^LayerNorm.load_state_dict: keys that are not numbers: scale has dtype <U1",
    ),
    # npgpt.fast on something that is not a module
    (
        lambda: npgpt.fast.accelerate(None),
        TypeError,
        r"^npgpt.fast.accelerate: module must be an npgpt.Module, got NoneType$",
    ),
    (
        lambda: npgpt.fast.accelerate(np.ones(3)),
        TypeError,
        r"^npgpt.fast.accelerate: module must be an npgpt.Module, got ndarray$",
    ),
    (
        lambda: npgpt.fast.reference("LayerNorm"),
        TypeError,
        r"^npgpt.fast.reference: module must be an npgpt.Module, got str$",
    ),
    # gradcheck: its step and tolerances, and inputs that are not arrays
    (
        lambda: gradcheck(LayerNorm(6), X, eps=0),
        ValueError,
        r"^gradcheck: eps must be a finite number > 0, got 0$",
    ),
    (
        lambda: gradcheck(LayerNorm(6), X, eps=float("nan")),
        ValueError,
        r"^gradcheck: eps must be a finite number > 0, got nan$",
    ),
    (
        lambda: gradcheck(LayerNorm(6), X, atol=-1.0),
        ValueError,
        r"^gradcheck: atol must be a finite number >= 0, got -1.0$",
    ),
    (
        lambda: gradcheck(LayerNorm(6), X, rtol=float("inf")),
        ValueError,
        r"^gradcheck: rtol must be a finite number >= 0, got inf$",
    ),
    (
        lambda: gradcheck(LayerNorm(6), "x"),
        TypeError,
        r"^gradcheck: input 0 must be a float array \(or integer ids\), got str",
    ),
]


@pytest.mark.parametrize(("call", "kind", "pattern"), ROWS, ids=[f"row{i}" for i in range(len(ROWS))])
def test_misuse_raises_an_error_naming_the_class_and_argument(call, kind, pattern):
    with pytest.raises(kind) as info:
        call()
    assert re.search(pattern, str(info.value)), f"{type(info.value).__name__}: {info.value!s} !~ {pattern!r}"


def test_zero_sizes_stay_allowed_as_in_pytorch():
    """The size checks refuse negatives and non-integers only: PyTorch builds Linear(0, 3),
    LayerNorm(0) and Embedding(0, 3), and so does npgpt (NumPy integers are sizes too)."""
    assert Linear(0, 3).weight.data.shape == (3, 0), "Linear(0, 3).weight"
    assert LayerNorm(0).scale.data.shape == (0,), "LayerNorm(0).scale"
    assert Embedding(np.int64(5), 3).weight.data.shape == (5, 3), "Embedding(np.int64(5), 3).weight"
