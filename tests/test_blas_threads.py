"""npgpt/_blas_threads.py: importing npgpt before NumPy sets OPENBLAS_THREAD_TIMEOUT, unless the
user set it, and never claims to when NumPy (and so OpenBLAS) was loaded first."""

import os
import subprocess
import sys

import pytest

SHOW = "import os; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT', 'unset'))"


def timeout_after(code, env_value=None):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if env_value is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = env_value
    res = subprocess.run([sys.executable, "-c", f"{code}; {SHOW}"], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


@pytest.mark.parametrize(
    "code,env_value,expected",
    [
        ("import npgpt", None, "16"),  # npgpt first: OpenBLAS will read 16 when NumPy loads it
        ("import npgpt", "28", "28"),  # the user's value wins
        ("import numpy; import npgpt", None, "unset"),  # too late to matter: left alone
    ],
)
def test_openblas_thread_timeout(code, env_value, expected):
    got = timeout_after(code, env_value)
    assert got == expected, (
        f"after `{code}` with OPENBLAS_THREAD_TIMEOUT={env_value}: {got}, expected {expected}"
    )
