"""The training loop: nanoGPT's `train.py` for a character-level GPT, in NumPy.

Each iteration: a seeded random batch, forward, cross-entropy, backward, global-norm gradient
clipping, AdamW at the learning rate of the warm-up + cosine schedule. Every `eval_interval`
iterations (and at the end) the mean loss over `eval_iters` batches of each split is measured;
a better validation loss saves `ckpt`, and every evaluation (and Ctrl-C) saves `last`, which
`resume=True` continues from so that the loss curve is the uninterrupted run's.

An out dir that already holds a checkpoint is never overwritten unless asked: `resume=True`
continues it, `force=True` starts over in it, anything else is an InputError. A run stopped
early (Ctrl-C, `should_stop`) measures the loss of the model it stopped with, on batches of its
own, so the saved state and a resumed run are those of the uninterrupted run.

Initialization: the book's layers draw Embedding weights from N(0, 1) and Linear weights as
PyTorch's nn.Linear does. For training from scratch npgpt re-initializes as nanoGPT and GPT-2
do (`init="nanogpt"`, the default): every weight N(0, 0.02), biases zero, and the two
projections that write into the residual stream (att.out_proj, ff.layers.2) N(0, 0.02 /
sqrt(2 * n_layer)). `init="book"` keeps the book's.
"""

import math
import os
import signal
import time

import numpy as np

from . import checkpoint
from .data import get_batch, prepare
from .errors import CheckpointError, DataError, InputError
from .fast import accelerate
from .layers.dropout import Dropout
from .layers.embedding import Embedding
from .layers.linear import Linear
from .loss import CrossEntropyLoss
from .model import GPTModel
from .optim import AdamW, clip_grad_norm, cosine_lr, decay_groups
from .progress import Progress, plot_unavailable, save_loss_plot, stop_flag

DEFAULTS = {  # nanoGPT's CPU run of shakespeare_char (its README)
    "block_size": 64,
    "batch_size": 12,
    "n_layer": 4,
    "n_head": 4,
    "n_embd": 128,
    "max_iters": 2000,
    "learning_rate": 1e-3,
    "min_lr": 1e-4,
    "warmup_iters": 100,
    "lr_decay_iters": 2000,
    "dropout": 0.0,
    "weight_decay": 0.1,
    "beta1": 0.9,
    "beta2": 0.99,
    "grad_clip": 1.0,
    "eval_interval": 250,
    "eval_iters": 20,
    "seed": 1337,
    "out_dir": "out",
    "resume": False,
    "force": False,
    "threads": None,
    "data": None,
    "dtype": "float32",
    "init": "nanogpt",
    "fast": True,
}


def init_nanogpt(model, rng):
    """Re-initialize `model` in place as nanoGPT / GPT-2 do (see the module docstring)."""
    std_proj = 0.02 / math.sqrt(2 * model.cfg["n_layers"])
    for name, mod in model.named_modules():
        if isinstance(mod, (Linear, Embedding)):
            proj = name.endswith("att.out_proj") or name.endswith("ff.layers.2")
            w = mod.weight
            w.data = (rng.standard_normal(w.data.shape) * (std_proj if proj else 0.02)).astype(w.data.dtype)
            if isinstance(mod, Linear) and mod.bias is not None:
                mod.bias.data = np.zeros_like(mod.bias.data)
    return model


def dropout_generators(model):
    """name -> np.random.Generator of each distinct Dropout generator (saved for resuming)."""
    gens, seen = {}, set()
    for name, mod in model.named_modules():
        if isinstance(mod, Dropout) and id(mod.rng) not in seen:
            seen.add(id(mod.rng))
            gens[f"dropout:{name}"] = mod.rng
    return gens


def estimate_loss(model, splits, cfg, rng, should_stop=None):
    """Mean loss over cfg["eval_iters"] batches of each split, in eval mode. When
    `should_stop()` turns True between batches, KeyboardInterrupt."""
    model.eval()
    ce, out, T = CrossEntropyLoss(), {}, model.cfg["context_length"]
    if cfg.get("fast"):
        accelerate(ce)
    try:
        for name, data in splits.items():
            losses = []
            for _ in range(cfg["eval_iters"]):
                if should_stop is not None and should_stop():
                    raise KeyboardInterrupt
                x, y = get_batch(data, T, cfg["batch_size"], rng)
                losses.append(ce.forward(model.forward(x), y))
            out[name] = float(np.mean(losses))
    finally:
        model.train()
    return out


def check_out_dir(out_dir, resume=False, force=False):
    """An InputError unless `out_dir` may be written: it is not a file, and a checkpoint in it
    is continued (`resume`) or overwritten on purpose (`force`)."""
    if not out_dir:
        raise InputError("--out-dir is empty; name a directory (`.` for this one)")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise InputError(f"--out-dir {out_dir} is a file, not a directory")
    found = [
        f"{n}{ext}"
        for n in checkpoint.NAMES
        for ext in (".npz", ".json")
        if os.path.exists(f"{out_dir}/{n}{ext}")
    ]
    if resume and not checkpoint.exists(out_dir, "last"):
        raise InputError(
            f"--resume: {out_dir} has no checkpoint `last` (last.npz and last.json) to resume from"
        )
    if found and not (resume or force):
        raise InputError(
            f"{out_dir} already holds a checkpoint ({', '.join(found)}): --resume continues it, "
            "--force overwrites it, or choose another --out-dir"
        )
    try:  # a directory that cannot be made fails now, not at the first save after training
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise InputError(f"--out-dir {out_dir}: cannot create it: {e.strerror}") from None


def _resume_state(out_dir):
    """-> (meta, model state dict, optimizer state dict, the path to name in errors) of `last`."""
    meta, model_sd, optim_sd = checkpoint.load_checkpoint(out_dir, "last")
    where = f"{out_dir}/last.json"
    ex = meta["extra"]
    for k in ("curve", "evals", "best_val", "evaluated"):
        if k not in ex:
            raise CheckpointError(f"{where}: extra.{k} is missing: not a checkpoint written by `npgpt train`")
    if optim_sd is None or meta.get("tokenizer") is None:
        raise CheckpointError(
            f"{where}: no optimizer state or tokenizer: not a checkpoint written by `npgpt train`"
        )
    return meta, model_sd, optim_sd


def _loss_at_stop(model, train_ids, val_ids, cfg, it, flag):
    """The loss of the model a run stopped with: estimate_loss on batches of a generator of its
    own (seeded by the seed and the step), so the run's saved streams are untouched. None when
    a second Ctrl-C cuts it short."""
    flag.clear()
    rng = np.random.default_rng([cfg["seed"], 4, it])
    splits = {"train": train_ids, "val": val_ids}
    try:
        return estimate_loss(model, splits, cfg, rng, should_stop=flag.is_set)
    except KeyboardInterrupt:
        return None


def train(cfg=None, should_stop=None, progress=True, log=print):
    """Train a char-level GPT with `cfg` (DEFAULTS overridden); returns a summary dict.

    `should_stop(it)` is called after each iteration; True saves `last` and returns, like Ctrl-C.
    The summary's `train_loss`/`val_loss` were measured at step `eval_step`: the final step,
    unless a second Ctrl-C cut short the measurement at the stop.
    """
    cfg = {**DEFAULTS, **(cfg or {})}
    dtype = np.dtype(cfg["dtype"])
    out_dir, T, B = cfg["out_dir"], cfg["block_size"], cfg["batch_size"]
    check_out_dir(out_dir, cfg["resume"], cfg["force"])
    meta = None
    if cfg["resume"]:
        meta, model_sd, optim_sd = _resume_state(out_dir)
        model_cfg = meta["config"]["model"]
        T = model_cfg["context_length"]
    tok, train_ids, val_ids = prepare(cfg["data"], meta["tokenizer"] if meta else None)
    for split, ids in (("training", train_ids), ("validation", val_ids)):
        if len(ids) < T + 1:
            raise DataError(
                f"{cfg['data'] or 'the embedded corpus'}: its {split} split has {len(ids)} characters, "
                f"fewer than --block-size + 1 = {T + 1}; use a longer text or a smaller --block-size"
            )
    if not cfg["resume"]:
        model_cfg = {
            "vocab_size": tok.vocab_size,
            "context_length": T,
            "emb_dim": cfg["n_embd"],
            "n_heads": cfg["n_head"],
            "n_layers": cfg["n_layer"],
            "drop_rate": cfg["dropout"],
            "qkv_bias": False,
        }
    model = GPTModel(model_cfg, rng=cfg["seed"])
    if cfg["init"] == "nanogpt":
        init_nanogpt(model, np.random.default_rng([cfg["seed"], 1]))
    model.astype(dtype)
    if meta is not None:  # the checkpoint's dtype, shapes and values, or a CheckpointError
        dtype = checkpoint.build_model(meta, model_sd, f"{out_dir}/last.npz").dtype
        model.astype(dtype)
    if cfg["fast"]:  # the fast path, same parameters and results (npgpt/fast/)
        accelerate(model, threads=cfg["threads"])
    betas, seed = (cfg["beta1"], cfg["beta2"]), cfg["seed"]
    opt = AdamW(decay_groups(model, cfg["weight_decay"]), lr=cfg["learning_rate"], betas=betas, eps=1e-8)
    # independent streams for the batches, the evaluation batches and dropout, all saved
    rngs = {"batch": np.random.default_rng([seed, 2]), "eval": np.random.default_rng([seed, 3])}
    rngs.update(dropout_generators(model))
    it, curve, evals, best, evaluated = 0, [], [], math.inf, -1
    if meta is not None:
        model.load_state_dict(model_sd)
        try:
            opt.load_state_dict(optim_sd)
            checkpoint.restore_rng(meta, rngs)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise CheckpointError(
                f"{out_dir}/last: the optimizer or RNG state does not fit the model ({e})"
            ) from None
        it, ex = meta["step"], meta["extra"]
        curve, evals, best, evaluated = ex["curve"], ex["evals"], ex["best_val"], ex["evaluated"]
    config = {"model": model_cfg, "train": cfg}

    def save(name):
        extra = {"curve": curve, "evals": evals, "best_val": best, "evaluated": evaluated}
        checkpoint.save_checkpoint(out_dir, name, model, config, tok, opt, it, rngs, extra)

    ce, tokens, train_time, t_start = CrossEntropyLoss(), 0, 0.0, time.perf_counter()
    stop_losses = None
    if cfg["fast"]:
        accelerate(ce)
    flag, old_handler = stop_flag()
    bar = Progress(cfg["max_iters"], it, enabled=progress, log=log)
    try:
        while True:
            lr = cosine_lr(
                it, cfg["learning_rate"], cfg["min_lr"], cfg["warmup_iters"], cfg["lr_decay_iters"]
            )
            if (it % cfg["eval_interval"] == 0 or it == cfg["max_iters"]) and evaluated != it:
                losses = estimate_loss(model, {"train": train_ids, "val": val_ids}, cfg, rngs["eval"])
                evals.append([it, losses["train"], losses["val"]])
                evaluated = it
                bar.write(f"step {it}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
                if losses["val"] < best:
                    best = losses["val"]
                    save("ckpt")
                save("last")
            if it >= cfg["max_iters"]:
                break
            for g in opt.param_groups:
                g["lr"] = lr
            t0 = time.perf_counter()
            x, y = get_batch(train_ids, T, B, rngs["batch"])
            loss = ce.forward(model.forward(x), y)
            model.zero_grad()
            model.backward(ce.backward())
            if cfg["grad_clip"] > 0.0:
                clip_grad_norm(model.parameters(), cfg["grad_clip"])
            opt.step()
            train_time += time.perf_counter() - t0
            tokens += B * T
            curve.append([it, loss])
            it += 1
            bar.update(loss=loss, lr=lr, tok_s=tokens / train_time)
            if flag.is_set() or (should_stop is not None and should_stop(it)):
                bar.close()
                bar.write(f"stopping at step {it}: saving {out_dir}/last (resume with --resume)")
                save("last")
                if evaluated != it:
                    bar.write(f"measuring the loss at step {it} (Ctrl-C again to skip)")
                    stop_losses = _loss_at_stop(model, train_ids, val_ids, cfg, it, flag)
                break
    finally:
        bar.close()
        if old_handler is not None:
            signal.signal(signal.SIGINT, old_handler)
    plot = save_loss_plot(curve, evals, f"{out_dir}/loss.png")
    last = evals[-1] if evals else [it, math.nan, math.nan]
    if stop_losses is not None:
        last = [it, stop_losses["train"], stop_losses["val"]]
    return {
        "step": it,
        "curve": curve,
        "evals": evals,
        "best_val": best,
        "train_loss": last[1],
        "val_loss": last[2],
        "eval_step": last[0],
        "plot_note": None if plot else plot_unavailable() or "nothing to plot",
        "tokens_per_s": tokens / train_time if train_time else 0.0,
        "wall_time": time.perf_counter() - t_start,
        "interrupted": it < cfg["max_iters"],
        "plot": plot,
        "model": model,
        "tokenizer": tok,
    }
