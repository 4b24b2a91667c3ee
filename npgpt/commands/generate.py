"""`npgpt generate`: continue a prompt with a trained checkpoint (--checkpoint DIR, from
`npgpt train`) or a Hugging Face GPT-2 folder (--gpt2 DIR, needs the `gpt2` extra), streaming
the text as it is sampled. Uses the key/value cache of npgpt/generate.py.
"""

import sys

HELP = "sample text from a trained checkpoint or a Hugging Face GPT-2 folder"


def add_arguments(parser):
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", metavar="DIR", help="an `npgpt train` --out-dir (uses its best ckpt)")
    src.add_argument(
        "--gpt2",
        metavar="DIR",
        help="a Hugging Face GPT-2 folder: config.json, model.safetensors, vocab.json, merges.txt",
    )
    parser.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    parser.add_argument("--max-new-tokens", type=int, default=500)
    parser.add_argument("--temperature", type=float, default=0.8, help="0 = greedy (default: 0.8)")
    parser.add_argument("--top-k", type=int, default=200, help="sample among the k likeliest (default: 200)")
    parser.add_argument("--seed", type=int, default=1337)


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

    if args.max_new_tokens < 0:
        raise SystemExit(f"npgpt generate: --max-new-tokens must be >= 0, got {args.max_new_tokens}")
    if args.temperature < 0:
        raise SystemExit(f"npgpt generate: --temperature must be >= 0, got {args.temperature}")
    if args.top_k is not None and args.top_k < 1:
        raise SystemExit(f"npgpt generate: --top-k must be >= 1, got {args.top_k}")
    if args.gpt2:
        from ..gpt2 import load_gpt2

        model, tok = load_gpt2(args.gpt2)
        ids = tok.encode(args.prompt) or [tok.eot]
    else:
        from ..checkpoint import load_model

        model, tok, _ = load_model(args.checkpoint)
        try:
            ids = tok.encode(args.prompt)
        except ValueError as e:
            raise SystemExit(f"npgpt generate: --prompt: {e}") from None
        if not ids:
            raise SystemExit("npgpt generate: --prompt is empty; give at least one character")
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
