"""Checkpoints: a round trip restores weights, optimizer state, tokenizer, step and RNG streams
exactly; the files hold no pickled objects; bad files give clear errors; damage of every kind
(truncation, flipped bytes, wrong shapes, missing keys, another model's file) is a
CheckpointError naming the file, never a crash and never a silently different model."""

import hashlib
import json
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npgpt import CrossEntropyLoss, GPTModel
from npgpt.checkpoint import (
    checksum,
    load_checkpoint,
    load_model,
    resolve,
    restore_rng,
    save_checkpoint,
)
from npgpt.data import CharTokenizer
from npgpt.errors import CheckpointError
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
    save_checkpoint(tmp_path, "ckpt", model, {"model": cfg}, CharTokenizer("abcdef"), opt, 2)
    loaded, tok, _ = load_model(tmp_path)
    assert loaded.dtype == np.float32 and not loaded.training and tok.chars == list("abcdef")
    x = np.array([[0, 5, 2, 3, 1]])
    model.eval()
    assert_equal("logits after load", loaded.forward(x), model.forward(x))


def test_errors(tmp_path):
    with pytest.raises(CheckpointError, match=r"last.npz does not exist"):
        load_checkpoint(tmp_path, "last")
    with pytest.raises(CheckpointError, match=r"nowhere: no such directory"):
        load_checkpoint(tmp_path / "nowhere", "last")
    (tmp_path / "x.npz").write_bytes(b"")
    (tmp_path / "x.json").write_text('{"format": "something-else"}')
    with pytest.raises(
        CheckpointError, match="x.json has format 'something-else', expected 'npgpt-checkpoint-2'"
    ):
        load_checkpoint(tmp_path, "x")
    (tmp_path / "x.json").write_text('{"format": "npgpt-checkpoint-1"}')
    with pytest.raises(
        CheckpointError, match="x.json has the old format 'npgpt-checkpoint-1', which carries no checksum"
    ):
        load_checkpoint(tmp_path, "x")
    with pytest.raises(KeyError, match=r"restore_rng: the checkpoint has no state for \['batch'\]"):
        restore_rng({"rng": {}}, {"batch": np.random.default_rng(0)})


def test_checksum_is_the_sha256_of_names_shapes_bytes_and_sorted_json():
    # the hash written out by hand, from hashlib alone
    a = np.arange(3, dtype="<f4")
    meta = {"step": 2, "format": "f", "sha256": "ignored"}
    h = hashlib.sha256()
    h.update(b'["model.w", "<f4", [3]]')
    h.update(a.tobytes())
    h.update(b'{"format":"f","step":2}')
    assert checksum({"model.w": a}, meta) == h.hexdigest(), "checksum differs from the documented recipe"


def test_the_checksum_is_saved_and_checked(tmp_path):
    cfg = dict(
        vocab_size=4, context_length=3, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False
    )
    model, opt = _trained(cfg, np.float64, 0)
    npz, js = save_checkpoint(tmp_path, "ckpt", model, {"model": cfg}, CharTokenizer("abcd"), opt, 2)
    meta = json.loads(js.read_text())
    with np.load(npz, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    assert len(meta["sha256"]) == 64 and meta["sha256"] == checksum(arrays, meta)
    meta["step"] = 3  # a valid JSON edit: the checksum catches it
    js.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"ckpt.npz and .*ckpt.json do not match their checksum"):
        load_checkpoint(tmp_path, "ckpt")


def test_resolve_uses_last_only_when_asked(tmp_path):
    cfg = dict(
        vocab_size=4, context_length=3, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False
    )
    model, opt = _trained(cfg, np.float64, 0)
    save_checkpoint(tmp_path, "last", model, {"model": cfg}, CharTokenizer("abcd"), opt, 2)
    with pytest.raises(CheckpointError, match=r"has no checkpoint `ckpt`.*it has `last`.*--last"):
        resolve(tmp_path)
    with pytest.raises(CheckpointError, match=r"ckpt.npz does not exist"):
        load_model(tmp_path)
    assert resolve(tmp_path, last=True) == (tmp_path, "last")
    for form in ("last", "last.npz", "last.json"):
        assert resolve(tmp_path / form) == (tmp_path, "last"), f"--checkpoint DIR/{form}"
    with pytest.raises(CheckpointError, match=r"nope: no such checkpoint or directory"):
        resolve(tmp_path / "nope")


# ---- random damage ------------------------------------------------------------------------

CFG_A = dict(vocab_size=5, context_length=4, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=True)
CFG_B = dict(vocab_size=6, context_length=3, emb_dim=6, n_heads=3, n_layers=2, drop_rate=0.0, qkv_bias=False)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Two checkpoints of two different models: `a/ckpt` (the one damaged) and `b/ckpt`."""
    root = tmp_path_factory.mktemp("damage")
    for sub, cfg, chars in (("a", CFG_A, "abcde"), ("b", CFG_B, "uvwxyz")):
        model, opt = _trained(cfg, np.float32, 1)
        save_checkpoint(root / sub, "ckpt", model, {"model": cfg}, CharTokenizer(chars), opt, 2)
    return root


def _reseal(d, arrays, meta):
    """Write arrays and meta back with a fresh checksum: a file written wrongly, not damaged."""
    meta["sha256"] = checksum(arrays, meta)
    with open(d / "ckpt.npz", "wb") as f:
        np.savez(f, **arrays)
    (d / "ckpt.json").write_text(json.dumps(meta))


def _damage(d, other, kind, data):
    npz, js = d / "ckpt.npz", d / "ckpt.json"
    if kind in ("truncate", "flip"):
        path = data.draw(st.sampled_from([npz, js]), label="file")
        raw = bytearray(path.read_bytes())
        if kind == "truncate":
            raw = raw[: data.draw(st.integers(0, len(raw) - 1), label="keep bytes")]
        else:
            at = data.draw(st.integers(0, len(raw) - 1), label="offset")
            raw[at] ^= data.draw(st.integers(1, 255), label="xor")
        path.write_bytes(bytes(raw))
        return
    if kind == "other npz" or kind == "other json":
        shutil.copy(other / ("ckpt.npz" if kind == "other npz" else "ckpt.json"), d)
        return
    meta = json.loads(js.read_text())
    with np.load(npz) as z:
        arrays = {k: z[k] for k in z.files}
    key = data.draw(st.sampled_from(sorted(k for k in arrays if k.startswith("model."))), label="key")
    if kind == "wrong shape":
        shape = arrays[key].shape
        arrays[key] = np.zeros(
            shape + (1,) if data.draw(st.booleans()) else shape[:-1] + (shape[-1] + 1,), "f4"
        )
    elif kind == "missing array":
        del arrays[key]
    elif kind == "missing json key":
        del meta[
            data.draw(st.sampled_from(["config", "step", "tokenizer", "format", "sha256"]), label="json key")
        ]
    elif kind == "nan weight":
        arrays[key] = np.full_like(arrays[key], np.nan)
    if data.draw(st.booleans(), label="checksum resealed"):
        _reseal(d, arrays, meta)
    else:
        with open(npz, "wb") as f:
            np.savez(f, **arrays)
        js.write_text(json.dumps(meta))


KINDS = [
    "truncate",
    "flip",
    "other npz",
    "other json",
    "wrong shape",
    "missing array",
    "missing json key",
    "nan weight",
]


@settings(max_examples=60)
@given(kind=st.sampled_from(KINDS), data=st.data())
def test_damaged_checkpoints_are_clear_errors_or_the_saved_model(saved, tmp_path_factory, kind, data):
    d = tmp_path_factory.mktemp("copy")
    for name in ("ckpt.npz", "ckpt.json"):
        shutil.copy(saved / "a" / name, d)
    _damage(d, saved / "b", kind, data)
    try:
        model, tok, meta = load_model(d, "ckpt")
    except CheckpointError as e:
        msg = str(e)
        assert str(d) in msg and "\n" not in msg, f"{kind}: the message names no file or spans lines: {msg!r}"
        return
    # damage that left the content intact (zip padding, JSON whitespace): the saved model, exactly
    original, _, _ = load_model(saved / "a", "ckpt")
    assert meta["config"]["model"] == CFG_A and tok.chars == list("abcde"), f"{kind}: another config loaded"
    for (k, got), (_, want) in zip(model.state_dict().items(), original.state_dict().items(), strict=True):
        assert_equal(f"{kind}: {k}", got, want)
