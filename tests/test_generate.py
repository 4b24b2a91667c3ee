"""Generation: the key/value cache gives the uncached model's logits, sampling follows the
softmax and respects temperature and top-k, `npgpt generate` streams from a checkpoint."""

import io
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npgpt import GPTModel
from npgpt.cli import main
from npgpt.commands.generate import stream
from npgpt.generate import KVCache, generate, sample_next
from npgpt.train import train
from tests.asserts import assert_close, assert_equal
from tests.strategies import dtypes, gpt_configs, seeds

TOL = {np.float64: {"rtol": 1e-10, "atol": 1e-12}, np.float32: {"rtol": 2e-4, "atol": 2e-5}}


@settings(max_examples=15)
@given(cfg=gpt_configs(max_layers=2, max_context=8), dtype=dtypes(), seed=seeds, data=st.data())
def test_cached_logits_match_uncached(cfg, dtype, seed, data):
    model = GPTModel(cfg, rng=seed).astype(dtype).eval()
    rng = np.random.default_rng(seed)
    L, V = cfg["context_length"], cfg["vocab_size"]
    seq = rng.integers(0, V, (2, L))
    prompt = data.draw(st.integers(1, L), label="prompt length")
    cache = KVCache(model)
    got = cache.forward(seq[:, :prompt])  # (B, prompt, V): the prompt in one chunk
    assert_close("prompt logits", got, model.forward(seq[:, :prompt]), **TOL[dtype])
    for t in range(prompt, L):  # then one token at a time
        step = cache.forward(seq[:, t : t + 1])  # (B, 1, V)
        assert step.shape == (2, 1, V) and cache.length == t + 1
        assert_close(
            f"logits at position {t}", step[:, 0], model.forward(seq[:, : t + 1])[:, -1], **TOL[dtype]
        )
    with pytest.raises(ValueError, match=rf"KVCache.forward: {L} cached \+ 1 new positions exceed"):
        cache.forward(seq[:, :1])


@given(cfg=gpt_configs(max_layers=2, max_context=8), seed=seeds)
def test_greedy_with_and_without_cache_agree(cfg, seed):
    model = GPTModel(cfg, rng=seed)
    prompt = np.random.default_rng(seed).integers(0, cfg["vocab_size"], (1, 1))
    n = cfg["context_length"] - 1  # stays within the window, where both see the same context
    cached = [int(t[0]) for t in generate(model, prompt, n, temperature=0.0)]
    plain = [int(t[0]) for t in generate(model, prompt, n, temperature=0.0, use_cache=False)]
    assert cached == plain, f"greedy tokens differ: cached {cached}, uncached {plain}"
    assert not model.training, "generate leaves the model in eval mode"


def test_generation_past_the_context_window():
    cfg = dict(
        vocab_size=5, context_length=4, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False
    )
    model = GPTModel(cfg, rng=0)
    out = list(generate(model, np.array([[1, 2], [3, 4]]), 11, rng=0))
    assert len(out) == 11 and all(t.shape == (2,) and ((0 <= t) & (t < 5)).all() for t in out)


def test_sampling_follows_the_softmax():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    logits = np.tile(np.log(p), (20000, 1))  # (N, V): 20000 independent draws
    ids = sample_next(logits, 1.0, None, np.random.default_rng(0))
    freq = np.bincount(ids, minlength=4) / len(ids)
    assert_close("sampled frequencies", freq, p, rtol=0, atol=0.015)  # ~4.5 binomial std. devs
    # temperature 0.5 squares the probabilities before normalizing
    freq = np.bincount(sample_next(logits, 0.5, None, np.random.default_rng(1)), minlength=4) / len(ids)
    assert_close("frequencies at T = 0.5", freq, p * p / (p * p).sum(), rtol=0, atol=0.015)
    # top-k = 2 renormalizes over the two likeliest
    freq = np.bincount(sample_next(logits, 1.0, 2, np.random.default_rng(2)), minlength=4) / len(ids)
    assert_close("frequencies with top_k = 2", freq, [0.625, 0.375, 0, 0], rtol=0, atol=0.015)


@given(logits=st.lists(st.floats(-20, 20), min_size=2, max_size=9), seed=seeds, k=st.integers(1, 9))
def test_greedy_and_top_k_one_pick_the_argmax(logits, seed, k):
    z = np.array([logits])
    best = int(np.argmax(z))
    assert int(sample_next(z, 0.0, None, np.random.default_rng(seed))[0]) == best
    top1 = int(sample_next(z, 1.3, 1, np.random.default_rng(seed))[0])
    assert z[0, top1] == z[0].max(), f"top_k = 1 picked id {top1}, not a largest logit of {logits}"
    picked = int(sample_next(z, 1.0, k, np.random.default_rng(seed))[0])
    assert (z[0] > z[0, picked]).sum() < k, f"picked id {picked} is not among the top {k} of {logits}"


def test_errors():
    model = GPTModel(
        dict(vocab_size=5, context_length=4, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False),
        rng=0,
    )
    with pytest.raises(ValueError, match="generate: temperature must be >= 0, got -1"):
        next(generate(model, np.array([[1]]), 3, temperature=-1.0))
    with pytest.raises(ValueError, match="generate: top_k must be >= 1, got 0"):
        next(generate(model, np.array([[1]]), 3, top_k=0))
    with pytest.raises(ValueError, match=r"generate: idx must be \(B, T\) with T >= 1 prompt tokens"):
        next(generate(model, np.zeros((1, 0), np.int64), 3))


def test_stream_waits_for_whole_characters():
    class Bytes:  # a byte-level tokenizer: one UTF-8 byte per id
        def decode(self, ids):
            return bytes(ids).decode("utf-8", errors="replace")

    out = io.StringIO()
    ids = list("h\u00e9!".encode())  # the e-acute is two bytes
    new = stream(Bytes(), ([i] for i in ids), out)
    assert new == ids and out.getvalue() == "h\u00e9!"


def test_cli_generate_from_a_checkpoint(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("abcd" * 300)
    train(
        {
            "data": str(corpus),
            "out_dir": str(tmp_path / "out"),
            "block_size": 8,
            "batch_size": 4,
            "n_layer": 1,
            "n_head": 2,
            "n_embd": 16,
            "max_iters": 100,
            "learning_rate": 1e-2,
            "warmup_iters": 2,
            "lr_decay_iters": 100,
            "eval_interval": 100,
            "eval_iters": 1,
        },
        progress=False,
    )
    outputs = []
    for _ in range(2):
        buf = io.StringIO()
        monkeypatch.setattr(sys, "stdout", buf)
        code = main(
            [
                "generate",
                "--checkpoint",
                str(tmp_path / "out"),
                "--prompt",
                "ab",
                "--max-new-tokens",
                "20",
                "--temperature",
                "0.5",
                "--seed",
                "3",
            ]
        )
        monkeypatch.undo()
        assert code == 0
        outputs.append(buf.getvalue())
    assert outputs[0] == outputs[1], "the same seed gave different text"
    text = outputs[0]
    assert len(text) == 2 + 20 + 1 and text.startswith("ab") and text.endswith("\n"), repr(text)
    assert text[:22] == ("abcd" * 6)[:22], f"a model that learnt the 4-cycle wrote {text!r}"
    assert main(["generate", "--checkpoint", str(tmp_path / "out"), "--prompt", "xyz"]) == 2
    assert "--prompt: CharTokenizer.encode: characters not in the vocabulary" in capsys.readouterr().err


def test_dtype_of_cached_logits():
    model = GPTModel(
        dict(vocab_size=5, context_length=4, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=True),
        rng=0,
    ).astype(np.float32)
    logits = KVCache(model).forward(np.array([[1, 2]]))
    assert logits.dtype == np.float32, f"cached path promoted float32 to {logits.dtype}"
    assert_equal("shape", np.array(logits.shape), np.array([1, 2, 5]))


def test_a_cached_step_works_on_one_position(monkeypatch):
    from npgpt import Linear

    model = GPTModel(
        dict(vocab_size=7, context_length=8, emb_dim=4, n_heads=2, n_layers=2, drop_rate=0.0, qkv_bias=True),
        rng=0,
    )
    seen = []
    real = Linear.forward
    monkeypatch.setattr(Linear, "forward", lambda lin, x: seen.append(x.shape[1]) or real(lin, x))
    steps = generate(model, np.array([[1, 2, 3]]), 4, temperature=0.0)
    next(steps)  # the prompt: 3 positions through every projection
    assert set(seen) == {3}, f"prefill saw position counts {sorted(set(seen))}"
    seen.clear()
    next(steps)
    assert set(seen) == {1} and len(seen) == 2 * 6 + 1, f"one cached step ran Linear on {seen} positions"
