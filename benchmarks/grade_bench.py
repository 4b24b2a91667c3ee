"""How long `npgpt grade` takes: one correct seven-component submission, and a folder of them.

    python benchmarks/grade_bench.py [--runs 5] [--folder 100] [--jobs 2] [--sandbox auto]

Prints, per sandbox mode asked for, the wall-clock seconds of `npgpt grade` on
tests/grade/submissions/correct.py (all seven components; median and range of --runs, the modes
interleaved run by run so a change in machine load hits them alike), then one folder run of
--folder copies with --jobs, and the load average before and after. A measurement, not a test:
nothing here asserts a time. Figures are in docs/grading.md.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUB = os.path.join(ROOT, "tests", "grade", "submissions", "correct.py")
ALL = "layernorm,gelu,linear,feedforward,attention,block,crossentropy"


def npgpt(*args):
    cmd = [sys.executable, "-m", "npgpt", "grade", *args]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"grade_bench: {' '.join(cmd)} failed: {p.stderr.strip()[-300:]}")
    return seconds, p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--folder", type=int, default=100, help="submissions in the folder run (0: none)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sandbox", default="auto", help="comma-separated modes (auto, bwrap, user, none)")
    args = ap.parse_args()
    modes = args.sandbox.split(",")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cpus: {os.cpu_count()}")
    times = {m: [] for m in modes}
    for _ in range(args.runs):
        for m in modes:
            s, out = npgpt(SUB, "--only", ALL, "--seed", "1", "--sandbox", m)
            if "total: 70/70" not in out:
                sys.exit(f"grade_bench: the correct submission did not score 70/70 in mode {m}")
            times[m].append(s)
    for m, ts in times.items():
        print(
            f"one submission, 7 components, --sandbox {m}: median {statistics.median(ts):.2f} s "
            f"(min {min(ts):.2f}, max {max(ts):.2f}, {len(ts)} runs)"
        )
    if args.folder:
        d = tempfile.mkdtemp(prefix="npgpt-grade-bench-")
        try:
            subs = os.path.join(d, "subs")
            os.makedirs(subs)
            for i in range(args.folder):
                shutil.copy(SUB, os.path.join(subs, f"s{i:03d}.py"))
            s, _ = npgpt(
                subs, "--jobs", str(args.jobs), "--only", ALL, "--seed", "1", "--sandbox", modes[0],
                "--results", os.path.join(d, "out"),
            )  # fmt: skip
            print(
                f"folder of {args.folder}, --jobs {args.jobs}, --sandbox {modes[0]}: {s:.1f} s "
                f"({s / args.folder:.2f} s per submission)"
            )
        finally:
            shutil.rmtree(d, ignore_errors=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
