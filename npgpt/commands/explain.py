"""`npgpt explain COMPONENT`: every intermediate of a forward and backward, by hand.

Prints each step with its name from the derivation (docs/<component>.md), its equation number,
shape and values, in the order a student computes them, then one line per comparison with the
module's own forward and backward. Exit status 1 if they disagree, 2 for bad input.
"""

import json
import sys

import numpy as np

from ..registry import UnknownComponent, resolve, supported

HELP = "print every intermediate of a component's forward and backward, step by step"
WIDTH = 80


def add_arguments(parser):
    names = ", ".join(c.name + "".join(f" ({a})" for a in c.aliases) for c in supported("explain"))
    parser.add_argument("component", metavar="COMPONENT", help=f"one of: {names} (class names work too)")
    parser.add_argument(
        "--input",
        default=None,
        metavar="JSON",
        help="the input as a JSON list, e.g. '[-1, 0, 1]' (token ids for embedding, "
        "logits for loss); default: a small example (the book's for layernorm)",
    )
    parser.add_argument(
        "--dout",
        default=None,
        metavar="JSON",
        help="the upstream gradient (JSON, the output's shape; a number for loss); "
        "default: drawn from --seed (ones for gelu)",
    )
    parser.add_argument(
        "--targets",
        default=None,
        metavar="JSON",
        help="loss and model: target ids (-100 = ignored, loss only)",
    )
    parser.add_argument(
        "--qkv-bias", action="store_true", help="attention only: W_query, W_key, W_value with biases"
    )
    parser.add_argument(
        "--unbiased", action="store_true", help="layernorm only: divide the variance by C - 1"
    )
    from .argtypes import at_least

    parser.add_argument(
        "--seed", type=at_least(0), default=0, help="seed for weights, dout and default inputs"
    )
    parser.add_argument("--format", choices=("text", "markdown"), default="text", help="output format")


def _parse(name, text):
    if text is None:
        return None
    try:
        v = np.asarray(json.loads(text))
    except (json.JSONDecodeError, ValueError) as err:
        raise ValueError(f"--{name} must be a JSON number or (nested) list, got {text!r}: {err}") from None
    if v.dtype.kind not in "iuf":  # true/false, strings, objects, ragged lists
        raise ValueError(f"--{name} must hold numbers only, got {text!r}")
    if v.size == 0:
        raise ValueError(f"--{name} is empty: {text!r}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"--{name} holds NaN or infinity: {text!r}")
    return v


def _values(v, indent):
    v = np.asarray(v)
    if v.dtype.kind == "f":  # rounded as printed, and + 0.0 turns -0.0 into 0.0: no "-0." shown
        v = np.round(v, 4) + 0.0
    body = np.array2string(
        v, precision=4, suppress_small=True, max_line_width=WIDTH - indent, floatmode="maxprec"
    )
    return "\n".join((" " * indent + line).rstrip() for line in body.splitlines())


def render_text(e, seed):
    lines = [f"npgpt explain {e.component}", f"  {e.title}", f"  equations: {e.page}; float64; seed {seed}"]
    for part, steps in (("forward", e.forward), ("backward", e.backward)):
        lines.append(f"\n== {part} " + "=" * (WIDTH - 4 - len(part)))
        for s in steps:
            head = f"{s.name:<11} {str(np.shape(s.value)):<13} {s.eq:<7} "
            note = s.note if len(head) + len(s.note) <= WIDTH else ""
            lines.append((head + note).rstrip())
            if s.note and not note:
                lines.append(f"    {s.note}")
            lines.append(_values(s.value, 4))
    lines.append("")
    for what, d in e.checks:
        lines.append(f"{'matches' if d <= 1e-10 else 'MISMATCH with'} {what}: max |diff| = {d:.1e}")
    return "\n".join(lines)


def render_markdown(e, seed):
    lines = [
        f"# `npgpt explain {e.component}`",
        "",
        f"{e.title}. Equations: `{e.page}`; float64; seed {seed}.",
    ]
    for part, steps in (("Forward", e.forward), ("Backward", e.backward)):
        lines += ["", f"## {part}", ""]
        for s in steps:
            eq = f" ({s.eq})" if s.eq else ""
            lines += [
                f"**`{s.name}`** `{np.shape(s.value)}`{eq}: {s.note}".rstrip(": "),
                "",
                "```text",
                _values(s.value, 0),
                "```",
                "",
            ]
    lines += ["## Checks", ""]
    lines += [
        f"- {'matches' if d <= 1e-10 else 'MISMATCH with'} `{what}`: max \\|diff\\| = {d:.1e}"
        for what, d in e.checks
    ]
    return "\n".join(lines)


def run(args):
    from ..explain import explain

    try:
        name = resolve(args.component, "explain").name
    except UnknownComponent as err:
        print(f"npgpt explain: {err}", file=sys.stderr)
        return 2
    options = {}
    if args.unbiased:
        if name != "layernorm":
            print(
                f"npgpt explain: --unbiased applies to layernorm only, not {args.component}", file=sys.stderr
            )
            return 2
        options["unbiased"] = True
    if args.targets is not None and name not in ("crossentropy", "model"):
        print(
            f"npgpt explain: --targets applies to loss and model only, not {args.component}", file=sys.stderr
        )
        return 2
    if args.qkv_bias:
        if name != "attention":
            print(
                f"npgpt explain: --qkv-bias applies to attention only, not {args.component}", file=sys.stderr
            )
            return 2
        options["qkv_bias"] = True
    try:
        if args.targets is not None:
            options["targets"] = _parse("targets", args.targets)
        x, dout = _parse("input", args.input), _parse("dout", args.dout)
        if dout is not None and name in ("crossentropy", "model") and dout.ndim != 0:
            raise ValueError(
                f"--dout for {args.component} is the loss's gradient: one number, got shape {dout.shape}"
            )
        with np.errstate(all="ignore"):  # an overflow is reported below, in one line
            e = explain(name, x=x, seed=args.seed, dout=dout, **options)
        for part, steps in (("forward", e.forward), ("backward", e.backward)):
            for s in steps:
                v = np.asarray(s.value, dtype=np.float64)
                if np.isnan(v).any() or np.isposinf(v).any():  # -inf is the causal mask's
                    raise ValueError(f"{part} step {s.name} overflows to inf or NaN; give smaller values")
    except (ValueError, TypeError, IndexError) as err:
        msg = str(err)  # the explainers' own messages start with "explain <component>:"
        print(
            f"npgpt {msg}" if msg.startswith("explain ") else f"npgpt explain {args.component}: {msg}",
            file=sys.stderr,
        )
        return 2
    print(render_text(e, args.seed) if args.format == "text" else render_markdown(e, args.seed))
    return 0 if e.passed else 1
