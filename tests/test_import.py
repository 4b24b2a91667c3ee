"""`import npgpt` changes no environment variable and starts no thread; nor does using the
reference components. Each case runs in a fresh interpreter."""

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, os, sys, threading
env0, threads0 = dict(os.environ), threading.active_count()
{code}
print(json.dumps({{
    "env_changed": sorted(k for k in set(env0) | set(os.environ) if env0.get(k) != os.environ.get(k)),
    "threads": [threads0, threading.active_count()],
    "numpy_loaded": "numpy" in sys.modules,
}}))
"""


def probe(code):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    res = subprocess.run(
        [sys.executable, "-c", PROBE.format(code=code)], env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, f"the probe failed:\n{res.stderr[-2000:]}"
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_import_npgpt_loads_no_numpy_changes_no_env_and_starts_no_thread():
    got = probe("import npgpt")
    assert got["env_changed"] == [], f"import npgpt changed environment variables {got['env_changed']}"
    assert got["threads"][1] == got["threads"][0], f"threads before/after import npgpt: {got['threads']}"
    assert not got["numpy_loaded"], (
        "import npgpt loaded NumPy (the npgpt command could then not set OpenBLAS up)"
    )


@pytest.mark.parametrize(
    "code",
    [
        "import npgpt; npgpt.GPTModel",
        "import npgpt.fast",  # the fast path's module: its state starts on first use, not here
        # the reference at work: a forward and backward through a whole model and loss
        "import numpy as np, npgpt\n"
        "cfg = dict(vocab_size=11, context_length=8, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.1,"
        " qkv_bias=False)\n"
        "m, ce = npgpt.GPTModel(cfg, rng=0), npgpt.CrossEntropyLoss()\n"
        "ids = np.arange(12).reshape(2, 6) % 11\n"
        "ce.forward(m.forward(ids), ids)\n"
        "m.backward(ce.backward())",
    ],
)
def test_reference_and_importing_fast_change_nothing(code):
    got = probe(code)
    assert got["env_changed"] == [], f"`{code}` changed environment variables {got['env_changed']}"
    assert got["threads"][1] == got["threads"][0], f"`{code}`: threads before/after {got['threads']}"


def test_the_npgpt_command_sets_openblas_thread_timeout_before_numpy_loads():
    code = "from npgpt.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass"
    got = probe(code)
    assert got["env_changed"] == ["OPENBLAS_THREAD_TIMEOUT"], f"the command changed {got['env_changed']}"
    res = subprocess.run(
        [sys.executable, "-c", code + "\nimport os; print(os.environ['OPENBLAS_THREAD_TIMEOUT'])"],
        env={**os.environ, "OPENBLAS_THREAD_TIMEOUT": "28"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.stdout.split()[-1] == "28", f"the user's OPENBLAS_THREAD_TIMEOUT=28 became {res.stdout!r}"
