"""`npgpt reference`: write every tensor of one training step of the reference GPTModel
(inputs, parameters, activations, logits, loss, activation and parameter gradients) to a
safetensors (or .npz) file, with a JSON manifest beside it. docs/reference.md.
"""

import json
import sys
import time
from pathlib import Path

HELP = "write one training step's tensors as a golden reference for another GPT-2 implementation"


def add_arguments(parser):
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="NAME", help="a named configuration: " + ", ".join(_config_names()))
    src.add_argument(
        "--config", metavar="FILE.json", help="GPTModel cfg keys: vocab_size, context_length, ..."
    )
    src.add_argument("--gpt2", metavar="DIR", help="a Hugging Face GPT-2 folder (needs the gpt2 extra)")
    parser.add_argument(
        "-o", "--out", required=True, metavar="OUT", help="OUT.safetensors or OUT.npz (+ OUT.json)"
    )
    parser.add_argument("--seed", type=int, default=0, help="weights and inputs (default: 0)")
    parser.add_argument("--batch", type=int, default=None, help="B (default: 4, or 1 with --text)")
    parser.add_argument("--seq-len", type=int, default=None, help="T (default: 64, at most context_length)")
    parser.add_argument(
        "--dtype",
        choices=("float64", "float32"),
        default="float64",
        help="the dtype of the step and the dump",
    )
    parser.add_argument("--text", help="input text, encoded with the --gpt2 folder's tokenizer")
    parser.add_argument("--keep-dropout", action="store_true", help="keep the cfg's drop_rate (masks dumped)")
    parser.add_argument(
        "--scale-weights", type=float, default=1.0, metavar="K", help="multiply every weight by K (stress)"
    )
    parser.add_argument(
        "--adamw-steps", type=int, default=0, metavar="N", help="also dump params after N AdamW steps"
    )
    parser.add_argument(
        "--from",
        dest="from_dump",
        metavar="DUMP",
        help="take param/* (and input/ids, input/targets) from a dump (.safetensors, .npz or folder)",
    )
    parser.add_argument(
        "--perturb-norms",
        type=float,
        default=0.0,
        metavar="S",
        help="LayerNorm scale 1 + S N(0,1), shift S N(0,1) (default 0: the book's ones and zeros)",
    )
    parser.add_argument(
        "--max-memory", type=float, default=None, metavar="GIB", help="refuse above this (default: RAM)"
    )


def _config_names():
    from ..golden.dump import CONFIGS

    return list(CONFIGS)


def _die(msg):
    print(f"npgpt reference: error: {msg}", file=sys.stderr)
    return 2


def run(args):
    import numpy as np

    from ..golden import dump as D

    out = Path(args.out)
    if out.suffix not in (".safetensors", ".npz"):
        return _die(f"-o {out}: the name must end in .safetensors or .npz")
    if not out.parent.is_dir():
        return _die(f"-o {out}: folder {out.parent} does not exist")
    if args.from_dump and (args.gpt2 or args.perturb_norms):
        return _die("--from gives every parameter: it excludes --gpt2 and --perturb-norms")
    if args.text is not None and not args.gpt2:
        return _die("--text needs --gpt2 (its tokenizer encodes the text)")
    if args.adamw_steps < 0 or args.adamw_steps > 10000:
        return _die(f"--adamw-steps must be in [0, 10000], got {args.adamw_steps}")
    if not (np.isfinite(args.scale_weights) and args.scale_weights != 0.0):
        return _die(f"--scale-weights must be a finite non-zero number, got {args.scale_weights}")
    if not (np.isfinite(args.perturb_norms) and args.perturb_norms >= 0.0):
        return _die(f"--perturb-norms must be a finite number >= 0, got {args.perturb_norms}")
    if args.max_memory is not None and not (np.isfinite(args.max_memory) and args.max_memory > 0.0):
        return _die(f"--max-memory must be a finite number of GiB > 0, got {args.max_memory}")
    source, tied, hf = {}, False, None
    try:
        if args.model:
            if args.model not in D.CONFIGS:
                return _die(f"--model {args.model!r} is not one of {', '.join(D.CONFIGS)}")
            cfg, source = dict(D.CONFIGS[args.model]), {"model": args.model}
        elif args.config:
            try:
                raw = json.loads(Path(args.config).read_text())
            except OSError as e:
                return _die(f"--config {args.config}: {e.strerror}")
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                return _die(f"--config {args.config}: not valid JSON ({str(e)[:80]})")
            unknown = sorted(set(raw) - set(D.CFG_KEYS)) if isinstance(raw, dict) else []
            if unknown:
                return _die(
                    f"--config {args.config}: unknown key(s) {', '.join(unknown)} "
                    f"(GPTModel cfg keys: {', '.join(D.CFG_KEYS)})"
                )
            cfg, source = D.check_config(raw, f"--config {args.config}"), {"config": Path(args.config).name}
        else:
            from ..gpt2 import gpt2_config

            try:
                hf = json.loads((Path(args.gpt2) / "config.json").read_text())
                cfg = gpt2_config(hf)
            except (OSError, ValueError, KeyError) as e:
                return _die(f"--gpt2 {args.gpt2}: cannot read config.json ({e})")
            source, tied = {"gpt2": Path(args.gpt2).name}, True
        cfg = D.check_config(cfg, "the configuration")
        tokens = None
        if args.text is not None:
            from ..gpt2 import GPT2Tokenizer

            tokens = GPT2Tokenizer(args.gpt2).encode(args.text)
        B = args.batch if args.batch is not None else (1 if tokens is not None else 4)
        if args.seq_len is not None:
            T = args.seq_len
        elif tokens is not None:
            T = min(max(len(tokens) - 1, 1), cfg["context_length"])
        else:
            T = min(64, cfg["context_length"])
        if not 1 <= B <= 10**6:
            return _die(f"--batch must be >= 1, got {B}")
        if not 1 <= T <= cfg["context_length"]:
            return _die(f"--seq-len must be in [1, context_length = {cfg['context_length']}], got {T}")
        need = D.estimate_bytes(cfg, B, T, args.adamw_steps, tied)
        have = args.max_memory * 2**30 if args.max_memory is not None else D.mem_total()
        if have is not None and need > have:
            return _die(
                f"a {D.n_params(cfg, tied) / 1e6:.0f}M-parameter model at B={B}, T={T} needs about "
                f"{need / 2**30:.1f} GiB (float64 and float32 steps, every activation kept), more than the "
                f"{have / 2**30:.1f} GiB {'allowed' if args.max_memory is not None else 'this machine has'}; use a smaller "
                "configuration, --batch or --seq-len"
            )
        ids, targets = D.build_inputs(cfg, B, T, args.seed, tokens)
        given = None
        if args.from_dump:
            from ..golden.tensorfile import TensorFileError, read_tensors

            try:
                given = read_tensors(args.from_dump)
            except TensorFileError as e:
                return _die(f"--from: {e}")
            if "input/ids" in given and tokens is None:
                ids, targets = (np.asarray(given[k]) for k in ("input/ids", "input/targets"))
                B, T = ids.shape if ids.ndim == 2 else (0, 0)
                if ids.ndim != 2 or targets.shape != ids.shape or ids.dtype.kind not in "iu":
                    return _die(
                        f"--from {args.from_dump}: input/ids and input/targets must be (B, T) integers"
                    )
                if ids.size and not (0 <= ids.min() and ids.max() < cfg["vocab_size"]):
                    return _die(
                        f"--from {args.from_dump}: input/ids outside [0, vocab_size = {cfg['vocab_size']})"
                    )
            given = {k[len("param/") :]: v for k, v in given.items() if k.startswith("param/")}
            if not given:
                return _die(f"--from {args.from_dump}: no param/<state_dict key> tensors in it")
    except D.DumpError as e:
        return _die(str(e))
    t0 = time.perf_counter()
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below, in one line
        if args.gpt2:
            from ..gpt2 import load_gpt2

            try:
                model, _ = load_gpt2(args.gpt2, np.float64)
            except (OSError, ImportError, KeyError, ValueError, RuntimeError) as e:
                return _die(f"--gpt2 {args.gpt2}: {str(e).splitlines()[0]}")
            model = D.make_model(None, None, args.scale_weights, keep_dropout=args.keep_dropout, model=model)
        else:
            try:
                model = D.make_model(
                    cfg,
                    args.seed,
                    args.scale_weights,
                    given,
                    keep_dropout=args.keep_dropout,
                    perturb=args.perturb_norms,
                )
            except RuntimeError as e:  # load_state_dict: missing, unexpected or mis-shaped keys
                return _die(f"--from {args.from_dump}: {str(e)[:300]}")
        tensors, phase, yard = D.run_reference(model, ids, targets, args.dtype, args.adamw_steps)
    t1 = time.perf_counter()
    bad = [k for k, v in tensors.items() if not np.all(np.isfinite(v))]
    if bad:
        return _die(
            f"the step overflowed: {len(bad)} tensors hold inf or NaN (first: {bad[0]}, loss "
            f"{float(tensors['loss'])}); lower --scale-weights or --perturb-norms"
        )
    meta = {
        "npgpt_version": _version(),
        "source": source,
        "cfg": dict(model.cfg),
        "tied_out_head": tied,
        "seed": args.seed,
        "batch": B,
        "seq_len": T,
        "dtype": args.dtype,
        "dropout": model.cfg["drop_rate"] if args.keep_dropout else 0.0,
        "scale_weights": args.scale_weights,
        "perturb_norms": args.perturb_norms,
        "from": Path(args.from_dump).name if args.from_dump else None,
        "text": args.text,
        "adamw": {**D.ADAMW, "steps": args.adamw_steps, "schedule": "constant lr", "decay": "Linear weights"}
        if args.adamw_steps
        else None,
        "loss": float(tensors["loss"]),
    }
    try:
        D.write_dump(out, tensors, phase, yard, meta)
    except OSError as e:
        return _die(f"-o {out}: {e.strerror}")
    t2 = time.perf_counter()
    size = out.stat().st_size
    print(
        f"wrote {out} ({len(tensors)} tensors, {size / 2**20:.1f} MiB) and {out.with_suffix('.json')}: "
        f"loss {float(tensors['loss']):.6f}, steps {t1 - t0:.1f} s, writing {t2 - t1:.1f} s"
    )
    return 0


def _version():
    from .. import __version__

    return __version__
