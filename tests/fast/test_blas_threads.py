"""npgpt/fast/_blas_threads.py: the thread policy (argument, then the user's environment, then
npgpt's choice), BLAS following it through threadpoolctl, and the pool shutting down."""

import json
import os
import subprocess
import sys

import pytest

from npgpt import GPTModel, LayerNorm
from npgpt.fast import _blas_threads, accelerate, reference

SMALL = dict(vocab_size=11, context_length=8, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False)


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    old = _blas_threads._threads
    yield monkeypatch
    _blas_threads.set_threads(old if old is not None else _blas_threads.available_cpus())


def test_an_explicit_count_wins_over_the_environment(clean_env):
    clean_env.setenv("OMP_NUM_THREADS", "3")
    assert _blas_threads.choose(threads=2) == 2, "threads=2 must win over OMP_NUM_THREADS=3"


@pytest.mark.parametrize("name", ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"])
def test_the_users_environment_wins_over_npgpts_choice(clean_env, name):
    clean_env.setenv(name, "3")
    assert _blas_threads.choose(n_params=10**9) == 3, f"{name}=3 not followed"
    assert _blas_threads.choose(n_params=10) == 3, f"{name}=3 not followed for a small model"


def test_omp_num_threads_comes_before_openblas_num_threads(clean_env):
    clean_env.setenv("OMP_NUM_THREADS", "2")
    clean_env.setenv("OPENBLAS_NUM_THREADS", "5")
    assert _blas_threads.choose() == 2


def test_npgpts_choice_is_one_thread_for_a_small_model_else_every_usable_cpu(clean_env):
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert _blas_threads.choose(n_params=_blas_threads.SMALL_MODEL - 1) == 1
    assert _blas_threads.choose(n_params=_blas_threads.SMALL_MODEL) == cpus
    assert _blas_threads.choose() == cpus, "no model size known: every usable CPU"


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_a_bad_count_is_a_clear_error(bad):
    with pytest.raises(ValueError, match=r"npgpt.fast: threads must be an integer >= 1, got"):
        accelerate(LayerNorm(4), threads=bad)


def test_accelerate_sets_npgpts_and_blass_count(clean_env):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    model = accelerate(GPTModel(SMALL, rng=0), threads=2)
    assert _blas_threads.threads() == 2
    blas = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    assert blas and all(n == 2 for n in blas), f"BLAS thread counts {blas}, expected 2"
    accelerate(model, threads=1)
    blas = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    assert all(n == 1 for n in blas), f"BLAS thread counts {blas} after threads=1"
    reference(model)


def test_the_pool_starts_on_first_use_and_shuts_down():
    """In a fresh process: no worker before a pass that needs them, workers during, none after
    shutdown(), and the interpreter exits normally with the pool still running."""
    code = """
import json, threading
import numpy as np
from npgpt import GELU
from npgpt.fast import _blas_threads, _workspace, accelerate, shutdown
g = accelerate(GELU(), threads=2)
before = threading.active_count()
_workspace.BLOCK = 64
g.forward(np.ones((64, 64)))
during = threading.active_count()
shutdown()
after = threading.active_count()
g.forward(np.ones((64, 64)))  # started again, and left running for atexit
print(json.dumps([before, during, after]))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    before, during, after = json.loads(res.stdout.strip().splitlines()[-1])
    assert during == before + 1, (
        f"threads before/during a blocked pass: {before}/{during}, expected one worker"
    )
    assert after == before, f"threads after shutdown(): {after}, expected {before}"
