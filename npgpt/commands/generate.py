"""`npgpt generate`: continue a prompt with a trained checkpoint (--checkpoint DIR, from
`npgpt train`; its best `ckpt`, or `last` when asked for with --last or OUT_DIR/last) or a
Hugging Face GPT-2 folder (--gpt2 DIR, needs the `gpt2` extra), streaming
the text as it is sampled. Uses the key/value cache of npgpt/generate.py.
"""

import sys

from ..errors import InputError

HELP = "sample text from a trained checkpoint or a Hugging Face GPT-2 folder"


def add_arguments(parser):
    from .argtypes import at_least

    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="an `npgpt train` --out-dir (its best checkpoint, ckpt), or one checkpoint: OUT_DIR/last",
    )
    src.add_argument(
        "--gpt2",
        metavar="DIR",
        help="a Hugging Face GPT-2 folder: config.json, model.safetensors, vocab.json, merges.txt",
    )
    parser.add_argument(
        "--last", action="store_true", help="with --checkpoint OUT_DIR: its latest save, `last`, not `ckpt`"
    )
    parser.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    parser.add_argument(
        "--max-new-tokens", type=at_least(0), default=500, help="tokens to sample (default: %(default)s)"
    )
    parser.add_argument(
        "--temperature", type=at_least(0.0, float), default=0.8, help="0 = greedy (default: %(default)s)"
    )
    parser.add_argument(
        "--top-k", type=at_least(1), default=200, help="sample among the k likeliest (default: %(default)s)"
    )
    parser.add_argument("--seed", type=at_least(0), default=1337, help="sampling seed (default: %(default)s)")


def stream(tokenizer, ids_iter, out):
    """Write the decoded text as tokens arrive; a token that ends inside a multi-byte UTF-8
    character (BPE) waits for the next one. Returns the new ids."""
    new, shown = [], ""
    for nxt in ids_iter:
        new.append(int(nxt[0]))
        text = tokenizer.decode(new)
        if text.endswith("\ufffd"):
            continue
        out.write(text[len(shown) :])
        out.flush()
        shown = text
    return new


def run(args):
    import numpy as np

    from ..generate import generate

    if args.gpt2:
        if args.last:
            raise InputError("--last goes with --checkpoint, not --gpt2")
        from ..gpt2 import load_gpt2

        model, tok = load_gpt2(args.gpt2)
        ids = tok.encode(args.prompt) or [tok.eot]
    else:
        from ..checkpoint import load_model, resolve

        directory, name = resolve(args.checkpoint, last=args.last)
        model, tok, meta = load_model(directory, name)
        evals = meta.get("extra", {}).get("evals") or []
        val = f", val loss {evals[-1][2]:.4f}" if evals and evals[-1][0] == meta["step"] else ""
        print(f"npgpt generate: loaded {directory}/{name} (step {meta['step']}{val})", file=sys.stderr)
        try:
            ids = tok.encode(args.prompt)
        except ValueError as e:
            raise InputError(f"--prompt: {e}") from None
        if not ids:
            raise InputError("--prompt is empty; give at least one character")
    sys.stdout.write(args.prompt)
    sys.stdout.flush()
    steps = generate(
        model,
        np.array([ids]),
        args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        rng=args.seed,
    )
    stream(tok, steps, sys.stdout)
    sys.stdout.write("\n")
    return 0
