"""`npgpt reference`'s work: build the model, run one step in float64 and in float32 from the
same float64 parameters, and write the chosen run's tensors with a manifest that gives, per
tensor, npgpt's own float32-vs-float64 error as the yardstick for other float32 code.

File layout and names: docs/reference.md. The step runs on the reference modules
(npgpt/layers, loss.py, model.py) and is recorded by hooks (record.py).
"""

import copy
import hashlib
import json
import math
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..layers.dropout import Dropout
from ..layers.layernorm import LayerNorm
from ..model import GPT_CONFIG_124M, GPTModel
from .record import copy_params_and_grads, record_step
from .tensorfile import st_code, write_safetensors

FORMAT = "npgpt-reference/1"
CFG_KEYS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate", "qkv_bias")


def _sized(E, L, H):
    return {**GPT_CONFIG_124M, "emb_dim": E, "n_layers": L, "n_heads": H}


TINY = {"vocab_size": 61, "context_length": 16, "emb_dim": 8, "n_heads": 2, "n_layers": 2, "drop_rate": 0.0}
CONFIGS = {  # the book's GPT_CONFIG_124M and its ch. 5 sizes; tiny ones for tests and examples
    "gpt2-124m": dict(GPT_CONFIG_124M),
    "gpt2-medium": _sized(1024, 24, 16),
    "gpt2-large": _sized(1280, 36, 20),
    "gpt2-xl": _sized(1600, 48, 25),
    "tiny": {**TINY, "qkv_bias": False},
    "tiny-bias": {**TINY, "qkv_bias": True},
    "tiny-dropout": {**TINY, "qkv_bias": False, "drop_rate": 0.1},
}

# AdamW as `npgpt train` sets it up (npgpt/train.py DEFAULTS), at a constant learning rate
ADAMW = {"lr": 1e-3, "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.1, "grad_clip": 1.0}


class DumpError(InputError):
    """Bad arguments or a size that cannot fit: a one-line message for the CLI (exit 2)."""


def check_config(cfg, where):
    """A cfg dict with GPTModel's keys, checked: -> a clean copy."""
    if not isinstance(cfg, dict):
        raise DumpError(f"{where}: expected a JSON object with keys {', '.join(CFG_KEYS)}")
    missing = [k for k in CFG_KEYS if k not in cfg and k != "qkv_bias"]
    if missing:
        raise DumpError(f"{where}: missing key(s) {', '.join(missing)}")
    out = {}
    for k in ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers"):
        v = cfg[k]
        if not (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 10**7):
            raise DumpError(f"{where}: {k} must be an integer in [1, 10^7], got {v!r}")
        out[k] = v
    if out["emb_dim"] % out["n_heads"]:
        raise DumpError(f"{where}: emb_dim {out['emb_dim']} is not divisible by n_heads {out['n_heads']}")
    d = cfg["drop_rate"]
    if not (isinstance(d, (int, float)) and not isinstance(d, bool) and 0.0 <= d < 1.0):
        raise DumpError(f"{where}: drop_rate must be a number in [0, 1), got {d!r}")
    out["drop_rate"] = float(d)
    q = cfg.get("qkv_bias", False)
    if not isinstance(q, bool):
        raise DumpError(f"{where}: qkv_bias must be true or false, got {q!r}")
    out["qkv_bias"] = q
    return out


def n_params(cfg, tied=False):
    """The parameter count from the cfg alone (before anything is allocated)."""
    V, L, E, nl = cfg["vocab_size"], cfg["context_length"], cfg["emb_dim"], cfg["n_layers"]
    att = 4 * E * E + E + (3 * E if cfg["qkv_bias"] else 0)
    ff = 8 * E * E + 5 * E
    block = att + ff + 4 * E
    return V * E + L * E + nl * block + 2 * E + (0 if tied else V * E)


def estimate_bytes(cfg, B, T, adamw_steps=0, tied=False):
    """Peak memory of a dump, counted from what it keeps alive (docs/reference.md, "Memory")."""
    P, E, V, L, nh = n_params(cfg, tied), cfg["emb_dim"], cfg["vocab_size"], cfg["n_layers"], cfg["n_heads"]
    BT = B * T
    # both runs (float64 and float32): parameters and gradients; the recorded activations and
    # their gradients (about 19 (B, T, E) arrays each per block); logits, the loss's exp, their
    # gradient, the head's gradient scratch; attention's (B, nh, T, T) weights
    per_run = 2 * P + 2 * (19 * L + 8) * BT * E + 5 * BT * V + V * E + 3 * B * nh * T * T
    total = per_run * (8 + 4)
    total += L * cfg["context_length"] ** 2 * 4 * 2  # the causal masks, float32, in both models
    if adamw_steps:
        total += P * (8 + 4) * 2 + P * (8 + 4) * 2  # AdamW's two moments, the step's copies
    return int(total * 1.1)


def mem_total():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def build_inputs(cfg, B, T, seed, tokens=None):
    """(ids, targets) (B, T) int64: drawn with `seed` from [0, vocab_size), or cut from `tokens`
    (row b is tokens[b*T : b*T + T], its targets the next tokens)."""
    if tokens is None:
        rng = np.random.default_rng([seed, 1])
        return rng.integers(0, cfg["vocab_size"], (B, T)), rng.integers(0, cfg["vocab_size"], (B, T))
    tokens = np.asarray(tokens, np.int64)
    if len(tokens) < B * T + 1:
        raise DumpError(f"--text gives {len(tokens)} tokens; --batch {B} --seq-len {T} needs {B * T + 1}")
    ids = tokens[: B * T].reshape(B, T)
    targets = tokens[1 : B * T + 1].reshape(B, T)
    return ids, targets


def normwise(a, ref):
    """||a - ref|| / ||ref|| in float64 (0 when both are 0, inf when only ref is 0)."""
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    d = float(np.linalg.norm((a - ref).ravel()))
    n = float(np.linalg.norm(ref.ravel()))
    return 0.0 if d == 0.0 else (d / n if n > 0 else math.inf)


def _adamw_steps(model, ids, targets, steps):
    from ..loss import CrossEntropyLoss
    from ..optim import AdamW, clip_grad_norm, decay_groups

    opt = AdamW(
        decay_groups(model, ADAMW["weight_decay"]),
        lr=ADAMW["lr"],
        betas=tuple(ADAMW["betas"]),
        eps=ADAMW["eps"],
    )
    loss_fn = CrossEntropyLoss()
    for i in range(steps):
        if i > 0:  # the first step uses the recorded step's gradients
            model.zero_grad()
            loss_fn.forward(model.forward(ids), targets)
            model.backward(loss_fn.backward(1.0))
        clip_grad_norm(model.parameters(), ADAMW["grad_clip"])
        opt.step()
    return {f"param_after/{k}": p.data for k, p in model.named_parameters(remove_duplicate=False)}


def make_model(
    cfg, seed, scale_weights=1.0, state_dict=None, tied=False, keep_dropout=False, model=None, perturb=0.0
):
    """The float64 master model: GPTModel(cfg, rng=seed) (or `model`, e.g. Hugging Face's),
    weights loaded from `state_dict`, scaled by `scale_weights`; dropout off unless keep_dropout."""
    if model is None:
        cfg = dict(cfg, drop_rate=cfg["drop_rate"] if keep_dropout else 0.0)
        model = GPTModel(cfg, rng=seed)
        if tied:
            model.out_head.weight = model.tok_emb.weight
    elif not keep_dropout:
        model.cfg["drop_rate"] = 0.0
        for _, mod in model.named_modules():
            if isinstance(mod, Dropout):
                mod.p = 0.0
    if perturb:  # LayerNorm scale and shift away from 1 and 0, so that forgetting them shows
        rng = np.random.default_rng([seed or 0, 2])
        for _, mod in model.named_modules():
            if isinstance(mod, LayerNorm):
                mod.scale.data += perturb * rng.standard_normal(mod.scale.data.shape)
                mod.shift.data += perturb * rng.standard_normal(mod.shift.data.shape)
    if state_dict is not None:
        own = dict(model.named_parameters(remove_duplicate=False))
        missing = [k for k in own if k not in state_dict]
        if missing:
            raise RuntimeError(f"no tensor for {len(missing)} parameter(s): {', '.join(missing[:4])}")
        model.load_state_dict(
            {k: np.asarray(v, np.float64) for k, v in state_dict.items() if k in own}, strict=False
        )
    if scale_weights != 1.0:
        for p in model.parameters():
            p.data *= float(scale_weights)
    return model.train()


def run_reference(model64, ids, targets, dtype, adamw_steps=0):
    """Run the step in float64 and float32 from the same float64 parameters ->
    (tensors of the `dtype` run, phase per name, yardstick per name)."""
    model32 = copy.deepcopy(model64).astype(np.float32)  # same weights rounded, same dropout draws
    rec64 = record_step(model64, ids, targets)
    rec32 = record_step(model32, ids, targets)
    after = {}
    if adamw_steps:
        copy_params_and_grads(rec64)
        copy_params_and_grads(rec32)
        after = {
            64: _adamw_steps(model64, ids, targets, adamw_steps),
            32: _adamw_steps(model32, ids, targets, adamw_steps),
        }
    if list(rec64.tensors) != list(rec32.tensors):
        raise RuntimeError("the float32 and float64 steps recorded different tensors")
    yard = {}
    for name, a in rec64.tensors.items():
        yard[name] = normwise(rec32.tensors[name], a) if a.dtype.kind == "f" else 0.0
    chosen = rec64 if np.dtype(dtype) == np.float64 else rec32
    tensors, phase = dict(chosen.tensors), dict(chosen.phase)
    if adamw_steps:
        bits = 64 if np.dtype(dtype) == np.float64 else 32
        for name, a in after[bits].items():
            tensors[name], phase[name] = a, "update"
            yard[name] = normwise(after[32][name], after[64][name])
    return tensors, phase, yard


def sha256(a):
    a = np.asarray(a)
    le = a.dtype.newbyteorder("<") if a.dtype.itemsize > 1 else a.dtype
    return hashlib.sha256(memoryview(np.ascontiguousarray(a, le).reshape(-1)).cast("B")).hexdigest()


def write_dump(out, tensors, phase, yard, meta):
    """Write OUT (.safetensors or .npz) and OUT.json beside it -> the manifest dict."""
    out = Path(out)
    entries = []
    order = {"forward": 0, "backward": 0, "update": 0}
    for name, a in tensors.items():
        a = np.asarray(a)
        ph = phase[name]
        entries.append(
            {
                "name": name,
                "shape": list(a.shape),
                "dtype": a.dtype.name,
                "st_dtype": st_code(a.dtype),
                "sha256": sha256(a),
                "phase": ph,
                "order": order[ph],
                "f32_vs_f64": yard.get(name) if a.dtype.kind == "f" else None,
            }
        )
        order[ph] += 1
    manifest = {"format": FORMAT, **meta, "data_file": out.name, "tensors": entries}
    if out.suffix == ".npz":
        np.savez(out, **{n: np.asarray(a) for n, a in tensors.items()})
    else:
        write_safetensors(out, tensors, {"format": FORMAT, "manifest": out.with_suffix(".json").name})
    out.with_suffix(".json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest
