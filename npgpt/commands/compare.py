"""`npgpt compare THEIRS --reference REF.safetensors`: another implementation's tensors against
an `npgpt reference` dump, in the order of the step; names the first tensor that diverges,
marks the ones after it as downstream, and diagnoses the mistake when it is a known one.
Exit 0 on a match, 1 on a mismatch, 2 on bad input. docs/reference.md.
"""

import json
import math
import sys

HELP = "compare another implementation's tensors with an `npgpt reference` dump; find the first that diverges"


def add_arguments(parser):
    parser.add_argument(
        "theirs", metavar="THEIRS", help="a .safetensors or .npz file, or a folder with tensors.json"
    )
    parser.add_argument(
        "--reference", required=True, metavar="REF", help="REF.safetensors (or .npz) from `npgpt reference`"
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "summary"),
        default="text",
        help="the report: text, JSON or one line",
    )
    parser.add_argument(
        "--rtol", type=float, default=None, help="norm-wise relative error allowed (replaces the rule)"
    )
    parser.add_argument(
        "--no-diagnose", action="store_true", help="skip the diagnosis (replaying the reference step)"
    )
    parser.add_argument(
        "--all", action="store_true", help="text: list every tensor (default: around the divergence)"
    )


def _die(msg):
    print(f"npgpt compare: error: {msg}", file=sys.stderr)
    return 2


def _g(x, spec=".2e"):
    return "-" if x is None else format(x, spec)


def run(args):
    import numpy as np

    from ..golden.compare import compare, load_reference
    from ..golden.tensorfile import TensorFileError, read_tensors

    if args.rtol is not None and not (math.isfinite(args.rtol) and args.rtol >= 0):
        return _die(f"--rtol must be a finite number >= 0, got {args.rtol}")
    try:
        ref, entries, manifest = load_reference(args.reference)
        theirs = read_tensors(args.theirs)
        report = compare(theirs, ref, entries, args.rtol)
    except TensorFileError as e:
        return _die(str(e))
    if not report["tensors"]:
        return _die(
            f"{args.theirs}: none of its {len(theirs)} tensors has a name the reference knows (act/..., grad/...)"
        )
    first = report["first_divergence"]
    report["diagnosis"] = []
    if first and not args.no_diagnose:
        from ..golden.diagnose import diagnose

        row = next(r for r in report["tensors"] if r["name"] == first)
        with np.errstate(all="ignore"):
            report["diagnosis"] = diagnose(first, theirs[first], ref, manifest, row.get("allowed") or 0.0)
    report.update(
        reference=str(args.reference), theirs=str(args.theirs), reference_dtype=manifest.get("dtype")
    )
    n_bad = sum(r["status"] != "match" for r in report["tensors"])
    if args.format == "json":
        print(json.dumps(report, indent=1))
    elif args.format == "summary":
        print(_summary(report, n_bad))
    else:
        print(_text(report, n_bad, args.all))
    return 1 if first else 0


def _summary(rep, n_bad):
    n = len(rep["tensors"])
    if not rep["first_divergence"]:
        return f"match: {n} tensors agree with the reference ({len(rep['missing'])} missing)"
    row = next(r for r in rep["tensors"] if r["name"] == rep["first_divergence"])
    diag = f"; {rep['diagnosis'][0]}" if rep["diagnosis"] else ""
    return (
        f"mismatch: first divergence {row['name']} (rel err {_g(row.get('rel_err'))}, allowed "
        f"{_g(row.get('allowed'))}), {n_bad - 1} downstream of {n} compared{diag}"
    )


def _text(rep, n_bad, show_all):
    rows = rep["tensors"]
    lines = [
        f"theirs {rep['theirs']} vs reference {rep['reference']} ({rep['reference_dtype']}): {len(rows)} tensors "
        f"compared, {len(rep['missing'])} missing, {len(rep['extra'])} not in the reference",
    ]
    first = rep["first_divergence"]
    at = next((i for i, r in enumerate(rows) if r["status"] == "diverges"), len(rows))
    keep = range(len(rows)) if show_all else [*range(max(at - 3, 0), at + 1)] if first else []
    if not show_all and first:
        keep += [i for i in range(at + 1, len(rows)) if rows[i]["status"] != "match"][:5]
    if keep:
        lines += [
            "",
            f"{'status':<11}{'tensor':<46}{'rel err':>10}{'allowed':>10}{'x f32':>10}{'max abs':>10}  worst index",
        ]
    if keep and keep[0] > 0:
        lines.append(f"{'match':<11}... {keep[0]} tensors before these agree")
    for i in keep:
        r = rows[i]
        f32 = r.get("f32_units")
        worst = tuple(r["worst_index"]) if r.get("worst_index") is not None and r.get("max_abs") != 0 else ""
        lines.append(
            f"{r['status']:<11}{r['name'][:45]:<46}{_g(r.get('rel_err')):>10}{_g(r.get('allowed')):>10}"
            f"{_g(f32, '.3g') if f32 is not None else '-':>10}{_g(r.get('max_abs')):>10}  {worst}"
        )
    lines.append("")
    if rep["missing"]:
        more = f" and {len(rep['missing']) - 8} more" if len(rep["missing"]) > 8 else ""
        lines.append(f"missing (skipped): {', '.join(rep['missing'][:8])}{more}")
    if not first:
        worst = max(rows, key=lambda r: r.get("f32_units") or 0.0)
        lines.append(
            f"match: all {len(rows)} compared tensors agree with the reference (largest error: {worst['name']}, "
            f"rel err {_g(worst.get('rel_err'))}, {_g(worst.get('f32_units'), '.3g')} x float32 rounding; --all lists all)"
        )
        return "\n".join(lines)
    row = next(r for r in rows if r["name"] == first)
    lines.append(f"first divergence: {first} ({row['phase']})")
    if row.get("why"):
        lines.append(f"  {row['why']}")
    if row.get("worst_index") is not None:
        lines.append(
            f"  worst element {tuple(row['worst_index'])}: theirs {_g(row.get('theirs_at_worst'), '.9g')}, "
            f"reference {_g(row.get('ref_at_worst'), '.9g')}"
        )
    if row.get("f32_units") is not None:
        lines.append(
            f"  its error is {row['f32_units']:.3g} x what float32 rounding explains for this tensor"
        )
    for d in rep["diagnosis"]:
        lines.append(f"  diagnosis: {d}")
    if not rep["diagnosis"]:
        lines.append("  diagnosis: none of the known mistakes matches")
    down = n_bad - 1
    if down:
        hidden = "" if show_all else " (the first 5 are listed; --all lists every tensor)"
        lines.append(f"{down} later tensors differ too: downstream of {first}, not separate failures{hidden}")
    return "\n".join(lines)
