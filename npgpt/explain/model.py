"""`npgpt explain model`: docs/model.md gate by gate for a tiny GPT (one block, dropout on), from
the token ids through the embeddings, the block, final_norm, out_head and the loss, and back to
the embeddings' scatter-adds; every sub-layer by hand with the other explainers' gates, checked
against the reference model's caches, logits, loss and every parameter gradient.
"""

import numpy as np

from .block import _sub, block_backward_gates, block_gates, block_masks
from .layernorm import layernorm_backward_gates, layernorm_gates
from .loss import loss_backward_gates, loss_gates
from .steps import Explanation, Step, _diff, _round_params

TINY = {"vocab_size": 5, "context_length": 3, "emb_dim": 4, "n_heads": 2, "n_layers": 1, "qkv_bias": False}


def explain_model(x=None, seed=0, dout=None, targets=None, drop_rate=0.25):
    from ..loss import CrossEntropyLoss
    from ..model import GPTModel

    rng = np.random.default_rng(seed)
    cfg = dict(TINY, drop_rate=drop_rate)
    V, E = cfg["vocab_size"], cfg["emb_dim"]
    idx = np.asarray([[1, 3, 1]] if x is None else x)
    if idx.dtype.kind not in "iu" or idx.ndim != 2 or idx.shape[1] > cfg["context_length"]:
        raise ValueError(
            f"explain model: the input must be token ids of shape (B, T), T <= {cfg['context_length']}"
        )
    if idx.min() < 0 or idx.max() >= V:
        raise ValueError(f"explain model: token ids must be in [0, {V}), got {idx.tolist()}")
    y = np.asarray(rng.integers(0, V, idx.shape) if targets is None else targets)
    if y.shape != idx.shape or y.dtype.kind not in "iu" or y.min() < 0 or y.max() >= V:
        raise ValueError(f"explain model: targets must be ids in [0, {V}) of shape {idx.shape}")
    B, T = idx.shape
    model = _round_params(GPTModel(cfg, rng=rng), rng)
    P = {name: p.data for name, p in model.named_parameters()}
    logits_m = model.forward(idx)  # the reference first: it draws the dropout masks
    crit = CrossEntropyLoss()
    loss_m = crit.forward(logits_m, y)
    block = model.trf_blocks[0]
    s = 0.0 if drop_rate == 1.0 else 1.0 / (1.0 - drop_rate)
    m0 = model.drop_emb.cache.mask if model.drop_emb.cache.mask is not None else np.ones((B, T, E), bool)

    # forward, gate by gate (docs/model.md g1-g7, then the loss)
    tok = P["tok_emb.weight"][idx]  # (B, T, E)   g1
    pos = P["pos_emb.weight"][:T]  # (T, E)   g2
    h0 = tok + pos  # (B, T, E)   g3
    x0 = h0 * m0 * s  # g4
    fb = block_gates(
        x0, _sub(P, "trf_blocks.0."), cfg["n_heads"], block_masks(block), drop_rate, block.norm1.eps
    )
    xL = fb["out"]  # g5
    fn = layernorm_gates(xL, P["final_norm.scale"], P["final_norm.shift"], model.final_norm.eps, E)
    xn = fn["out"]  # g6
    logits = xn @ P["out_head.weight"].T  # (B, T, V)   g7
    fl = loss_gates(logits.reshape(-1, V), y.reshape(-1))

    title = (
        f"GPTModel: V {V}, context {cfg['context_length']}, E {E}, 2 heads, 1 block, dropout {drop_rate:g}"
    )
    e = Explanation("model", title, "docs/model.md")
    e.forward = [
        Step("in_idx", idx, "", "token ids (B, T)"),
        Step("targets", y, "", "the next tokens"),
        Step("tok_emb.weight", P["tok_emb.weight"], "", "parameter (V, E)"),
        Step("pos_emb.weight", P["pos_emb.weight"], "", "parameter (context, E)"),
        Step("tok", tok, "g1", "tok_emb.weight[in_idx]"),
        Step("pos", pos, "g2", "pos_emb.weight[0:T]"),
        Step("h_0", h0, "g3", "tok + pos (pos broadcast over B)"),
        Step("drop_emb.mask", m0.astype(np.int64), "g4", "drawn by the module"),
        Step("x_0", x0, "g4", f"h_0 * mask * {s:g}"),
        Step("x_L", xL, "g5", "the block (npgpt explain block shows its gates)"),
        Step("final_norm.scale", P["final_norm.scale"], "", "parameter"),
        Step("final_norm.shift", P["final_norm.shift"], "", "parameter"),
        Step("xn", xn, "g6", "final_norm(x_L)"),
        Step("out_head.weight", P["out_head.weight"], "", "parameter (V, E)"),
        Step("logits", logits, "g7", "xn out_head.weight^T (eq. 3)"),
        Step("loss", np.float64(fl["loss"]), "loss", "cross-entropy (npgpt explain loss)"),
    ]

    # backward, gate by gate: the loss, then g7 up to g1
    dlogits = loss_backward_gates(fl, 1.0 if dout is None else float(np.asarray(dout)))["dlogits"].reshape(
        B, T, V
    )
    d_head = dlogits.reshape(-1, V).T @ xn.reshape(-1, E)  # (V, E)   g7
    dxn = dlogits @ P["out_head.weight"]  # (B, T, E)
    bn = layernorm_backward_gates(fn, P["final_norm.scale"], E, dxn)  # g6
    bb = block_backward_gates(fb, _sub(P, "trf_blocks.0."), bn["dx"])  # g5
    dh0 = bb["dx"] * m0 * s  # g4
    dtok, dpos = dh0, dh0.sum(0)  # g3
    d_tok = np.zeros_like(P["tok_emb.weight"])  # g1: scatter-add
    for p, v in enumerate(idx.reshape(-1)):
        d_tok[v] += dtok.reshape(-1, E)[p]
    d_pos = np.zeros_like(P["pos_emb.weight"])  # g2
    d_pos[:T] = dpos
    e.backward = [
        Step("dlogits", dlogits, "loss", "(softmax - onehot) / n (loss eq. 4)"),
        Step("dout_head.weight", d_head, "g7", "dlogits^T xn"),
        Step("dxn", dxn, "g7", "dlogits out_head.weight"),
        Step("dfinal_norm.scale", bn["dscale"], "g6", ""),
        Step("dfinal_norm.shift", bn["dshift"], "g6", ""),
        Step("dx_L", bn["dx"], "g6", "final_norm's backward gates"),
        Step("dx_0", bb["dx"], "g5", "the block's backward gates"),
        Step("dh_0", dh0, "g4", "dx_0 * mask * scale (eq. 4)"),
        Step("dpos", dpos, "g3", "dh_0 summed over the batch (eq. 4)"),
        Step("dpos_emb.weight", d_pos, "g2", "dpos in rows 0..T-1 (eq. 5)"),
        Step("dtok_emb.weight", d_tok, "g1", "scatter-add of dtok = dh_0 (eq. 5)"),
    ]
    grads = {
        "tok_emb.weight": d_tok,
        "pos_emb.weight": d_pos,
        "final_norm.scale": bn["dscale"],
        "final_norm.shift": bn["dshift"],
        "out_head.weight": d_head,
    }
    grads.update({"trf_blocks.0." + k[1:]: v for k, v in bb.items() if k[1:] in _sub(P, "trf_blocks.0.")})
    e.checks.append(
        (
            "npgpt.GPTModel caches: xhat of norm1, final_norm",
            _diff(
                (model.final_norm.cache.xhat, fn["xhat"]),
                (block.norm1.cache.xhat, fb["ln1"]["xhat"]),
            ),
        )
    )
    e.checks.append(("npgpt.GPTModel.forward", _diff((logits_m, logits))))
    e.checks.append(("npgpt.CrossEntropyLoss.forward", abs(loss_m - fl["loss"])))
    d = 1.0 if dout is None else float(np.asarray(dout))
    model.backward(crit.backward(d))
    pairs = [(p.grad, grads[name]) for name, p in model.named_parameters()]
    e.checks.append(("npgpt.GPTModel.backward", _diff(*pairs)))
    return e
