"""Diagnoses (npgpt/golden/diagnose.py) the example script does not exercise: one tensor of a
reference dump replaced by the mistaken value computed here, in plain NumPy, from the dump's
own tensors; `npgpt compare` must name it at that tensor."""

import json
import math

import numpy as np
import pytest

from npgpt.golden.tensorfile import read_safetensors, write_safetensors

from .conftest import run

S = math.sqrt(2 / math.pi)
ERF = np.vectorize(math.erf)


def _ln(x, w, b, n=None, eps=1e-5):
    xc = x - x.mean(-1, keepdims=True)
    var = (xc * xc).sum(-1, keepdims=True) / (n or x.shape[-1])
    return xc / np.sqrt(var + eps) * w + b


def _ln_dx_without_variance_term(x, dout, w, eps=1e-5):
    xc = x - x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    dxhat = dout * w
    return (dxhat - dxhat.mean(-1, keepdims=True)) * rstd


def _gelu_dx_without_tanh_derivative(h, dout):
    t = np.tanh(S * (h + 0.044715 * h**3))
    return dout * (0.5 * (1 + t) + 0.5 * h * S * (1 + 3 * 0.044715 * h**2))


def _attention_dx(t, p, nh, elementwise=False, scale_backward=True):
    """norm1's attention branch gradient, with att * (1 - att) for the softmax's backward
    (elementwise) or without the 1/sqrt(hs) in the scores' backward (not scale_backward)."""
    x = t[f"act/{p}norm1"]
    B, T, E = x.shape
    hs = E // nh
    split = lambda a: a.reshape(B, T, nh, hs).transpose(0, 2, 1, 3)  # noqa: E731
    merge = lambda a: a.transpose(0, 2, 1, 3).reshape(B, T, E)  # noqa: E731
    W = {n: t[f"param/{p}att.{n}.weight"] for n in ("W_query", "W_key", "W_value", "out_proj")}
    q, k, v = split(x @ W["W_query"].T), split(x @ W["W_key"].T), split(x @ W["W_value"].T)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
    s = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, s)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    dctx = split(t[f"dact/{p}att"] @ W["out_proj"])
    datt, dv = dctx @ v.transpose(0, 1, 3, 2), a.transpose(0, 1, 3, 2) @ dctx
    ds = datt * a * (1 - a) if elementwise else a * (datt - (datt * a).sum(-1, keepdims=True))
    ds = ds / math.sqrt(hs) if scale_backward else ds
    dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q
    return merge(dq) @ W["W_query"] + merge(dk) @ W["W_key"] + merge(dv) @ W["W_value"]


def _case(t, which):
    p = "trf_blocks.0."
    if which == "ln-unbiased":
        x = t["act/drop_emb"]
        return (
            f"act/{p}norm1",
            _ln(x, t[f"param/{p}norm1.scale"], t[f"param/{p}norm1.shift"], x.shape[-1] - 1),
            "unbiased variance",
        )
    if which == "ln-no-variance-term":
        dx = _ln_dx_without_variance_term(
            t["act/trf_blocks"], t["dact/final_norm"], t["param/final_norm.scale"]
        )
        return "dact/trf_blocks", dx, "variance term is missing"
    if which == "gelu-erf":
        h = t[f"act/{p}ff.layers.0"]
        return f"act/{p}ff.layers.1", 0.5 * h * (1 + ERF(h / math.sqrt(2))), "exact erf GELU"
    if which == "gelu-no-tanh-derivative":
        dx = _gelu_dx_without_tanh_derivative(t[f"act/{p}ff.layers.0"], t[f"dact/{p}ff.layers.1"])
        return f"dact/{p}ff.layers.0", dx, "missing the 1 - tanh^2 factor"
    if which == "attention-elementwise-softmax":
        # norm1's dout is the attention branch's dx; the block also passes nothing else into it
        return f"dact/{p}norm1", _attention_dx(t, p, 2, elementwise=True), "softmax treated as elementwise"
    if which == "attention-no-scale-backward":
        return f"dact/{p}norm1", _attention_dx(t, p, 2, scale_backward=False), "scaling missing"
    raise ValueError(which)


@pytest.mark.parametrize(
    "which",
    [
        "ln-unbiased",
        "ln-no-variance-term",
        "gelu-erf",
        "gelu-no-tanh-derivative",
        "attention-elementwise-softmax",
        "attention-no-scale-backward",
    ],
)
def test_a_mistaken_tensor_is_named_at_its_place(capsys, tmp_path, ref64, which):
    t = {k: np.array(v) for k, v in read_safetensors(ref64)[0].items()}
    name, value, words = _case(t, which)
    assert not np.allclose(value, t[name], rtol=1e-6), f"{which}: the mistake does not change {name}"
    t[name] = value
    write_safetensors(tmp_path / "t.safetensors", t)
    status, out, _ = run(
        capsys, "compare", tmp_path / "t.safetensors", "--reference", ref64, "--format", "json"
    )
    rep = json.loads(out)
    assert status == 1 and rep["first_divergence"] == name, (
        f"{which}: first divergence {rep['first_divergence']}"
    )
    assert any(words in d for d in rep["diagnosis"]), f"{which}: diagnosis {rep['diagnosis']}"
