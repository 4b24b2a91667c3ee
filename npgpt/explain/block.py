"""`npgpt explain block`: docs/block.md gate by gate (g1-g8 and back), dropout on with both masks
of `drop_shortcut` (and attention's own), every sub-layer's gates done by hand as on its page,
checked against the reference block's caches, output and every parameter gradient.
`block_gates` and `block_backward_gates` serve the model explainer too.
"""

import numpy as np

from .attention import attention_backward_gates, attention_gates
from .feedforward import feedforward_backward_gates, feedforward_gates
from .layernorm import layernorm_backward_gates, layernorm_gates
from .steps import Explanation, Step, _diff, _dout, _floats, _hand, _keep_mask, _round_params


def _sub(P, prefix):
    return {k[len(prefix) :]: v for k, v in P.items() if k.startswith(prefix)}


def block_gates(x, P, nh, masks, p_drop, eps):
    """The forward gates g1-g8 by hand. P: the block's parameters by name (norm1.scale, ...);
    masks: the keep-masks of att's dropout and of drop_shortcut's two calls (inputs, like x)."""
    E = x.shape[-1]
    s = 0.0 if p_drop == 1.0 else 1.0 / (1.0 - p_drop)
    f = {"x": x, "s": s, "m1": masks["m1"], "m2": masks["m2"]}
    f["ln1"] = layernorm_gates(x, P["norm1.scale"], P["norm1.shift"], eps, E)
    f["a1"] = f["ln1"]["out"]  # g1
    f["att"] = attention_gates(f["a1"], _sub(P, "att."), nh, masks["att"], p_drop)
    f["h1"] = f["att"]["out"]  # g2
    f["h1_d"] = f["h1"] * f["m1"] * s  # g3
    f["x1"] = x + f["h1_d"]  # g4
    f["ln2"] = layernorm_gates(f["x1"], P["norm2.scale"], P["norm2.shift"], eps, E)
    f["a2"] = f["ln2"]["out"]  # g5
    f["ff"] = feedforward_gates(f["a2"], _sub(P, "ff."))
    f["h2"] = f["ff"]["out"]  # g6
    f["h2_d"] = f["h2"] * f["m2"] * s  # g7
    f["out"] = f["x1"] + f["h2_d"]  # g8
    return f


def block_backward_gates(f, P, dout):
    """The backward gates g8-g1 by hand, in that order; parameter gradients named d<name>."""
    E = dout.shape[-1]
    b = {"dout": dout}
    b["dh2"] = dout * f["m2"] * f["s"]  # g8 then g7
    ffb = feedforward_backward_gates(f["ff"], _sub(P, "ff."), b["dh2"])  # g6
    b["da2"] = ffb["dx"]
    ln2 = layernorm_backward_gates(f["ln2"], P["norm2.scale"], E, b["da2"])  # g5
    b["dx1"] = dout + ln2["dx"]  # both ways out of g8 and g5
    b["dh1"] = b["dx1"] * f["m1"] * f["s"]  # g4 then g3
    attb = attention_backward_gates(f["att"], _sub(P, "att."), b["dh1"])  # g2
    b["da1"] = attb["dx"]
    ln1 = layernorm_backward_gates(f["ln1"], P["norm1.scale"], E, b["da1"])  # g1
    b["dx"] = b["dx1"] + ln1["dx"]
    for name in P:
        part, rest = name.split(".", 1)
        src = {"norm1": ln1, "norm2": ln2, "att": attb, "ff": ffb}[part]
        b["d" + name] = src["d" + rest]
    return b


def block_masks(block):
    """The keep-masks the reference block drew in its last forward (inputs to the hand steps)."""
    c = block.cache
    ones = np.ones(c.shape, bool)
    return {
        "att": _keep_mask(block.att.cache.weights(), block.att.cache.weights(dropped=True)),
        "m1": ones if c.drop1.mask is None else c.drop1.mask,
        "m2": ones if c.drop2.mask is None else c.drop2.mask,
    }


def explain_block(x=None, seed=0, dout=None, emb_dim=4, n_heads=2, drop_rate=0.25):
    from ..layers.block import TransformerBlock

    rng = np.random.default_rng(seed)
    x = _floats("block", x, _hand(rng, (1, 3, emb_dim)), 3)
    cfg = {
        "emb_dim": x.shape[-1],
        "context_length": x.shape[1],
        "n_heads": n_heads,
        "drop_rate": drop_rate,
        "qkv_bias": False,
    }
    block = _round_params(TransformerBlock(cfg, rng=rng), rng)
    P = {name: p.data for name, p in block.named_parameters()}
    out_m = block.forward(x)  # the reference first: it draws the dropout masks
    masks = block_masks(block)
    f = block_gates(x, P, n_heads, masks, drop_rate, block.norm1.eps)
    e = Explanation(
        "block",
        f"TransformerBlock(emb_dim={cfg['emb_dim']}, n_heads={n_heads}), dropout {drop_rate:g}",
        "docs/block.md",
    )
    e.forward = [Step("x", x, "", "input (B, T, E)")]
    e.forward += [Step(name, value, "", "parameter") for name, value in P.items()]
    e.forward += [
        Step("a1", f["a1"], "g1", "norm1(x): LayerNorm's gates"),
        Step("h1", f["h1"], "g2", "att(a1): attention's gates, its dropout on"),
        Step("att.keep", masks["att"].astype(np.int64), "g2", "att's dropout mask (drawn by the module)"),
        Step("m1", f["m1"].astype(np.int64), "g3", "drop_shortcut's first mask"),
        Step("h1_d", f["h1_d"], "g3", f"h1 * m1 * {f['s']:g}"),
        Step("x1", f["x1"], "g4", "x + h1_d: the first shortcut (eq. 1)"),
        Step("a2", f["a2"], "g5", "norm2(x1)"),
        Step("h2", f["h2"], "g6", "ff(a2): feed-forward's gates"),
        Step("m2", f["m2"].astype(np.int64), "g7", "drop_shortcut's second mask"),
        Step("h2_d", f["h2_d"], "g7", f"h2 * m2 * {f['s']:g}"),
        Step("out", f["out"], "g8", "x1 + h2_d: the second shortcut (eq. 2)"),
    ]
    dout = _dout(rng, dout, f["out"].shape, "block")
    b = block_backward_gates(f, P, dout)
    grads = lambda part, gate: [  # noqa: E731
        Step("d" + n, b["d" + n], gate, "") for n in P if n.startswith(part)
    ]
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dh2", b["dh2"], "g7", "dout * m2 * scale (g8 passes dout on)"),
        *grads("ff.", "g6"),
        Step("da2", b["da2"], "g6", "ff's backward gates on dh2"),
        *grads("norm2.", "g5"),
        Step("dx1", b["dx1"], "g5", "dout + norm2's backward on da2 (eq. 3)"),
        Step("dh1", b["dh1"], "g3", "dx1 * m1 * scale (g4 passes dx1 on)"),
        *grads("att.", "g2"),
        Step("da1", b["da1"], "g2", "att's backward gates on dh1"),
        *grads("norm1.", "g1"),
        Step("dx", b["dx"], "g1", "dx1 + norm1's backward on da1 (eq. 4)"),
    ]
    c = block.att.cache
    e.checks.append(
        (
            "npgpt.TransformerBlock caches: xhat, att, att_d",
            _diff(
                (block.norm1.cache.xhat, f["ln1"]["xhat"]),
                (block.norm2.cache.xhat, f["ln2"]["xhat"]),
                (c.weights(), f["att"]["att"]),
                (c.weights(dropped=True), f["att"]["att_d"]),
            ),
        )
    )
    e.checks.append(("npgpt.TransformerBlock.forward", _diff((out_m, f["out"]))))
    dx_m = block.backward(dout)
    pairs = [(dx_m, b["dx"])] + [(p.grad, b["d" + n]) for n, p in block.named_parameters()]
    e.checks.append(("npgpt.TransformerBlock.backward", _diff(*pairs)))
    return e
