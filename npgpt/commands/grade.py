"""`npgpt grade`: grade a student's implementation of npgpt's components, or a folder of them.

The submission runs only in sandboxed child processes (npgpt/grade/sandbox.py); the reference
answers are computed here. Exit status 0 whenever grading completed, whatever the score; 2 for
bad arguments, a missing file, a sandbox that --require-sandbox refuses, or when the grader itself
failed (with --format gradescope a results file is written in every case). Also
`--self-test` (the sandbox contains a probe) and `--gradescope-zip OUT.zip` (the autograder).
See docs/grading.md.
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
    parser.add_argument(
        "submission",
        nargs="?",
        help="a .py file, or a folder of submissions (graded with --jobs); with --format gradescope, "
        "a folder is one student's upload and its .py file is graded",
    )
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
    from .argtypes import at_least

    parser.add_argument(
        "--seed",
        type=at_least(0),
        default=None,
        help="seed for inputs and parameters (default: random, printed in the report)",
    )
    parser.add_argument(
        "--rubric", default=None, help="JSON rubric overriding the default points (docs/grading.md)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel for a folder")
    parser.add_argument(
        "--sandbox",
        choices=("auto", "bwrap", "user", "none"),
        default="auto",
        help="how the submission is isolated: bwrap (namespaces), user (root only: a uid of its own), "
        "none (not isolated), auto (the first that works; default)",
    )
    parser.add_argument(
        "--require-sandbox",
        action="store_true",
        help="refuse to grade (exit 2) unless the submission is isolated",
    )
    parser.add_argument(
        "--self-test", action="store_true", help="check that the sandbox contains a hostile probe, then exit"
    )
    parser.add_argument(
        "--gradescope-zip",
        metavar="OUT.zip",
        default=None,
        help="write the Gradescope autograder zip (setup.sh, run_autograder, npgpt) and exit",
    )


def _write(path, text):
    """Write `text` to a new file renamed over `path` (an old file someone mapped stays the old one)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _fail(msg):
    print(f"npgpt grade: {msg}", file=sys.stderr)
    return 2


def run(args):
    from ..grade import sandbox
    from ..grade.frames import one_line
    from ..grade.rubric import Rubric

    try:
        only = _components(args.only) if args.only is not None else None  # --only "" names nothing
        modes = [
            f for f, on in (("--self-test", args.self_test), ("--gradescope-zip", args.gradescope_zip)) if on
        ]
        if len(modes) == 2:
            raise ValueError("--self-test and --gradescope-zip: give one of them")
        if modes and args.submission:
            raise ValueError(f"{modes[0]} grades no submission; {args.submission} would be ignored")
        for flag, path in (("--results", args.results), ("--report", args.report)):
            if path and os.path.isdir(path) and not (args.submission and os.path.isdir(args.submission)):
                raise ValueError(f"{flag} {path}: is a directory; name a file")
        rubric = Rubric.load(args.rubric)
        if not 0 < args.timeout < float("inf") or args.memory < 64 or args.jobs < 1:  # nan fails too
            raise ValueError("--timeout must be a finite number > 0, --memory >= 64 (MB), --jobs >= 1")
    except (ValueError, OSError) as e:
        return _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    if args.gradescope_zip:
        from ..grade.gradescope import build_zip

        try:
            names = build_zip(args.gradescope_zip, only, args.sandbox, args.rubric, args.timeout, args.memory)
        except OSError as e:
            return _fail(f"cannot write {args.gradescope_zip}: {e.strerror or e}")
        print(f"wrote {args.gradescope_zip} ({len(names)} files): upload it as the autograder")
        return 0
    fmt = args.format or "text"
    results = args.results or ("results.json" if fmt == "gradescope" else None)
    try:
        box = sandbox.choose(args.sandbox)
        if args.require_sandbox and not box.isolated:
            raise sandbox.SandboxError(f"--require-sandbox: {box.detail}")
    except sandbox.SandboxError as e:
        if fmt == "gradescope" and results and args.submission:
            _zero(results, args, rubric, only, "the grader's sandbox does not work here; tell the instructor")
        return _fail(str(e))
    if args.self_test:
        from ..grade.selftest import run as self_test

        ok, lines = self_test(box, args.require_sandbox)
        print("\n".join(lines))
        print("self-test: " + ("passed" if ok else "FAILED"))
        return 0 if ok else 2
    if not args.submission:
        return _fail("give a submission (.py file or folder), --self-test or --gradescope-zip OUT.zip")
    unreadable, path = None, args.submission
    if fmt == "gradescope" and os.path.isdir(path):
        from ..grade.gradescope import pick

        path, unreadable = pick(args.submission)
        path = path or os.path.join(args.submission, "submission.py")
    elif os.path.isdir(path):
        if args.format not in (None, "json"):
            return _fail(
                "a folder is graded into <name>.json and <name>.txt per submission plus grades.csv; "
                "--format applies to a single submission (or a Gradescope upload folder)"
            )
        from ..grade.batch import grade_folder

        return grade_folder(args, only)
    elif not os.path.isfile(path) or not os.access(path, os.R_OK):
        why = "no such file" if not os.path.exists(path) else "not a readable file"
        if fmt != "gradescope":
            return _fail(f"{path}: {why}")
        unreadable = f"cannot read the submission {os.path.basename(path)}: {why}"
    from ..grade.grader import grade
    from ..grade.report import render

    try:
        result = grade(
            path,
            only=only,
            seed=args.seed,
            rubric=rubric,
            timeout=args.timeout,
            memory_mb=args.memory,
            sandbox_mode=box,
            unreadable=unreadable,
        )
    except sandbox.SandboxError as e:
        if fmt == "gradescope" and results:
            _zero(results, args, rubric, only, "the grader's sandbox does not work here; tell the instructor")
        return _fail(str(e))
    except Exception:  # a bug in the grader: still leave a valid (zero) results file behind
        detail = traceback.format_exc()
        print(f"npgpt grade: internal error while grading {args.submission}:\n{detail}", file=sys.stderr)
        if results:
            _zero(results, args, rubric, only, "the grader failed; please report this to the instructor")
        return 2
    text = render(result, fmt, rubric)
    if results:
        _write(results, text)
    if args.report:
        _write(args.report, render(result, "text", rubric))
    if not results or fmt == "text":
        sys.stdout.write(text)
    else:
        print(f"{one_line(result.submission)}: {result.score:g}/{result.max_score:g} -> {results}")
    return 0


def _zero(results, args, rubric, only, note):
    """A results file in which every component scores 0 with `note` (nothing is run)."""
    from ..grade.grader import grade
    from ..grade.report import render
    from ..grade.sandbox import Sandbox

    box = Sandbox("none", False, note)
    result = grade(
        args.submission or "submission.py",
        only=only,
        seed=args.seed or 0,
        rubric=rubric,
        sandbox_mode=box,
        unreadable=note,
    )
    _write(results, render(result, args.format or "text", rubric))
