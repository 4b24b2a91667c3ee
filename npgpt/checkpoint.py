"""Checkpoints without pickle: `NAME.npz` holds the arrays, `NAME.json` everything else.

    NAME.npz   model.<state_dict key>      the model's weights and buffers
               optim.<param index>.<name>  the optimizer's per-parameter arrays (exp_avg, ...)
    NAME.json  {"format", "config", "tokenizer", "step", "optimizer": {param_groups, scalar
               state}, "rng": {name: bit-generator state}, "extra": {...}}

Arrays are read back with `np.load(..., allow_pickle=False)`, so loading a checkpoint never
runs code. Both files are written to temporary names and renamed, so an interrupted save
leaves the previous checkpoint intact.
"""

import json
import os
from pathlib import Path

import numpy as np

FORMAT = "npgpt-checkpoint-1"


def _paths(directory, name):
    d = Path(directory)
    return d / f"{name}.npz", d / f"{name}.json"


def save_checkpoint(
    directory, name, model, config, tokenizer=None, optimizer=None, step=0, rng=None, extra=None
):
    """Write NAME.npz and NAME.json into `directory`. `rng` maps names to np.random.Generators."""
    npz_path, json_path = _paths(directory, name)
    npz_path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {f"model.{k}": v for k, v in model.state_dict().items()}
    meta = {"format": FORMAT, "config": config, "step": int(step), "extra": extra or {}}
    meta["tokenizer"] = tokenizer.to_dict() if tokenizer is not None else None
    if optimizer is not None:
        sd = optimizer.state_dict()
        scalars = {}
        for i, s in sd["state"].items():
            for k, v in s.items():
                if isinstance(v, np.ndarray):
                    arrays[f"optim.{i}.{k}"] = v
                else:
                    scalars.setdefault(str(i), {})[k] = v
        meta["optimizer"] = {"param_groups": sd["param_groups"], "scalars": scalars}
    meta["rng"] = {k: g.bit_generator.state for k, g in (rng or {}).items()}
    tmp_npz = npz_path.with_name(npz_path.name + ".tmp.npz")
    tmp_json = json_path.with_name(json_path.name + ".tmp")
    with open(tmp_npz, "wb") as f:
        np.savez(f, **arrays)
    tmp_json.write_text(json.dumps(meta, indent=1))
    os.replace(tmp_npz, npz_path)
    os.replace(tmp_json, json_path)
    return npz_path, json_path


def exists(directory, name):
    return all(p.is_file() for p in _paths(directory, name))


def load_checkpoint(directory, name):
    """-> (meta dict, model state_dict, optimizer state_dict or None). No pickle."""
    npz_path, json_path = _paths(directory, name)
    for p in (npz_path, json_path):
        if not p.is_file():
            raise FileNotFoundError(
                f"load_checkpoint: {p} does not exist (expected {name}.npz and {name}.json)"
            )
    meta = json.loads(json_path.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(
            f"load_checkpoint: {json_path} has format {meta.get('format')!r}, expected {FORMAT!r}"
        )
    with np.load(npz_path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    model_sd = {k[len("model.") :]: v for k, v in arrays.items() if k.startswith("model.")}
    optim_sd = None
    if "optimizer" in meta:
        state = {}
        for k, v in arrays.items():
            if k.startswith("optim."):
                _, i, field = k.split(".", 2)
                state.setdefault(int(i), {})[field] = v
        for i, s in meta["optimizer"]["scalars"].items():
            state.setdefault(int(i), {}).update(s)
        optim_sd = {"state": state, "param_groups": meta["optimizer"]["param_groups"]}
    return meta, model_sd, optim_sd


def restore_rng(meta, generators):
    """Set each np.random.Generator in `generators` (name -> Generator) to its saved state."""
    saved = meta.get("rng", {})
    missing = [k for k in generators if k not in saved]
    if missing:
        raise KeyError(f"restore_rng: the checkpoint has no state for {missing} (it has {sorted(saved)})")
    for k, g in generators.items():
        g.bit_generator.state = saved[k]


def load_model(directory, name=None):
    """-> (GPTModel in eval mode, CharTokenizer, meta) from `directory`: its `ckpt` (best
    validation loss), or `last` when there is no `ckpt`, or `name` when given."""
    from .data import CharTokenizer
    from .model import GPTModel

    if name is None:
        name = "ckpt" if exists(directory, "ckpt") else "last"
    meta, model_sd, _ = load_checkpoint(directory, name)
    model = GPTModel(meta["config"]["model"], rng=0)
    model.astype(next(iter(model_sd.values())).dtype)
    model.load_state_dict(model_sd)
    return model.eval(), CharTokenizer.from_dict(meta["tokenizer"]), meta
