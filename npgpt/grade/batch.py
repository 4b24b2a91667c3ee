"""Grade a folder of submissions in parallel: one grader process per submission, a CSV of all.

Submissions are the folder's *.py files and, for a folder per student, each subfolder's
submission.py (or its only .py file). Each is graded by a separate `npgpt grade` process (so the
sandbox's preexec_fn never runs in a threaded process), in a session of its own, with a deadline
of its own; --jobs of them at a time. Written to --results (default <folder>_results/):
<name>.json and <name>.txt per submission and grades.csv with one row per submission and one
column per test, rewritten after each submission so a run cut short still leaves the grades so
far. In the sandboxed modes a submission cannot see, signal or stop this process or its graders.
"""

import csv
import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from .frames import one_line

NPGPT_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from npgpt.cli import main; sys.exit(main())"


def find_submissions(folder):
    """(name, path) of every submission in `folder`, sorted by name."""
    found = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_symlink() and (entry.name.endswith(".py") or entry.is_dir()):
            # Never followed: a link to another student's folder or file would be graded as this
            # one. Listed, so that its row says why it scores 0.
            found.append((entry.name[:-3] if entry.name.endswith(".py") else entry.name, entry.path))
        elif entry.is_file() and entry.name.endswith(".py"):
            found.append((entry.name[:-3], entry.path))
        elif entry.is_dir() and not entry.name.startswith("."):
            pys = sorted(f for f in os.listdir(entry.path) if f.endswith(".py"))
            pick = "submission.py" if "submission.py" in pys else pys[0] if len(pys) == 1 else None
            if pick:
                found.append((entry.name, os.path.join(entry.path, pick)))
    # alice.py and a folder alice/ would write the same alice.json, and each row would read
    # whichever finished last: the second gets a name of its own.
    names, unique = {n for n, _ in found}, []
    for name, path in found:
        if any(name == n for n, _ in unique):
            k = 2
            while f"{name}-{k}" in names:
                k += 1
            name = f"{name}-{k}"
            names.add(name)
        unique.append((name, path))
    return unique


def _grade_one(name, path, out, args, only):
    if os.path.islink(path):
        return name, None, "the submission is a symbolic link, which is not followed: 0 points"
    cmd = [
        sys.executable,
        "-c",
        BOOT,
        NPGPT_PARENT,
        "grade",
        path,
        "--format",
        "json",
        "--results",
        os.path.join(out, f"{name}.json"),
        "--report",
        os.path.join(out, f"{name}.txt"),
        "--timeout",
        str(args.timeout),
        "--memory",
        str(args.memory),
    ]
    for flag, value in (
        ("--only", only and ",".join(only)),
        ("--seed", args.seed),
        ("--rubric", args.rubric),
        ("--sandbox", getattr(args, "sandbox", "auto")),
    ):
        if value is not None:
            cmd += [flag, str(value)]
    if getattr(args, "require_sandbox", False):
        cmd.append("--require-sandbox")
    n = len(only) if only else 7
    deadline = 60 + n * (args.timeout + 15)  # every component timing out, and then some
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",  # a file name that is not UTF-8 comes back in the grader's messages
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        stdout, stderr = proc.communicate()
        stderr = f"the grader of this submission did not finish within {deadline:g} s and was stopped"
    try:
        with open(os.path.join(out, f"{name}.json")) as f:
            return name, json.load(f), ""
    except (OSError, ValueError):
        return name, None, " ".join((stderr or stdout or "the grader left no results").split())[-500:]


def grade_folder(args, only):
    folder = os.path.abspath(args.submission)
    out = args.results or folder.rstrip(os.sep) + "_results"
    os.makedirs(out, mode=0o700, exist_ok=True)  # a new one: closed to the sandbox uids (user mode)
    subs = find_submissions(folder)
    if not subs:
        print(f"npgpt grade: no submissions (*.py, or folders with one) in {folder}", file=sys.stderr)
        return 2
    rows, columns = [], []
    path = os.path.join(out, "grades.csv")
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(_grade_one, name, path, out, args, only) for name, path in subs]
        for i, fut in enumerate(futures, 1):
            name, data, error = fut.result()
            row = {"submission": name, "score": 0, "max_score": "", "error": error}
            if data:
                row.update(score=data["score"], max_score=data["max_score"])
                for c in data["components"]:
                    for t in c["tests"]:
                        row[t["name"]] = t["score"]
                        if t["name"] not in columns:
                            columns.append(t["name"])
            rows.append(row)
            _write_csv(path, rows, columns)
            shown = f"{row['score']:g}/{row['max_score']:g}" if data else "grading failed"
            print(f"[{i}/{len(subs)}] {one_line(name)}: {shown}", file=sys.stderr, flush=True)
    print(f"graded {len(rows)} submissions -> {path}")
    return 0


def _cell(value):
    """A CSV cell a spreadsheet shows as text: a name or message on one line, without control or
    invisible characters, and never a formula (a file named "=HYPERLINK(...).py")."""
    if not isinstance(value, str):
        return value
    value = one_line(value, 500)
    return "'" + value if value[:1] in ("=", "+", "-", "@") else value


def _write_csv(path, rows, columns):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, ["submission", "score", "max_score"] + columns + ["error"], restval="")
        writer.writeheader()
        writer.writerows({k: _cell(v) for k, v in row.items()} for row in rows)
    os.replace(tmp, path)
