"""Wall time, validation loss and peak memory of the README's training command, idle and on a
busy machine, side by side with nanoGPT's train.py at the same configuration.

Scenarios (each run is a fresh process; npgpt and nanoGPT take turns, so both see the same
machine):
  idle      one run alone
  busy      one run beside a competing `python -c "while True: pass"` that spins throughout
  pair      two copies of the same command started together (each copy's figures reported)

    python benchmarks/busy_machine.py --nanogpt PATH/TO/nanoGPT --nanogpt-python PYTHON_WITH_TORCH

nanoGPT is not a dependency: without --nanogpt the script says how to get it and times npgpt
alone. nanoGPT's tree is never written to: its train.py, model.py, configurator.py, config/
and data/shakespeare_char/prepare.py are copied into a temporary directory, with the corpus
npgpt embeds as data/shakespeare_char/input.txt, so prepare.py has nothing to download.
Writes a Markdown table to stdout (and --json FILE); docs/bench.md keeps the measured figures.
This is a benchmark, not a test: it asserts nothing.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

# the README's command (nanoGPT's CPU settings of shakespeare_char); --max-iters may shorten it
CONFIG = {
    "block_size": 64,
    "batch_size": 12,
    "n_layer": 4,
    "n_head": 4,
    "n_embd": 128,
    "max_iters": 2000,
    "lr_decay_iters": 2000,
    "dropout": 0.0,
}
NANOGPT_FILES = ["train.py", "model.py", "configurator.py", "config", "data/shakespeare_char/prepare.py"]
GET_NANOGPT = "git clone https://github.com/karpathy/nanoGPT (and a Python with torch and numpy to run it)"


def npgpt_cmd(cfg, out_dir, extra):
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in cfg.items()]
    return [sys.executable, "-m", "npgpt", "train", *flags, f"--out-dir={out_dir}", "--no-progress", *extra]


def nanogpt_cmd(python, tree, cfg, out_dir):
    # nanoGPT README's CPU command; eval_iters 20 and eval_interval 250 as npgpt's defaults
    flags = [f"--{k}={v}" for k, v in cfg.items()]
    return [
        python,
        str(tree / "train.py"),
        str(tree / "config" / "train_shakespeare_char.py"),
        "--device=cpu",
        "--compile=False",
        "--eval_iters=20",
        "--log_interval=100",
        f"--out_dir={out_dir}",
        *flags,
    ]


def prepare_nanogpt(src, python, work):
    """A private copy of the files nanoGPT's run needs, with the corpus in place; -> its path."""
    tree = work / "nanoGPT"
    for rel in NANOGPT_FILES:
        s, d = src / rel, tree / rel
        d.parent.mkdir(parents=True, exist_ok=True)
        if s.is_dir():
            shutil.copytree(s, d)
        else:
            shutil.copy(s, d)
    corpus = resources.files("npgpt").joinpath("data/tinyshakespeare.txt.gz").read_bytes()
    (tree / "data" / "shakespeare_char" / "input.txt").write_bytes(gzip.decompress(corpus))
    env = dict(os.environ)
    has_requests = subprocess.run([python, "-c", "import requests"], capture_output=True).returncode == 0
    if not has_requests:  # prepare.py imports requests, used only to download input.txt
        stub = work / "stub"
        stub.mkdir()
        (stub / "requests.py").write_text("def get(*a, **k):\n    raise RuntimeError('no downloads here')\n")
        env["PYTHONPATH"] = str(stub)
    subprocess.run(
        [python, "prepare.py"],
        cwd=tree / "data" / "shakespeare_char",
        env=env,
        check=True,
        capture_output=True,
    )
    return tree


def start(cmd, cwd):
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc, t0):
    """Wait for `proc`; -> (wall seconds, final val loss or None, peak RSS in MB, output)."""
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    losses = re.findall(r"val loss (\d+\.\d+)", out)
    if proc.returncode != 0:
        print(f"  exit {proc.returncode}:\n{out[-2000:]}", file=sys.stderr)
    return {
        "wall_s": wall,
        "val_loss": float(losses[-1]) if losses else None,
        "peak_rss_mb": usage.ru_maxrss / 1024,  # Linux: KiB
        "exit": proc.returncode,
    }


def run_together(cmds, cwd):  # nanoGPT's train.py reads configurator.py and data/ from its cwd
    t0 = time.perf_counter()
    procs = [start(c, cwd) for c in cmds]
    return [finish(p, t0) for p in procs]


def spinner():
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nanogpt", type=Path, default=None, help=f"a nanoGPT checkout (get it: {GET_NANOGPT})")
    ap.add_argument(
        "--nanogpt-python", default=sys.executable, help="a Python with torch and numpy (default: this one)"
    )
    ap.add_argument(
        "--max-iters", type=int, default=CONFIG["max_iters"], help="shorten every run (default: 2000)"
    )
    ap.add_argument("--scenarios", default="idle,busy,pair", help="comma-separated (default: idle,busy,pair)")
    ap.add_argument(
        "--systems",
        default="npgpt,nanoGPT",
        help="which to run (default: npgpt,nanoGPT; nanoGPT needs --nanogpt)",
    )
    ap.add_argument("--npgpt-args", default="", help="extra flags for npgpt train, e.g. '--threads 1'")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()

    cfg = {**CONFIG, "max_iters": args.max_iters, "lr_decay_iters": args.max_iters}
    if args.max_iters % 250:  # both evaluate every 250 iterations; nanoGPT only then, so at the end too
        cfg["eval_interval"] = args.max_iters
    wanted = set(args.systems.split(","))
    systems = ["npgpt"] if "npgpt" in wanted else []
    if "nanoGPT" not in wanted:
        pass
    elif args.nanogpt is None:
        print(
            f"nanoGPT not given (--nanogpt PATH): timing npgpt alone. To compare: {GET_NANOGPT}",
            file=sys.stderr,
        )
    elif not (args.nanogpt / "train.py").is_file():
        sys.exit(f"--nanogpt {args.nanogpt}: no train.py there; get nanoGPT with: {GET_NANOGPT}")
    else:
        systems.append("nanoGPT")
    results = []
    with tempfile.TemporaryDirectory(prefix="npgpt-busy-") as tmp:
        work = Path(tmp)
        tree = prepare_nanogpt(args.nanogpt, args.nanogpt_python, work) if "nanoGPT" in systems else None
        runs = 0

        def cmd(system):
            nonlocal runs
            runs += 1
            out = work / f"out{runs}"
            if system == "npgpt":
                return npgpt_cmd(cfg, out, args.npgpt_args.split())
            return nanogpt_cmd(args.nanogpt_python, tree, cfg, out)

        for scenario in args.scenarios.split(","):
            for system in systems:
                before = load()
                print(f"... {scenario} {system} (load {before})", file=sys.stderr, flush=True)
                spin = spinner() if scenario == "busy" else None
                try:
                    copies = 2 if scenario == "pair" else 1
                    rs = run_together(
                        [cmd(system) for _ in range(copies)], tree if system == "nanoGPT" else work
                    )
                finally:
                    if spin is not None:
                        spin.send_signal(signal.SIGTERM)
                        spin.wait()
                for i, r in enumerate(rs):
                    results.append(
                        {"scenario": scenario, "system": system, "copy": i, "load_before": before, **r}
                    )

    idle = {r["system"]: r["wall_s"] for r in results if r["scenario"] == "idle" and r["copy"] == 0}
    print(f"configuration: {cfg}; npgpt extra flags: {args.npgpt_args or '(none)'}")
    print("| scenario | system | wall s | x idle | val loss | peak RSS MB | load before |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        ratio = f"{r['wall_s'] / idle[r['system']]:.2f}" if r["system"] in idle else "-"
        val = f"{r['val_loss']:.4f}" if r["val_loss"] is not None else "-"
        name = r["scenario"] + (f" (copy {r['copy'] + 1})" if r["scenario"] == "pair" else "")
        print(
            f"| {name} | {r['system']} | {r['wall_s']:.1f} | {ratio} | {val} | {r['peak_rss_mb']:.0f} | "
            f"{r['load_before']} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"config": cfg, "results": results}, indent=1))


if __name__ == "__main__":
    main()
