"""`npgpt explain block`: docs/block.md, step by step (dropout off)."""

import copy

import numpy as np

from .steps import Explanation, Step, _diff, _dout, _floats, _hand, _round_params


def explain_block(x=None, seed=0, dout=None, emb_dim=4, n_heads=2):
    from ..layers.block import TransformerBlock

    rng = np.random.default_rng(seed)
    x = _floats("block", x, _hand(rng, (1, 3, emb_dim)), 3)
    cfg = {
        "emb_dim": x.shape[-1],
        "context_length": x.shape[1],
        "n_heads": n_heads,
        "drop_rate": 0.0,
        "qkv_bias": False,
    }
    block = _round_params(TransformerBlock(cfg, rng=rng))
    own = copy.deepcopy(block)  # the branches, run one module at a time
    a1 = own.norm1.forward(x)
    h1 = own.att.forward(a1)
    x1 = x + h1  # (B, T, E)
    a2 = own.norm2.forward(x1)
    h2 = own.ff.forward(a2)
    out = x1 + h2  # (B, T, E)
    e = Explanation(
        "block", f"TransformerBlock(emb_dim={cfg['emb_dim']}, n_heads={n_heads}), dropout 0", "docs/block.md"
    )
    e.forward = [
        Step("x", x, "", "input (B, T, E)"),
        Step("a1", a1, "eq. 1", "norm1(x)"),
        Step("h1", h1, "eq. 1", "att(a1) (drop_shortcut is the identity at p = 0)"),
        Step("x1", x1, "eq. 1", "x + h1: the first shortcut"),
        Step("a2", a2, "eq. 2", "norm2(x1)"),
        Step("h2", h2, "eq. 2", "ff(a2)"),
        Step("out", out, "eq. 2", "x1 + h2: the second shortcut"),
    ]
    dout = _dout(rng, dout, out.shape, "block")
    dx1_branch = own.norm2.backward(own.ff.backward(dout))
    dx1 = dout + dx1_branch
    dx_branch = own.norm1.backward(own.att.backward(dx1))
    dx = dx1 + dx_branch
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dx1_branch", dx1_branch, "eq. 3", "norm2.backward(ff.backward(dout))"),
        Step("dx1", dx1, "eq. 3", "dout + dx1_branch: dout flows straight through"),
        Step("dx_branch", dx_branch, "eq. 4", "norm1.backward(att.backward(dx1))"),
        Step("dx", dx, "eq. 4", "dx1 + dx_branch"),
    ]
    e.checks.append(("npgpt.TransformerBlock.forward", _diff((block.forward(x), out))))
    dx_m = block.backward(dout)
    pairs = [(p.grad, q.grad) for p, q in zip(block.parameters(), own.parameters())]
    e.checks.append(("npgpt.TransformerBlock.backward", _diff((dx_m, dx), *pairs)))
    return e
