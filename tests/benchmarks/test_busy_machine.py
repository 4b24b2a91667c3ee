"""benchmarks/busy_machine.py: runs the README command and nanoGPT's train.py from a private
copy (never writing into the nanoGPT checkout), gives prepare.py the embedded corpus so that it
downloads nothing, and reads back each run's validation loss. A fake nanoGPT stands in for the
real one (torch is never imported here); the timings themselves are not tested."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "busy_machine.py"

FAKE_PREPARE = """
import os, sys
import requests  # the real prepare.py imports it; it must not be called
here = os.path.dirname(os.path.abspath(__file__))
text = open(os.path.join(here, "input.txt"), encoding="utf-8").read()
assert len(text) == 1115394, len(text)
open(os.path.join(here, "train.bin"), "w").write("ok")
"""
FAKE_TRAIN = """
import os, sys
assert os.path.exists("configurator.py") and os.path.exists("data/shakespeare_char/train.bin"), os.getcwd()
args = dict(a[2:].split("=", 1) for a in sys.argv[2:])
assert args["device"] == "cpu" and args["compile"] == "False" and args["n_embd"] == "128", args
print(f"step {args['max_iters']}: train loss 1.2500, val loss 2.5000")
"""


def _fake_nanogpt(root):
    files = {
        "train.py": FAKE_TRAIN,
        "model.py": "",
        "configurator.py": "",
        "config/train_shakespeare_char.py": "",
        "data/shakespeare_char/prepare.py": FAKE_PREPARE,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return {p: p.stat().st_mtime_ns for p in root.rglob("*")}


def test_runs_both_from_a_private_copy_and_reports_their_losses(tmp_path):
    nano = tmp_path / "nanoGPT"
    before = _fake_nanogpt(nano)
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--nanogpt", str(nano), "--max-iters", "2", "--scenarios", "idle"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    after = {p: p.stat().st_mtime_ns for p in nano.rglob("*")}
    assert after == before, f"the nanoGPT checkout was written to: {set(after) ^ set(before)}"
    rows = {
        line.split("|")[2].strip(): line.split("|")
        for line in r.stdout.splitlines()
        if line.startswith("| idle")
    }
    assert set(rows) == {"npgpt", "nanoGPT"}, r.stdout
    assert rows["nanoGPT"][5].strip() == "2.5000", f"nanoGPT's val loss misread: {rows['nanoGPT']}"
    assert 3.0 < float(rows["npgpt"][5]) < 4.5, (
        f"npgpt's val loss after 2 iterations (ln 65 = 4.17): {rows['npgpt']}"
    )


def test_without_nanogpt_it_says_how_to_get_it_and_times_npgpt_alone(tmp_path):
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--max-iters", "1", "--scenarios", "idle"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "git clone https://github.com/karpathy/nanoGPT" in r.stderr, r.stderr
    assert "| idle | npgpt |" in r.stdout and "nanoGPT |" not in r.stdout, r.stdout
