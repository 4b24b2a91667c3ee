"""Checkpoints: a round trip restores weights, optimizer state, tokenizer, step and RNG streams
exactly; the files hold no pickled objects; bad files give clear errors."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npgpt import CrossEntropyLoss, GPTModel
from npgpt.checkpoint import load_checkpoint, load_model, restore_rng, save_checkpoint
from npgpt.data import CharTokenizer
from npgpt.optim import AdamW, decay_groups
from tests.asserts import assert_equal
from tests.strategies import dtypes, gpt_configs, seeds


def _trained(cfg, dtype, seed, steps=2):
    """A model and AdamW after `steps` steps on random ids, so every state array is non-trivial."""
    rng = np.random.default_rng(seed)
    model = GPTModel(cfg, rng=seed).astype(dtype)
    opt = AdamW(decay_groups(model, 0.1), lr=1e-2)
    ce = CrossEntropyLoss()
    for _ in range(steps):
        x = rng.integers(0, cfg["vocab_size"], (2, cfg["context_length"]))
        ce.forward(model.forward(x), x)
        model.zero_grad()
        model.backward(ce.backward())
        opt.step()
    return model, opt


@settings(max_examples=10)
@given(cfg=gpt_configs(max_layers=2), dtype=dtypes(), seed=seeds, step=st.integers(0, 10**6))
def test_round_trip(tmp_path_factory, cfg, dtype, seed, step):
    d = tmp_path_factory.mktemp("ckpt")
    model, opt = _trained(cfg, dtype, seed)
    tok = CharTokenizer.from_text("abc\n xyz"[: max(cfg["vocab_size"], 1)])
    gen = np.random.default_rng(seed + 1)
    gen.random(3)
    save_checkpoint(d, "last", model, {"model": cfg}, tok, opt, step, {"batch": gen}, {"note": [1, 2]})
    meta, model_sd, optim_sd = load_checkpoint(d, "last")
    assert meta["step"] == step and meta["config"] == {"model": cfg} and meta["extra"] == {"note": [1, 2]}
    assert CharTokenizer.from_dict(meta["tokenizer"]).chars == tok.chars
    for k, v in model.state_dict().items():
        assert model_sd[k].dtype == v.dtype, f"{k}: dtype {model_sd[k].dtype}, saved {v.dtype}"
        assert_equal(k, model_sd[k], v)
    saved = opt.state_dict()
    assert optim_sd["param_groups"] == json.loads(json.dumps(saved["param_groups"]))
    for i, s in saved["state"].items():
        assert optim_sd["state"][i]["step"] == s["step"]
        for k in ("exp_avg", "exp_avg_sq"):
            assert_equal(f"optimizer state {i}.{k}", optim_sd["state"][i][k], s[k])
    fresh = np.random.default_rng(0)
    restore_rng(meta, {"batch": fresh})
    assert_equal("restored RNG stream", fresh.random(5), gen.random(5))


def test_files_hold_no_pickles(tmp_path):
    cfg = dict(vocab_size=5, context_length=3, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=True)
    model, opt = _trained(cfg, np.float32, 0)
    npz, js = save_checkpoint(tmp_path, "ckpt", model, {"model": cfg}, CharTokenizer("abcde"), opt, 3)
    with np.load(npz, allow_pickle=False) as z:  # would raise on an object array
        kinds = {k: z[k].dtype.kind for k in z.files}
    assert set(kinds.values()) <= {"f", "i", "u"}, f"non-numeric arrays in the checkpoint: {kinds}"
    json.loads(js.read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.json", "ckpt.npz"], "temporary files left"


def test_load_model_gives_the_same_logits(tmp_path):
    cfg = dict(
        vocab_size=6, context_length=5, emb_dim=6, n_heads=3, n_layers=2, drop_rate=0.1, qkv_bias=False
    )
    model, opt = _trained(cfg, np.float32, 7)
    save_checkpoint(tmp_path, "last", model, {"model": cfg}, CharTokenizer("abcdef"), opt, 2)
    loaded, tok, _ = load_model(tmp_path)
    assert loaded.dtype == np.float32 and not loaded.training and tok.chars == list("abcdef")
    x = np.array([[0, 5, 2, 3, 1]])
    model.eval()
    assert_equal("logits after load", loaded.forward(x), model.forward(x))


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"load_checkpoint: .*last.npz does not exist"):
        load_checkpoint(tmp_path, "last")
    (tmp_path / "x.npz").write_bytes(b"")
    (tmp_path / "x.json").write_text('{"format": "something-else"}')
    with pytest.raises(ValueError, match="has format 'something-else', expected 'npgpt-checkpoint-1'"):
        load_checkpoint(tmp_path, "x")
    with pytest.raises(KeyError, match=r"restore_rng: the checkpoint has no state for \['batch'\]"):
        restore_rng({"rng": {}}, {"batch": np.random.default_rng(0)})
