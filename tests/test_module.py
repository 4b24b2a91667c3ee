"""Parameter, Module and Sequential: registration, state dicts, modes, dtype casts."""

import copy

import numpy as np
import pytest

from npgpt import (
    GELU,
    GPT_CONFIG_124M,
    FeedForward,
    GPTModel,
    LayerNorm,
    Linear,
    Module,
    MultiHeadAttention,
    Parameter,
    Sequential,
)
from npgpt.layers import TransformerBlock


class Affine(Module):
    """A student-style module: super().__init__() then plain attribute assignment."""

    def __init__(self):
        super().__init__()
        self.w = Parameter(np.ones(3))
        self.inner = Linear(3, 2, rng=0)
        self.b = Parameter(np.zeros(2))


def test_parameter_holds_data_and_zero_grad_of_same_shape_and_dtype():
    p = Parameter(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert p.grad.shape == (2, 3) and p.grad.dtype == np.float32 and not p.grad.any()


def test_assignment_registers_in_order_with_dotted_names():
    # PyTorch's order: a module's own parameters in assignment order, then each child's
    names = [n for n, _ in Affine().named_parameters()]
    assert names == ["w", "b", "inner.weight", "inner.bias"]


def test_forgetting_super_init_is_a_clear_error():
    class Bad(Module):
        def __init__(self):
            self.w = Parameter(np.ones(2))

    with pytest.raises(RuntimeError, match=r"Bad: call super\(\).__init__\(\)"):
        Bad()


def test_sequential_children_are_numbered():
    seq = Sequential(Linear(2, 3, rng=0), Linear(3, 1, rng=1))
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert len(seq) == 2 and seq[1].out_features == 1


def test_state_dict_round_trips_and_is_a_copy():
    a, b = Affine(), Affine()
    for p in a.parameters():
        p.data[...] = np.random.default_rng(1).standard_normal(p.data.shape)
    sd = a.state_dict()
    b.load_state_dict(sd)
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert np.array_equal(pa.data, pb.data), name
    sd["w"][0] = 123.0
    assert a.w.data[0] != 123.0, "state_dict must hold copies"


def test_load_state_dict_names_missing_unexpected_and_misshaped_keys():
    m = Affine()
    sd = m.state_dict()
    del sd["b"]
    sd["extra"] = np.zeros(1)
    sd["w"] = np.zeros(4)
    with pytest.raises(RuntimeError) as err:
        m.load_state_dict(sd)
    msg = str(err.value)
    assert "Affine.load_state_dict" in msg
    assert "missing keys: b" in msg and "unexpected keys: extra" in msg
    assert "w has shape (4,), expected (3,)" in msg


def test_load_state_dict_non_strict_ignores_missing_and_unexpected():
    m = Affine()
    m.load_state_dict({"w": np.full(3, 2.0), "extra": np.zeros(1)}, strict=False)
    assert np.array_equal(m.w.data, np.full(3, 2.0))


def test_mask_is_a_buffer_in_state_dict_not_a_parameter():
    att = MultiHeadAttention(4, 4, 5, 0.0, 2, rng=0)
    assert "mask" in att.state_dict()
    assert "mask" not in dict(att.named_parameters())
    expected = np.array([[0, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]])
    assert np.array_equal(att.state_dict()["mask"], expected)
    att.load_state_dict(att.state_dict())  # accepted back


def test_zero_grad_train_eval_propagate():
    m = Affine()
    for p in m.parameters():
        p.grad += 1.0
    m.zero_grad()
    assert all(not p.grad.any() for p in m.parameters())
    m.eval()
    assert not m.training and not m.inner.training
    m.train()
    assert m.training and m.inner.training


def test_astype_casts_parameters_and_grads_in_place_and_returns_module():
    m = Affine()
    assert m.astype(np.float32) is m
    assert all(p.data.dtype == np.float32 and p.grad.dtype == np.float32 for p in m.parameters())
    with pytest.raises(TypeError, match="float32 or float64"):
        m.astype(np.int32)


def test_shared_parameter_is_listed_once_but_kept_in_state_dict():
    seq = Sequential(Linear(3, 3, rng=0), Linear(3, 3, rng=1))
    seq[1].weight = seq[0].weight  # tie
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "1.bias"]
    assert "1.weight" in seq.state_dict()


def test_block_parameter_names_are_the_books():
    cfg = dict(GPT_CONFIG_124M, emb_dim=8, n_heads=2, context_length=4, qkv_bias=True)
    names = [n for n, _ in TransformerBlock(cfg, rng=0).named_parameters()]
    assert names[:4] == ["att.W_query.weight", "att.W_query.bias", "att.W_key.weight", "att.W_key.bias"]
    assert "ff.layers.0.weight" in names and "ff.layers.2.bias" in names
    assert names[-4:] == ["norm1.scale", "norm1.shift", "norm2.scale", "norm2.shift"]


def test_parameter_count_of_the_124m_configuration_by_hand():
    # Counted by hand from the shapes (the book prints 163,009,536 and 124,412,160):
    E, V, L, n_layers, hidden = 768, 50257, 1024, 12, 4 * 768
    attention = 3 * (E * E) + (E * E + E)  # W_query, W_key, W_value without bias; out_proj
    feed_forward = (E * hidden + hidden) + (hidden * E + E)
    norms = 2 * (2 * E)
    per_block = attention + feed_forward + norms
    assert per_block == 7_085_568
    expected = V * E + L * E + n_layers * per_block + 2 * E + E * V
    assert expected == 163_009_536
    model = GPTModel(GPT_CONFIG_124M, rng=0)
    total = sum(p.data.size for p in model.parameters())
    assert total == expected, f"GPTModel(GPT_CONFIG_124M) has {total:,} parameters, expected {expected:,}"
    head = model.out_head.weight.data.size
    assert total - head == 124_412_160
    block = sum(p.data.size for p in model.trf_blocks[0].parameters())
    assert block == per_block


# ---- hooks: PyTorch's register_forward_hook and register_full_backward_(pre_)hook ----------
def _ff():
    return FeedForward({"emb_dim": 3}, rng=0).astype(np.float64)


def test_forward_hook_sees_inputs_and_output_of_a_child_called_by_its_parent():
    ff = _ff()
    seen = []
    handle = ff.layers[1].register_forward_hook(lambda m, inputs, out: seen.append((m, inputs, out.copy())))
    x = np.random.default_rng(0).normal(size=(2, 3))
    ff.forward(x)
    assert len(seen) == 1, f"the GELU's hook ran {len(seen)} times, expected once"
    m, inputs, out = seen[0]
    assert m is ff.layers[1]
    h = x @ ff.layers[0].weight.data.T + ff.layers[0].bias.data  # the GELU's input, by hand
    np.testing.assert_allclose(inputs[0], h, rtol=1e-14, err_msg="hook inputs[0] (GELU input)")
    t = np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h * h * h))
    np.testing.assert_allclose(out, 0.5 * h * (1 + t), rtol=1e-13, err_msg="hook output (GELU out)")
    handle.remove()
    ff.forward(x)
    assert len(seen) == 1, "the hook ran after remove()"
    assert "forward" not in ff.layers[1].__dict__, "remove() left a wrapper on the module"


def test_forward_hook_return_value_replaces_the_output():
    lin = Linear(2, 2, rng=0)
    lin.register_forward_hook(lambda m, inputs, out: out * 0.0)
    out = lin(np.ones((1, 2)))
    assert not np.any(out), f"the hook returned zeros but the output is {out}"


def test_backward_hooks_see_dout_before_and_dx_after():
    ln = LayerNorm(4).astype(np.float64)
    rng = np.random.default_rng(1)
    x, dout = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    pre, post = [], []
    h1 = ln.register_full_backward_pre_hook(lambda m, gout: pre.append(gout[0].copy()))
    h2 = ln.register_full_backward_hook(lambda m, gin, gout: post.append((gin[0].copy(), gout[0].copy())))
    ln.forward(x)
    dx = ln.backward(dout)
    assert len(pre) == 1 and len(post) == 1, f"pre ran {len(pre)}, post ran {len(post)} times"
    np.testing.assert_array_equal(pre[0], dout, err_msg="pre-hook grad_output[0] (dout)")
    np.testing.assert_array_equal(post[0][0], dx, err_msg="post-hook grad_input[0] (dx)")
    np.testing.assert_array_equal(post[0][1], dout, err_msg="post-hook grad_output[0] (dout)")
    h1.remove()
    assert "backward" in ln.__dict__, "removing one of two backward hooks removed the wrapper"
    h2.remove()
    h2.remove()  # a second remove does nothing
    assert "backward" not in ln.__dict__, "removing every backward hook left a wrapper"


def test_hooks_change_no_number_and_survive_a_deep_copy():
    ff = _ff()
    x = np.random.default_rng(2).normal(size=(2, 3))
    plain = ff.forward(x)
    calls = []
    ff.layers[0].register_forward_hook(lambda m, i, o: calls.append(m))
    np.testing.assert_array_equal(ff.forward(x), plain, err_msg="FeedForward out with a hook")
    twin = copy.deepcopy(ff)
    twin.forward(x)
    assert calls[-1] is twin.layers[0], "the copy's hook got the original module, not the copy"


def test_hook_on_a_module_called_twice_runs_for_each_call():
    gelu = GELU()
    n = []
    gelu.register_forward_hook(lambda m, i, o: n.append(o.shape))
    gelu(np.zeros(2))
    gelu(np.zeros(3))
    assert n == [(2,), (3,)], f"hook saw outputs of shapes {n}, expected [(2,), (3,)]"
