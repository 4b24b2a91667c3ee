"""Forward and backward hooks on Module (npgpt/module.py), as PyTorch's register_forward_hook and
register_full_backward_hook: what they see, that .remove() undoes them, and that a module
without hooks is left exactly as it was (no wrapper in its instance dict)."""

import copy

import numpy as np

from npgpt import GELU, FeedForward, LayerNorm, Linear


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
