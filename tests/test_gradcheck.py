"""The gradient checker itself: it must fail loudly on wrong backwards and protocol breaches."""

import numpy as np
import pytest

from npgpt import GELU, LayerNorm, Linear, MultiHeadAttention, gradcheck, numerical_gradient
from npgpt.layers.gelu import COEF, SQRT_2_OVER_PI


def test_numerical_gradient_of_known_functions():
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    assert np.allclose(numerical_gradient(lambda a: (a * a).sum(), x), 2 * x, atol=1e-8)
    dout = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert np.allclose(numerical_gradient(np.sin, x, dout), np.cos(x) * dout, atol=1e-8)
    assert np.array_equal(x, [[1.0, -2.0], [0.5, 3.0]]), "x must be restored"
    with pytest.raises(TypeError, match="float64 ndarray"):
        numerical_gradient(np.sin, x.astype(np.float32))


class LayerNormNoMeanTerm(LayerNorm):
    def backward(self, dout):
        xhat, rstd, n = self.cache
        dxhat = dout * self.scale.data
        return (dxhat - xhat * (dxhat * xhat).sum(-1, keepdims=True) / n) * rstd


class GELUNoSech(GELU):
    def backward(self, dout):
        x, t = self.cache
        return dout * (0.5 * (1 + t) + 0.5 * x * SQRT_2_OVER_PI * (1 + 3 * COEF * x * x))


class LinearTransposedDW(Linear):
    def backward(self, dout):
        x = self.cache
        self.weight.grad += (x.reshape(-1, x.shape[-1]).T @ dout.reshape(-1, dout.shape[-1])).T * 1.001
        self.bias.grad += dout.reshape(-1, dout.shape[-1]).sum(0)
        return dout @ self.weight.data


class AttentionNoScaleInBackward(MultiHeadAttention):
    def backward(self, dout):
        q, k, v, B, T = self.cache.q, self.cache.k, self.cache.v, *self.cache.shape[:2]
        att, att_d = self.cache.weights(), self.cache.weights(dropped=True)
        dctx = self._split_heads(self.out_proj.backward(dout), B, T)
        datt = dctx @ v.swapaxes(-2, -1)
        dv = att_d.swapaxes(-2, -1) @ dctx
        ds = att * (datt - (datt * att).sum(-1, keepdims=True))  # the 1/sqrt(hs) is missing
        merge = lambda t: t.transpose(0, 2, 1, 3).reshape(B, T, self.d_out)  # (B, T, d_out)
        dx = self.W_query.backward(merge(ds @ k))
        dx += self.W_key.backward(merge(ds.swapaxes(-2, -1) @ q))
        return dx + self.W_value.backward(merge(dv))


class ModifiesInput(GELU):
    def forward(self, x):
        out = super().forward(x)
        x *= 1.0
        x[...] = x + 0.0
        x.flat[0] += 1.0
        return out


class NotRepeatable(GELU):
    calls = 0

    def backward(self, dout):
        NotRepeatable.calls += 1
        return super().backward(dout) * (1 + 1e-3 * NotRepeatable.calls)


class WrongShape(GELU):
    def backward(self, dout):
        return super().backward(dout)[..., :-1]


rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 4))


@pytest.mark.parametrize(
    "module,tensor",
    [
        (LayerNormNoMeanTerm(4), "x"),
        (GELUNoSech(), "x"),
        (LinearTransposedDW(4, 4, rng=0), "weight"),
        (AttentionNoScaleInBackward(4, 4, 3, 0.0, 2, rng=0), "x"),
    ],
)
@pytest.mark.parametrize("mode", ["full", "fast"])
def test_wrong_backwards_fail_on_the_right_tensor(module, tensor, mode):
    report = gradcheck(module, X, mode=mode)
    assert not report.passed
    failing = [r.name for r in report.rows if not r.passed]
    assert tensor in failing, f"expected {tensor} among the failing rows:\n{report}"
    assert "FAIL" in str(report) and tensor in str(report)


def test_correct_layers_pass_and_report_every_tensor():
    report = gradcheck(MultiHeadAttention(4, 4, 3, 0.0, 2, qkv_bias=True, rng=0), X)
    assert report.passed, str(report)
    assert [r.name for r in report.rows] == [
        "x",
        "W_query.weight",
        "W_query.bias",
        "W_key.weight",
        "W_key.bias",
        "W_value.weight",
        "W_value.bias",
        "out_proj.weight",
        "out_proj.bias",
    ]
    row = report.rows[0]
    assert row.shape == (2, 3, 4) and row.checked == 24 and row.max_abs < 1e-7


def test_in_place_input_change_is_reported():
    report = gradcheck(ModifiesInput(), X)
    check = dict((d, ok) for d, ok, _ in report.checks)
    assert not check["forward leaves its inputs unchanged"] and not report.passed


def test_non_repeatable_backward_is_reported():
    report = gradcheck(NotRepeatable(), X)
    assert not dict((d, ok) for d, ok, _ in report.checks)["backward is repeatable (same dout, same result)"]


def test_wrong_gradient_shape_fails_with_a_message():
    report = gradcheck(WrongShape(), X)
    assert not report.passed and "backward gave (2, 3, 3)" in str(report)


def test_float32_module_is_checked_in_float64_and_left_unchanged():
    lin = Linear(4, 3, rng=0).astype(np.float32)
    before = lin.weight.data.copy()
    report = gradcheck(lin, X.astype(np.float32))
    assert report.passed, str(report)
    assert lin.weight.data.dtype == np.float32 and np.array_equal(lin.weight.data, before)
    assert not lin.weight.grad.any(), "the caller's gradients must stay untouched"


def test_sampled_coordinates_are_deterministic_for_a_seed():
    lin = Linear(4, 6, rng=1)
    a = gradcheck(lin, X, max_coords=5, seed=3)
    b = gradcheck(lin, X, max_coords=5, seed=3)
    assert [r.checked for r in a.rows] == [5, 5, 5]
    assert [(r.max_abs, r.worst_index) for r in a.rows] == [(r.max_abs, r.worst_index) for r in b.rows]


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode must be 'full' or 'fast'"):
        gradcheck(GELU(), X, mode="quick")
    with pytest.raises(TypeError, match="must be an npgpt.Module"):
        gradcheck(np.sin, X)
