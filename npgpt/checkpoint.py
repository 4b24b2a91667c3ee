"""Checkpoints without pickle: `NAME.npz` holds the arrays, `NAME.json` everything else.

    NAME.npz   model.<state_dict key>      the model's weights and buffers
               optim.<param index>.<name>  the optimizer's per-parameter arrays (exp_avg, ...)
    NAME.json  {"format", "config", "tokenizer", "step", "optimizer": {param_groups, scalar
               state}, "rng": {name: bit-generator state}, "extra": {...}, "sha256"}

Arrays are read back with `np.load(..., allow_pickle=False)`, so loading a checkpoint never
runs code. Both files are written to temporary names and renamed, so an interrupted save
leaves the previous checkpoint intact.

`sha256` is the SHA-256 of every array (name, dtype, shape and bytes, in name order) and of
the rest of the JSON (keys sorted), checked on every load: a flipped byte, a truncated file,
or an `.npz` and a `.json` from two different saves is a CheckpointError naming the file,
never a model with silently wrong weights.
"""

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from .errors import CheckpointError

FORMAT = "npgpt-checkpoint-2"
OLD_FORMATS = ("npgpt-checkpoint-1",)  # no checksum; not loaded
NAMES = ("ckpt", "last")  # what `npgpt train` writes: the best validation loss, the latest save
MODEL_KEYS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate", "qkv_bias")

__all__ = [
    "CheckpointError",
    "checksum",
    "exists",
    "load_checkpoint",
    "load_model",
    "resolve",
    "restore_rng",
    "save_checkpoint",
]


def _paths(directory, name):
    d = Path(directory)
    return d / f"{name}.npz", d / f"{name}.json"


def checksum(arrays, meta):
    """SHA-256 (hex) of `arrays` (name -> ndarray) and `meta` (a JSON-ready dict; its own
    "sha256" key is left out)."""
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(json.dumps([k, a.dtype.str, list(a.shape)]).encode())
        h.update(a.tobytes())
    rest = {k: v for k, v in meta.items() if k != "sha256"}
    h.update(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()


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
    meta = json.loads(json.dumps(meta))  # the form it will be read back in (tuples -> lists, ...)
    meta["sha256"] = checksum(arrays, meta)
    tmp_npz = npz_path.with_name(npz_path.name + ".tmp.npz")
    tmp_json = json_path.with_name(json_path.name + ".tmp")
    with open(tmp_npz, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    with open(tmp_json, "w", encoding="utf-8") as f:
        f.write(json.dumps(meta, indent=1))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp_npz, npz_path)
    os.replace(tmp_json, json_path)
    return npz_path, json_path


def exists(directory, name):
    return all(p.is_file() for p in _paths(directory, name))


def _read_json(path):
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}): the file is damaged or truncated") from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read it ({e.strerror or e})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path} holds a JSON {type(meta).__name__}, not a checkpoint's object")
    fmt = meta.get("format")
    if fmt in OLD_FORMATS:
        raise CheckpointError(
            f"{path} has the old format {fmt!r}, which carries no checksum; "
            f"retrain, or load it in Python with load_checkpoint(..., verify=False)"
        )
    if fmt != FORMAT:
        raise CheckpointError(f"{path} has format {fmt!r}, expected {FORMAT!r}: not an npgpt checkpoint")
    return meta


def _read_npz(path):
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read it ({e.strerror or e})") from None
    if magic != b"PK\x03\x04":
        raise CheckpointError(f"{path} is not an .npz archive (no zip signature): the file is damaged")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:  # BadZipFile, EOFError, ValueError, zlib.error, OSError, ...: all damage
        raise CheckpointError(
            f"{path} cannot be read as an .npz archive ({type(e).__name__}: {e}): "
            "the file is damaged or truncated"
        ) from None


def _check_meta(meta, path):
    """The structure `load_model` and `train --resume` rely on, checked before they use it."""

    def need(ok, what):
        if not ok:
            raise CheckpointError(f"{path}: {what}")

    need(isinstance(meta.get("config"), dict), "'config' is missing or not an object")
    model = meta["config"].get("model")
    need(isinstance(model, dict), "'config.model' is missing or not an object")
    missing = [k for k in MODEL_KEYS if k not in model]
    need(not missing, f"'config.model' lacks {missing}")
    for k in ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers"):
        v = model[k]
        need(isinstance(v, int) and not isinstance(v, bool) and v >= 1, f"config.model.{k} = {v!r}")
    need(model["emb_dim"] % model["n_heads"] == 0, "config.model.emb_dim is not divisible by n_heads")
    step = meta.get("step")
    need(isinstance(step, int) and not isinstance(step, bool) and step >= 0, f"'step' = {step!r}")
    need(isinstance(meta.get("extra", {}), dict), "'extra' is not an object")
    need(isinstance(meta.get("rng", {}), dict), "'rng' is not an object")
    tok = meta.get("tokenizer")
    need(tok is None or isinstance(tok, dict), "'tokenizer' is not an object")


def load_checkpoint(directory, name, verify=True):
    """-> (meta dict, model state_dict, optimizer state_dict or None). No pickle.

    Every problem with the files (missing, unreadable, truncated, not an archive, a checksum
    that does not match, a structure that is not a checkpoint's) is a CheckpointError whose
    message names the file. `verify=False` skips the checksum (and accepts the old format
    that has none): for inspecting a damaged file, never for training on it.
    """
    npz_path, json_path = _paths(directory, name)
    d = Path(directory)
    if not d.is_dir():
        raise CheckpointError(f"{d}: {'not a directory' if d.exists() else 'no such directory'}")
    for p in (npz_path, json_path):
        if not p.is_file():
            raise CheckpointError(f"{p} does not exist (a checkpoint is {name}.npz and {name}.json)")
    if verify:
        meta = _read_json(json_path)
    else:
        try:
            meta = json.loads(json_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, OSError) as e:
            raise CheckpointError(f"{json_path} cannot be read ({e})") from None
    arrays = _read_npz(npz_path)
    if verify:
        saved = meta.get("sha256")
        if not isinstance(saved, str):
            raise CheckpointError(f"{json_path} has no checksum ('sha256')")
        if checksum(arrays, meta) != saved:
            raise CheckpointError(
                f"{npz_path} and {json_path} do not match their checksum: one of them is damaged, "
                "or they come from two different saves"
            )
    _check_meta(meta, json_path)
    model_sd = {k[len("model.") :]: v for k, v in arrays.items() if k.startswith("model.")}
    optim_sd = None
    if "optimizer" in meta:
        try:
            state = {}
            for k, v in arrays.items():
                if k.startswith("optim."):
                    _, i, field = k.split(".", 2)
                    state.setdefault(int(i), {})[field] = v
            for i, s in meta["optimizer"]["scalars"].items():
                state.setdefault(int(i), {}).update(s)
            optim_sd = {"state": state, "param_groups": list(meta["optimizer"]["param_groups"])}
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            raise CheckpointError(f"{json_path}: the optimizer state is malformed ({e!r})") from None
    return meta, model_sd, optim_sd


def restore_rng(meta, generators):
    """Set each np.random.Generator in `generators` (name -> Generator) to its saved state."""
    saved = meta.get("rng", {})
    missing = [k for k in generators if k not in saved]
    if missing:
        raise KeyError(f"restore_rng: the checkpoint has no state for {missing} (it has {sorted(saved)})")
    for k, g in generators.items():
        g.bit_generator.state = saved[k]


def build_model(meta, model_sd, where):
    """A GPTModel of the checkpoint's config holding `model_sd`; any mismatch (a missing or an
    extra key, a shape, a dtype) is a CheckpointError naming `where`."""
    from .model import GPTModel

    cfg = meta["config"]["model"]
    try:
        model = GPTModel(cfg, rng=0)
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{where}: config.model {cfg} does not build a GPTModel ({e})") from None
    expected = model.state_dict()
    missing = sorted(expected.keys() - model_sd.keys())
    unexpected = sorted(model_sd.keys() - expected.keys())
    if missing or unexpected:
        raise CheckpointError(
            f"{where}: the arrays do not fit config.model (missing {missing[:3]}"
            f"{'...' if len(missing) > 3 else ''}, unexpected {unexpected[:3]}"
            f"{'...' if len(unexpected) > 3 else ''})"
        )
    dtypes = {v.dtype for k, v in model_sd.items() if not k.endswith(".mask")}  # the mask is a buffer
    if len(dtypes) != 1 or next(iter(dtypes)) not in (np.float32, np.float64):
        raise CheckpointError(
            f"{where}: model arrays have dtypes {sorted(map(str, dtypes))}, expected one float"
        )
    for k, v in expected.items():
        if model_sd[k].shape != v.shape:
            raise CheckpointError(
                f"{where}: model.{k} has shape {model_sd[k].shape}, config.model needs {v.shape}"
            )
        if not np.isfinite(model_sd[k]).all():
            raise CheckpointError(f"{where}: model.{k} holds NaN or inf")
        if k.endswith(".mask") and not np.array_equal(model_sd[k], v):
            raise CheckpointError(f"{where}: model.{k} is not the causal mask")
    model.astype(next(iter(dtypes)))
    model.load_state_dict(model_sd)
    return model


def resolve(path, last=False):
    """-> (directory, name) of the checkpoint `path` names: an out dir (its best `ckpt`, or
    `last` when `last` is True), or one checkpoint (DIR/NAME, DIR/NAME.npz or DIR/NAME.json).
    A missing `ckpt` is an error: `last` is used only when asked for."""
    p = Path(path)
    if p.is_dir():
        name = "last" if last else "ckpt"
        if not exists(p, name):
            others = [n for n in NAMES if n != name and exists(p, n)]
            hint = f"; it has `{others[0]}`: pass --checkpoint {p / others[0]}" if others else ""
            if name == "ckpt" and others == ["last"]:
                hint += " or --last"
            raise CheckpointError(f"{p} has no checkpoint `{name}` ({name}.npz and {name}.json){hint}")
        return p, name
    if last:
        raise CheckpointError(f"{p}: --last takes an out dir, not a checkpoint file")
    if p.suffix in (".npz", ".json"):
        p = p.with_suffix("")
    if p.parent.is_dir() and (exists(p.parent, p.name) or p.with_suffix(".json").is_file()):
        return p.parent, p.name
    raise CheckpointError(f"{path}: no such checkpoint or directory")


def load_model(directory, name="ckpt"):
    """-> (GPTModel in eval mode, CharTokenizer, meta) of checkpoint `name` (default: `ckpt`,
    the best validation loss) in `directory`. Errors are CheckpointErrors naming the file."""
    from .data import CharTokenizer

    meta, model_sd, _ = load_checkpoint(directory, name)
    npz_path, json_path = _paths(directory, name)
    model = build_model(meta, model_sd, npz_path)
    try:
        tok = CharTokenizer.from_dict(meta["tokenizer"] or {})
    except (ValueError, TypeError, KeyError) as e:
        raise CheckpointError(f"{json_path}: the tokenizer is malformed ({e})") from None
    if tok.vocab_size != meta["config"]["model"]["vocab_size"]:
        raise CheckpointError(
            f"{json_path}: the tokenizer has {tok.vocab_size} characters, the model "
            f"{meta['config']['model']['vocab_size']}"
        )
    return model.eval(), tok, meta
