"""`npgpt grade`: grade a student's implementation of npgpt's components, or a folder of them.

The submission runs only in sandboxed child processes (npgpt/grade/sandbox.py); the reference
answers are computed here. Exit status 0 whenever grading completed, whatever the score; 2 for
bad arguments or when the grader itself failed (a results file is still written). See
docs/grading.md.
"""

import os
import sys
import traceback

from ..registry import supported

HELP = "grade a submission's forward/backward implementations (text, JSON or Gradescope results)"


def _components(text):
    from ..registry import UnknownComponent, resolve_list

    try:
        return [c.name for c in resolve_list(text, "grade")]
    except UnknownComponent as e:
        raise ValueError(f"--only: {e}") from None


def add_arguments(parser):
    parser.add_argument("submission", help="a .py file, or a folder of submissions (graded with --jobs)")
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated components to grade, or all ("
        + ",".join(c.name for c in supported("grade"))
        + "); a missing one scores 0",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "gradescope"),
        default=None,
        help="results format for one submission (default text; gradescope writes results.json)",
    )
    parser.add_argument(
        "--results",
        default=None,
        help="write the results here (a folder for a folder of "
        "submissions; default: stdout, or results.json for --format gradescope)",
    )
    parser.add_argument("--report", default=None, help="also write the text report to this file")
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="wall-clock seconds per component (default 10)"
    )
    parser.add_argument(
        "--memory", type=int, default=2048, help="memory limit per component in MB (default 2048)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed for inputs and parameters (default: random, printed in the report)",
    )
    parser.add_argument(
        "--rubric", default=None, help="JSON rubric overriding the default points (docs/grading.md)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel for a folder")


def _write(path, text):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def run(args):
    from ..grade.rubric import Rubric

    try:
        only = _components(args.only) if args.only else None
        rubric = Rubric.load(args.rubric)
        if args.timeout <= 0 or args.memory < 64 or args.jobs < 1:
            raise ValueError("--timeout must be > 0, --memory >= 64 (MB), --jobs >= 1")
    except (ValueError, OSError) as e:
        print(f"npgpt grade: {e}", file=sys.stderr)
        return 2
    if os.path.isdir(args.submission):
        if args.format not in (None, "json"):
            print(
                "npgpt grade: a folder is graded into <name>.json and <name>.txt per submission plus "
                "grades.csv; --format applies to a single submission",
                file=sys.stderr,
            )
            return 2
        from ..grade.batch import grade_folder

        return grade_folder(args, only)
    fmt = args.format or "text"
    results = args.results or ("results.json" if fmt == "gradescope" else None)
    from ..grade.grader import grade
    from ..grade.report import render

    try:
        result = grade(
            args.submission,
            only=only,
            seed=args.seed,
            rubric=rubric,
            timeout=args.timeout,
            memory_mb=args.memory,
        )
    except Exception:  # a bug in the grader: still leave a valid (zero) results file behind
        detail = traceback.format_exc()
        print(f"npgpt grade: internal error while grading {args.submission}:\n{detail}", file=sys.stderr)
        if results:
            from ..grade.grader import GradeResult

            failed = GradeResult(
                os.path.basename(args.submission),
                args.seed or 0,
                notes=["the grader failed; please report this to the instructor"],
            )
            _write(results, render(failed, fmt, rubric))
        return 2
    text = render(result, fmt, rubric)
    if results:
        _write(results, text)
    if args.report:
        _write(args.report, render(result, "text", rubric))
    if not results or fmt == "text":
        sys.stdout.write(text)
    else:
        print(f"{result.submission}: {result.score:g}/{result.max_score:g} -> {results}")
    return 0
