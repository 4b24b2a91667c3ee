"""Optimizers: AdamW and SGD against hand calculations and steps recorded with torch.optim;
param groups, tied weights, state dicts, clipping, the learning-rate schedule."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npgpt import GPTModel, Parameter
from npgpt.optim import SGD, AdamW, clip_grad_norm, cosine_lr, decay_groups
from tests.asserts import assert_close
from tests.strategies import arrays, dtypes, elements, gpt_configs

FIXTURES = Path(__file__).parent / "fixtures"
TOL = {"float64": {"rtol": 1e-10, "atol": 1e-12}, "float32": {"rtol": 1e-5, "atol": 1e-6}}


@given(
    p0=arrays(np.float64, (5,)),
    g1=arrays(np.float64, (5,)),
    g2=arrays(np.float64, (5,)),
    lr=st.floats(1e-4, 0.1),
    wd=st.floats(0.0, 0.5),
)
def test_adamw_two_steps_by_hand(p0, g1, g2, lr, wd):
    b1, b2, eps = 0.9, 0.99, 1e-8
    p = Parameter(p0.copy())
    opt = AdamW([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    p.grad[...] = g1
    opt.step()
    # step 1: the bias-corrected moments are g1 and g1^2, so the update is lr * g1 / (|g1| + eps)
    p1 = p0 * (1 - lr * wd) - lr * g1 / (np.abs(g1) + eps)
    assert_close("p after step 1", p.data, p1, rtol=1e-12, atol=1e-12)
    p.grad[...] = g2
    opt.step()
    # step 2: m = (1-b1)(b1 g1 + g2), v = (1-b2)(b2 g1^2 + g2^2), corrected by 1 - b^2
    mhat = (1 - b1) * (b1 * g1 + g2) / (1 - b1 * b1)
    vhat = (1 - b2) * (b2 * g1 * g1 + g2 * g2) / (1 - b2 * b2)
    p2 = p1 * (1 - lr * wd) - lr * mhat / (np.sqrt(vhat) + eps)
    assert_close("p after step 2", p.data, p2, rtol=1e-12, atol=1e-12)


def test_adamw_one_step_numbers():
    # p = 1, grad = 0.5, lr = 0.1, wd = 0.1: decay to 0.99, then a step of 0.1 * 0.5 / (0.5 + 1e-8)
    p = Parameter(np.array([1.0]))
    p.grad[...] = 0.5
    AdamW([p], lr=0.1, weight_decay=0.1).step()
    assert_close("p", p.data, [0.89 + 2e-9], rtol=0, atol=1e-15)


@given(
    p0=arrays(np.float64, (4,)),
    g1=arrays(np.float64, (4,)),
    g2=arrays(np.float64, (4,)),
    nesterov=st.booleans(),
    wd=st.sampled_from([0.0, 0.01]),
)
def test_sgd_momentum_by_hand(p0, g1, g2, nesterov, wd):
    lr, mu = 0.1, 0.9
    p = Parameter(p0.copy())
    opt = SGD([p], lr=lr, momentum=mu, nesterov=nesterov, weight_decay=wd)
    p.grad[...] = g1
    opt.step()
    d1 = g1 + wd * p0
    p1 = p0 - lr * (d1 + mu * d1 if nesterov else d1)  # first step: the buffer is the gradient
    assert_close("p after step 1", p.data, p1, rtol=1e-12, atol=1e-12)
    p.grad[...] = g2
    opt.step()
    d2 = g2 + wd * p1
    buf = mu * d1 + d2
    p2 = p1 - lr * (d2 + mu * buf if nesterov else buf)
    assert_close("p after step 2", p.data, p2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["adamw", "sgd_momentum"])
def test_matches_torch_optim(name, dtype):
    f = np.load(FIXTURES / f"optim_{name}_{dtype}.npz")
    cfg = json.loads(str(f["config"]))
    h = cfg["hyper"]
    W, b = Parameter(f["init.W"].copy()), Parameter(f["init.b"].copy())
    assert W.data.dtype == np.dtype(dtype)
    groups = [
        {"params": [W], "weight_decay": h["weight_decay"]["W"]},
        {"params": [b], "weight_decay": h["weight_decay"]["b"]},
    ]
    if name == "adamw":
        opt = AdamW(groups, lr=h["lr"], betas=tuple(h["betas"]), eps=h["eps"])
    else:
        opt = SGD(
            groups, lr=h["lr"], momentum=h["momentum"], dampening=h["dampening"], nesterov=h["nesterov"]
        )
    for k in range(1, cfg["steps"] + 1):
        W.grad[...], b.grad[...] = f[f"grad.W.{k}"], f[f"grad.b.{k}"]
        opt.step()
        for pname, p in (("W", W), ("b", b)):
            assert p.data.dtype == np.dtype(dtype), f"{pname} changed dtype to {p.data.dtype}"
            assert_close(
                f"{name} {dtype} {pname} after step {k}", p.data, f[f"param.{pname}.{k}"], **TOL[dtype]
            )


@given(cfg=gpt_configs(max_layers=2))
def test_decay_groups_split(cfg):
    model = GPTModel(cfg, rng=0)
    decay, no_decay = decay_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    linear_weights = {id(m.weight) for n, m in model.named_modules() if type(m).__name__ == "Linear"}
    assert {id(p) for p in decay["params"]} == linear_weights, "decay group is not exactly the Linear weights"
    everything = {id(p) for p in model.parameters()}
    assert {id(p) for p in no_decay["params"]} == everything - linear_weights
    assert model.tok_emb.weight in no_decay["params"] and model.final_norm.scale in no_decay["params"]


def test_tied_weight_is_stepped_once():
    cfg = dict(
        vocab_size=7, context_length=4, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False
    )
    model = GPTModel(cfg, rng=0)
    model.out_head.weight = model.tok_emb.weight
    groups = decay_groups(model, 0.1)
    n = sum(len(g["params"]) for g in groups)
    assert n == len(model.parameters()), f"{n} params in groups, {len(model.parameters())} unique"
    w = model.tok_emb.weight
    w.grad[...] = 1.0
    before = w.data.copy()
    SGD([w, w], lr=0.5).step()  # listed twice, updated once
    assert_close("tied weight after one SGD step", w.data, before - 0.5, rtol=0, atol=1e-15)


@given(dtype=dtypes(), seed=st.integers(0, 2**16))
def test_state_dict_resumes_exactly(dtype, seed):
    rng = np.random.default_rng(seed)
    a = [
        Parameter(rng.standard_normal((3, 2)).astype(dtype)),
        Parameter(rng.standard_normal(2).astype(dtype)),
    ]
    b = [Parameter(p.data.copy()) for p in a]
    grads = [[rng.standard_normal(p.data.shape).astype(dtype) for p in a] for _ in range(4)]
    opt_a = AdamW(a, lr=1e-2, betas=(0.9, 0.99))
    for k in range(2):
        for p, g in zip(a, grads[k], strict=True):
            p.grad[...] = g
        opt_a.step()
    for p, q in zip(a, b, strict=True):
        q.data = p.data.copy()
    opt_b = AdamW(b, lr=0.5)  # different hyperparameters: the state dict restores them
    opt_b.load_state_dict(opt_a.state_dict())
    assert opt_b.param_groups[0]["lr"] == 1e-2 and opt_b.param_groups[0]["betas"] == (0.9, 0.99)
    for k in range(2, 4):
        for ps in (a, b):
            for p, g in zip(ps, grads[k], strict=True):
                p.grad[...] = g
        opt_a.step()
        opt_b.step()
    for i, (p, q) in enumerate(zip(a, b, strict=True)):
        assert_close(f"param {i} resumed vs uninterrupted", q.data, p.data, rtol=0, atol=0)


def test_zero_grad():
    p = Parameter(np.ones(3))
    p.grad[...] = 2.0
    SGD([p], lr=0.1).zero_grad()
    assert not p.grad.any(), f"grad after zero_grad: {p.grad}"


@given(g=arrays(np.float64, (6,), bound=100.0), max_norm=st.floats(0.1, 10.0))
def test_clip_grad_norm(g, max_norm):
    p, q = Parameter(np.zeros(4)), Parameter(np.zeros(2))
    p.grad[...], q.grad[...] = g[:4], g[4:]
    norm = clip_grad_norm([p, q, p], max_norm)  # p twice: counted once
    expected_norm = math.sqrt(float(np.sum(g * g)))
    assert abs(norm - expected_norm) <= 1e-12 * max(expected_norm, 1.0), f"norm {norm} != {expected_norm}"
    coef = min(max_norm / (expected_norm + 1e-6), 1.0)
    assert_close("clipped grads", np.concatenate([p.grad, q.grad]), g * coef, rtol=1e-12, atol=1e-300)


def test_clip_grad_norm_numbers():
    p = Parameter(np.zeros(2))
    p.grad[...] = [3.0, 4.0]
    assert clip_grad_norm([p], 1.0) == 5.0
    assert_close("grad clipped to norm 1", p.grad, [0.6, 0.8], rtol=1e-6)


@given(it=st.integers(0, 3000), lr=elements(np.float64, 1.0).map(abs))
def test_cosine_lr_bounds(it, lr):
    min_lr = lr / 10
    value = cosine_lr(it, lr, min_lr, 100, 2000)
    low = lr / 101 if it < 100 else min_lr  # the warm-up starts from lr / (warmup + 1)
    assert low - 1e-15 <= value <= lr + 1e-15, f"lr at {it} = {value} outside [{low}, {lr}]"


def test_cosine_lr_landmarks():
    lr, min_lr, warm, decay = 1e-3, 1e-4, 100, 2000
    assert cosine_lr(0, lr, min_lr, warm, decay) == pytest.approx(lr / 101, rel=1e-12)
    assert cosine_lr(49, lr, min_lr, warm, decay) == pytest.approx(lr * 50 / 101, rel=1e-12)
    assert cosine_lr(warm, lr, min_lr, warm, decay) == pytest.approx(lr, rel=1e-12)
    assert cosine_lr(1050, lr, min_lr, warm, decay) == pytest.approx((lr + min_lr) / 2, rel=1e-12)
    assert cosine_lr(decay, lr, min_lr, warm, decay) == pytest.approx(min_lr, rel=1e-12)
    assert cosine_lr(decay + 500, lr, min_lr, warm, decay) == min_lr
    after = [cosine_lr(i, lr, min_lr, warm, decay) for i in range(warm, decay + 1)]
    assert all(a >= b for a, b in zip(after, after[1:], strict=False)), "lr increases after warm-up"


def test_errors():
    with pytest.raises(ValueError, match="AdamW: got an empty parameter list"):
        AdamW([])
    with pytest.raises(ValueError, match=r"AdamW: betas must be in \[0, 1\)"):
        AdamW([Parameter(np.ones(2))], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="SGD: lr must be >= 0"):
        SGD([Parameter(np.ones(2))], lr=-1.0)
    opt = AdamW([Parameter(np.ones(2))])
    with pytest.raises(ValueError, match=r"AdamW.load_state_dict: the state has groups of sizes \[2\]"):
        opt.load_state_dict(AdamW([Parameter(np.ones(2)), Parameter(np.ones(3))]).state_dict())
