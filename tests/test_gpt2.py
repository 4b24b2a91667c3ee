"""Pretrained GPT-2: a tiny random Hugging Face GPT-2 (written by tests/fixtures/export_torch.py
with transformers) loads into GPTModel and gives transformers' logits and greedy tokens; the
output head is tied to the token embedding. The weight conversion is also checked without the
`gpt2` extra, reading the safetensors file with a few lines of the format's spec."""

import io
import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from npgpt.cli import main
from npgpt.generate import generate
from npgpt.gpt2 import convert_state_dict, gpt2_config
from npgpt.model import GPTModel
from tests.asserts import assert_close, assert_equal

FOLDER = Path(__file__).parent / "fixtures" / "gpt2-tiny"
EXPECTED = np.load(Path(__file__).parent / "fixtures" / "gpt2-tiny-expected.npz")


def read_safetensors(path):
    """The safetensors layout: u64 header size, a JSON header, then raw little-endian tensors."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header.pop("__metadata__", None)
    dtypes = {"F32": "<f4", "F64": "<f8", "F16": "<f2"}
    return {
        k: np.frombuffer(
            raw[8 + n + h["data_offsets"][0] : 8 + n + h["data_offsets"][1]], dtype=dtypes[h["dtype"]]
        ).reshape(h["shape"])
        for k, h in header.items()
    }


def _model_without_extra():
    cfg = gpt2_config(json.loads((FOLDER / "config.json").read_text()))
    hf = read_safetensors(FOLDER / "model.safetensors")
    model = GPTModel(cfg, rng=0).astype(np.float32)
    model.out_head.weight = model.tok_emb.weight
    sd = convert_state_dict(hf, cfg)
    model.load_state_dict({**model.state_dict(), **sd, "out_head.weight": sd["tok_emb.weight"]})
    return model.eval(), hf, cfg


def _check_logits(model):
    logits = model.forward(EXPECTED["input_ids"])
    ref = EXPECTED["logits"]
    assert_close("logits vs transformers", logits, ref, rtol=1e-5, atol=1e-6 * float(np.abs(ref).max()))
    greedy = np.array([[int(t[0]) for t in generate(model, EXPECTED["input_ids"], 5, temperature=0.0)]])
    assert_equal("greedy ids vs transformers", greedy, EXPECTED["greedy_ids"])


def test_conversion_matches_transformers():
    model, hf, cfg = _model_without_extra()
    E = cfg["emb_dim"]
    c_attn = hf["transformer.h.1.attn.c_attn.weight"]  # Conv1D: (E, 3E), x @ W
    assert_equal(
        "W_key = c_attn[:, E:2E] transposed",
        model.trf_blocks[1].att.W_key.weight.data,
        c_attn[:, E : 2 * E].T,
    )
    assert_equal(
        "ff.layers.2 = mlp.c_proj transposed",
        model.trf_blocks[0].ff.layers[2].weight.data,
        hf["transformer.h.0.mlp.c_proj.weight"].T,
    )
    _check_logits(model)


def test_tied_head_accumulates_both_gradients():
    model, _, cfg = _model_without_extra()
    untied = GPTModel(cfg, rng=0).astype(np.float32).eval()
    untied.load_state_dict(model.state_dict())  # same values, two separate Parameters
    for m in (model, untied):
        m.zero_grad()
        m.forward(EXPECTED["input_ids"])
        m.backward(np.ones((1, 15, cfg["vocab_size"]), np.float32))
    w = model.tok_emb.weight
    assert model.out_head.weight is w
    assert sum(p is w for p in model.parameters()) == 1, "a tied Parameter is listed once"
    both = untied.tok_emb.weight.grad + untied.out_head.weight.grad
    assert_close(
        "tied grad = embedding grad + head grad",
        w.grad,
        both,
        rtol=1e-5,
        atol=1e-6 * float(np.abs(both).max()),
    )


def test_load_gpt2_and_tokenizer():
    pytest.importorskip("safetensors", reason="load_gpt2 needs the `gpt2` extra (safetensors)")
    pytest.importorskip("tokenizers", reason="load_gpt2 needs the `gpt2` extra (tokenizers)")
    import npgpt

    model, tok = npgpt.load_gpt2(FOLDER)  # the top-level name
    assert model.out_head.weight is model.tok_emb.weight and model.dtype == np.float32
    assert tok.encode(str(EXPECTED["prompt"])) == EXPECTED["input_ids"][0].tolist()
    assert tok.decode(EXPECTED["greedy_ids"][0]) == str(EXPECTED["greedy_text"])
    _check_logits(model)


def test_cli_generate_gpt2(monkeypatch):
    pytest.importorskip("safetensors", reason="--gpt2 needs the `gpt2` extra (safetensors)")
    pytest.importorskip("tokenizers", reason="--gpt2 needs the `gpt2` extra (tokenizers)")
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stdout", buf)
    code = main(
        [
            "generate",
            "--gpt2",
            str(FOLDER),
            "--prompt",
            str(EXPECTED["prompt"]),
            "--max-new-tokens",
            "5",
            "--temperature",
            "0",
        ]
    )
    monkeypatch.undo()
    assert code == 0
    assert buf.getvalue() == str(EXPECTED["prompt"]) + str(EXPECTED["greedy_text"]) + "\n", repr(
        buf.getvalue()
    )


def test_errors(tmp_path):
    from npgpt.gpt2 import load_gpt2

    with pytest.raises(FileNotFoundError, match=r"load_gpt2: .* has no config.json"):
        load_gpt2(tmp_path)
    with pytest.raises(ValueError, match="activation_function 'relu' is not GPT-2's tanh GELU"):
        gpt2_config({"activation_function": "relu", "vocab_size": 3, "n_embd": 2, "n_head": 1, "n_layer": 1})
    with pytest.raises(KeyError, match="model.safetensors has no tensor 'h.0.ln_1.weight'"):
        convert_state_dict(
            {"wte.weight": np.zeros((3, 2)), "wpe.weight": np.zeros((4, 2))}, {"emb_dim": 2, "n_layers": 1}
        )
