"""`npgpt train`: train a character-level GPT on the embedded Shakespeare corpus (or --data).

Flags are nanoGPT's, with dashes; defaults are nanoGPT's CPU configuration of shakespeare_char.
Writes OUT_DIR/ckpt.{npz,json} (best validation loss), OUT_DIR/last.{npz,json} (for
--resume) and OUT_DIR/loss.png (when matplotlib is installed). Ctrl-C saves `last` and exits.
"""

import os

HELP = "train a character-level GPT (nanoGPT's shakespeare_char CPU settings by default)"


def add_arguments(parser):
    from ..train import DEFAULTS as D

    def flag(name, typ, help):
        key = name.replace("-", "_")
        parser.add_argument(f"--{name}", type=typ, default=D[key], help=f"{help} (default: {D[key]})")

    flag("block-size", int, "context length in tokens")
    flag("batch-size", int, "sequences per iteration")
    flag("n-layer", int, "transformer blocks")
    flag("n-head", int, "attention heads")
    flag("n-embd", int, "embedding size")
    flag("max-iters", int, "training iterations")
    flag("learning-rate", float, "peak learning rate")
    flag("min-lr", float, "learning rate at the end of the cosine decay")
    flag("warmup-iters", int, "linear warm-up iterations")
    flag("lr-decay-iters", int, "iteration where the cosine decay reaches --min-lr")
    flag("dropout", float, "dropout rate")
    flag("weight-decay", float, "AdamW weight decay of the Linear weight matrices")
    flag("beta1", float, "AdamW beta1")
    flag("beta2", float, "AdamW beta2")
    flag("grad-clip", float, "clip the global gradient norm to this (0 = off)")
    flag("eval-interval", int, "iterations between evaluations and checkpoints")
    flag("eval-iters", int, "batches per split for each evaluation")
    flag("seed", int, "seed for the weights, batches and dropout")
    flag("out-dir", str, "directory for checkpoints and the loss plot")
    parser.add_argument(
        "--data",
        default=None,
        metavar="PATH",
        help="a UTF-8 text file to train on (default: the embedded Shakespeare corpus)",
    )
    parser.add_argument("--dtype", choices=["float32", "float64"], default=D["dtype"])
    parser.add_argument(
        "--init",
        choices=["nanogpt", "book"],
        default=D["init"],
        help="weight init: nanoGPT's N(0, 0.02) or the book's layer defaults",
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from OUT_DIR/last (model shape from the checkpoint)"
    )
    parser.add_argument(
        "--reference",
        dest="fast",
        action="store_false",
        help="run the plain reference code (npgpt/layers/), not the fast path (npgpt/fast/)",
    )
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")


def run(args):
    from .. import checkpoint
    from ..train import DEFAULTS, train

    cfg = {k: getattr(args, k) for k in DEFAULTS}
    for k in ("block_size", "batch_size", "n_layer", "n_head", "n_embd", "eval_iters", "eval_interval"):
        if cfg[k] < 1:
            raise SystemExit(f"npgpt train: --{k.replace('_', '-')} must be >= 1, got {cfg[k]}")
    if cfg["n_embd"] % cfg["n_head"]:
        raise SystemExit(
            f"npgpt train: --n-embd ({cfg['n_embd']}) must be divisible by --n-head ({cfg['n_head']})"
        )
    if cfg["data"] is not None and not os.path.isfile(cfg["data"]):
        raise SystemExit(f"npgpt train: --data {cfg['data']}: no such file")
    if cfg["resume"] and not checkpoint.exists(cfg["out_dir"], "last"):
        raise SystemExit(
            f"npgpt train --resume: no checkpoint {cfg['out_dir']}/last.npz + last.json to resume from"
        )
    r = train(cfg, progress=args.progress)
    print(
        f"{'stopped' if r['interrupted'] else 'done'} at step {r['step']}: "
        f"train loss {r['train_loss']:.4f}, val loss {r['val_loss']:.4f} (best {r['best_val']:.4f}); "
        f"{r['tokens_per_s']:,.0f} tokens/s, {r['wall_time']:.0f} s"
    )
    print(f"checkpoints in {cfg['out_dir']}/" + (f"; loss curve {r['plot']}" if r["plot"] else ""))
    return 0
