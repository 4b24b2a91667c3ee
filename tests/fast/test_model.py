"""npgpt.fast.accelerate on a whole GPTModel (with the loss) equals the reference: logits, loss
and every parameter's gradient (tests/fast/twins.py), dropout on or off with the same masks;
and `reference` switches it back."""

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from npgpt import CrossEntropyLoss, GPTModel, Module, MultiHeadAttention
from npgpt.fast import accelerate, is_fast, reference
from tests.asserts import assert_close, assert_normwise_rel
from tests.fast.twins import assert_twins_agree, small_blocks_two_threads  # noqa: F401
from tests.strategies import TWIN_RTOL, dtypes, gpt_configs, seeds, token_ids


class TrainStep(Module):
    """A model and its loss as one module: forward(ids, targets) -> logits (the loss kept in
    .loss), backward(dout=1.0) -> None. accelerate switches both parts."""

    def __init__(self, model):
        super().__init__()
        self.model, self.ce = model, CrossEntropyLoss()

    def forward(self, ids, targets):
        logits = self.model.forward(ids)
        self.loss = self.ce.forward(logits, targets)
        return logits

    def backward(self, dout):
        return self.model.backward(self.ce.backward(dout))


def key_bias_terms(step):
    """Each layer's key bias gradient is 0 in exact arithmetic; its terms have the size of dk,
    at least ||dW_key|| / ||x|| with x the attention's input, norm1's output (as in
    tests/fast/test_attention.py)."""
    sizes = {}
    for i, blk in enumerate(step.model.trf_blocks):
        if blk.att.W_key.bias is not None:
            x = blk.norm1.cache.xhat * blk.norm1.scale.data + blk.norm1.shift.data  # (B, T, E)
            norm_x = max(float(np.linalg.norm(x.astype(np.float64))), 1e-30)
            sizes[f"model.trf_blocks.{i}.att.W_key.bias"] = (
                float(np.linalg.norm(blk.att.W_key.weight.grad)) / norm_x
            )
    return sizes


@given(cfg=gpt_configs(max_layers=2), dtype=dtypes(), seed=seeds, data=st.data())
def test_fast_model_equals_reference(cfg, dtype, seed, data):
    # LayerNorm over 1 or 2 features is degenerate (its output is 0 or +-1 whatever the input),
    # so every gradient behind it is rounding noise: tests/fast/test_layernorm.py covers C <= 2
    assume(cfg["emb_dim"] >= 3)
    B = data.draw(st.integers(1, 2), label="B")
    T = data.draw(st.integers(1, cfg["context_length"]), label="T")
    ids = data.draw(token_ids(cfg["vocab_size"], (B, T)), label="ids")
    targets = data.draw(token_ids(cfg["vocab_size"], (B, T)), label="targets")

    def build(dt):
        return TrainStep(GPTModel(cfg, rng=seed).astype(dt))

    label = f"GPTModel {dtype.__name__} drop {cfg['drop_rate']}"
    ref, fast, _ = assert_twins_agree(label, build, (ids, targets), 1.0, dtype, key_bias_terms)
    # the loss, a float in float64 from float32 or float64 terms: as close as the logits
    assert_normwise_rel(f"{label}: loss, fast vs reference", fast.loss, ref.loss, TWIN_RTOL[np.dtype(dtype)])


def test_accelerate_and_reference_switch_in_place_and_keep_the_state():
    cfg = dict(
        vocab_size=13, context_length=6, emb_dim=8, n_heads=2, n_layers=2, drop_rate=0.0, qkv_bias=True
    )
    model = GPTModel(cfg, rng=3)
    before = model.state_dict()
    ids = np.arange(10).reshape(2, 5) % 13
    logits = model.forward(ids)
    assert accelerate(model) is model and is_fast(model), "accelerate must switch the model in place"
    kinds = {type(m).__module__ for _, m in model.named_modules() if isinstance(m, MultiHeadAttention)}
    assert kinds == {"npgpt.fast.attention"}, f"attention modules run {kinds}"
    for name, arr in model.state_dict().items():
        assert_close(f"state_dict {name} after accelerate", arr, before[name], rtol=0, atol=0)
    assert_close("logits, fast", model.forward(ids), logits, rtol=1e-12, atol=1e-12)
    assert reference(model) is model and not is_fast(model), "reference must switch back in place"
    assert_close("logits, back on the reference", model.forward(ids), logits, rtol=0, atol=0)


def test_a_switch_drops_the_cache_so_a_backward_pairs_with_its_own_forward():
    model = GPTModel(
        dict(vocab_size=7, context_length=4, emb_dim=4, n_heads=1, n_layers=1, drop_rate=0.0), rng=0
    )
    model.forward(np.zeros((1, 3), dtype=np.int64))
    accelerate(model)
    try:
        model.backward(np.ones((1, 3, 7)))
    except RuntimeError as e:
        assert "called before forward" in str(e), f"unexpected error: {e}"
    else:
        raise AssertionError("a backward after switching paths, with no forward since, must raise")
