"""`npgpt train`: train a character-level GPT on the embedded Shakespeare corpus (or --data).

Flags are nanoGPT's, with dashes; defaults are nanoGPT's CPU configuration of shakespeare_char.
Writes OUT_DIR/ckpt.{npz,json} (best validation loss), OUT_DIR/last.{npz,json} (for
--resume) and OUT_DIR/loss.png (when matplotlib is installed). Ctrl-C saves `last`, measures the
loss at the step it stopped at, and exits. An OUT_DIR that already holds a checkpoint is
refused unless --resume or --force says what to do with it.
"""

import argparse
import json

from ..errors import InputError

HELP = "train a character-level GPT (nanoGPT's shakespeare_char CPU settings by default)"

# flags that set the model's shape -> the checkpoint's name for them; --resume takes these (and
# the dtype) from the checkpoint, so a differing one given with it is an error, not ignored
SHAPE = {
    "block_size": "context_length",
    "n_layer": "n_layers",
    "n_head": "n_heads",
    "n_embd": "emb_dim",
    "dropout": "drop_rate",
}


class _Given(argparse.Action):
    """Stores the value and notes in `namespace.given` that the flag was given."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = getattr(namespace, "given", frozenset()) | {self.dest}


def add_arguments(parser):
    from ..train import DEFAULTS as D
    from .argtypes import at_least, fraction, positive_float

    nonneg_float = at_least(0.0, float)

    def flag(name, typ, help):
        key = name.replace("-", "_")
        parser.add_argument(
            f"--{name}", type=typ, default=D[key], action=_Given, help=f"{help} (default: %(default)s)"
        )

    flag("block-size", at_least(1), "context length in tokens")
    flag("batch-size", at_least(1), "sequences per iteration")
    flag("n-layer", at_least(1), "transformer blocks")
    flag("n-head", at_least(1), "attention heads")
    flag("n-embd", at_least(1), "embedding size (a multiple of --n-head)")
    flag("max-iters", at_least(1), "training iterations")
    flag("learning-rate", positive_float, "peak learning rate")
    flag("min-lr", nonneg_float, "learning rate at the end of the cosine decay")
    flag("warmup-iters", at_least(0), "linear warm-up iterations")
    flag("lr-decay-iters", at_least(1), "iteration where the cosine decay reaches --min-lr")
    flag("dropout", fraction, "dropout rate, in [0, 1)")
    flag("weight-decay", nonneg_float, "AdamW weight decay of the Linear weight matrices")
    flag("beta1", fraction, "AdamW beta1, in [0, 1)")
    flag("beta2", fraction, "AdamW beta2, in [0, 1)")
    flag("grad-clip", nonneg_float, "clip the global gradient norm to this (0 = off)")
    flag("eval-interval", at_least(1), "iterations between evaluations and checkpoints")
    flag("eval-iters", at_least(1), "batches per split for each evaluation")
    flag("seed", at_least(0), "seed for the weights, batches and dropout")
    flag("out-dir", str, "directory for checkpoints and the loss plot")
    parser.add_argument(
        "--data",
        default=None,
        metavar="PATH",
        help="a UTF-8 text file to train on (default: the embedded Shakespeare corpus)",
    )
    parser.add_argument(
        "--dtype",
        choices=["float32", "float64"],
        default=D["dtype"],
        action=_Given,
        help="parameter dtype (default: %(default)s)",
    )
    parser.set_defaults(given=frozenset())
    parser.add_argument(
        "--init",
        choices=["nanogpt", "book"],
        default=D["init"],
        help="weight init: nanoGPT's N(0, 0.02) or the book's layer defaults (default: %(default)s)",
    )
    again = parser.add_mutually_exclusive_group()
    again.add_argument(
        "--resume", action="store_true", help="continue from OUT_DIR/last (model shape from the checkpoint)"
    )
    again.add_argument(
        "--force", action="store_true", help="overwrite the checkpoints already in OUT_DIR (default: refuse)"
    )
    parser.add_argument(
        "--reference",
        dest="fast",
        action="store_false",
        help="run the plain reference code (npgpt/layers/), not the fast path (npgpt/fast/)",
    )
    parser.add_argument(
        "--threads",
        type=at_least(1),
        default=None,
        metavar="N",
        help="threads of the fast path and of BLAS (default: OMP_NUM_THREADS or OPENBLAS_NUM_THREADS "
        "if set, else 1 for a model under 2M parameters, else the CPUs this process may use)",
    )
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")


def run(args):
    from ..train import DEFAULTS, train

    cfg = {k: getattr(args, k) for k in DEFAULTS}
    if cfg["threads"] is not None and not cfg["fast"]:
        raise InputError("--threads sets the fast path's threads; --reference runs without them")
    if cfg["min_lr"] > cfg["learning_rate"]:  # the "decay" would raise the rate past its peak
        raise InputError(
            f"--min-lr ({cfg['min_lr']:g}) must be <= --learning-rate ({cfg['learning_rate']:g})"
        )
    if cfg["n_embd"] % cfg["n_head"]:
        raise InputError(f"--n-embd ({cfg['n_embd']}) must be divisible by --n-head ({cfg['n_head']})")
    if cfg["resume"]:
        _check_resume_flags(cfg, args.given)
    r = train(cfg, progress=args.progress)
    losses = f"train loss {r['train_loss']:.4f}, val loss {r['val_loss']:.4f}"
    if r["interrupted"]:
        head = f"stopped at step {r['step']}: " + (
            losses
            if r["eval_step"] == r["step"]
            else f"loss not measured; last evaluated at step {r['eval_step']}: {losses}"
        )
    else:
        head = f"done at step {r['step']}: {losses}"
    print(f"{head} (best val {r['best_val']:.4f}); {r['tokens_per_s']:,.0f} tokens/s, {r['wall_time']:.0f} s")
    plot = f"; loss curve {r['plot']}" if r["plot"] else f"; no loss.png: {r['plot_note']}"
    print(f"checkpoints in {cfg['out_dir']}/{plot}")
    return 0


def _check_resume_flags(cfg, given):
    """A shape or dtype flag given with --resume must agree with the checkpoint's (which wins)."""
    try:
        with open(f"{cfg['out_dir']}/last.json", encoding="utf-8") as f:
            saved = json.load(f)["config"]
        model, dtype = saved["model"], saved["train"]["dtype"]
    except (OSError, ValueError, KeyError, TypeError):
        return  # train() reports what is wrong with the checkpoint
    for key in sorted(given):
        if key not in SHAPE and key != "dtype":
            continue
        have = dtype if key == "dtype" else model.get(SHAPE[key])
        if have != cfg[key]:
            raise InputError(
                f"--{key.replace('_', '-')} {cfg[key]} differs from {cfg['out_dir']}/last's {have}: "
                "--resume keeps the checkpoint's model; leave the flag out, or start a new run"
            )
