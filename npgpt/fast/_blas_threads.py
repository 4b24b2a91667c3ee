"""The fast path's threads: how many, the pool that runs blockwise passes, and BLAS's count.

Nothing here runs at import; everything starts on the first fast call and is process-wide.

How many threads (`threads()`), in this order:
1. the `threads=` given to `npgpt.fast.accelerate` (or `set_threads`);
2. else the user's OMP_NUM_THREADS, then OPENBLAS_NUM_THREADS (a positive integer);
3. else npgpt's choice: the CPUs this process may run on (os.sched_getaffinity), but one
   thread for a model below SMALL_MODEL parameters, whose passes are too short to share
   (docs/bench.md has the measurements).

The same count goes to the BLAS library through threadpoolctl (in the `train` and `bench`
extras). Without threadpoolctl, BLAS keeps the count it read from the environment at load
time; npgpt's own passes still follow the policy.

The pool is a concurrent.futures.ThreadPoolExecutor of threads - 1 workers (the calling thread
takes the first share). Its workers block on a queue when idle, they never spin. It is shut
down at interpreter exit (atexit) and whenever the count changes.

OpenBLAS's own idle threads do spin, about 0.1 s after each product, and would take the core
a blockwise pass hands out. The `npgpt` command sets OPENBLAS_THREAD_TIMEOUT=16 before NumPy
loads (npgpt/cli.py); a library user can set it in their environment.
"""

import atexit
import os
import threading

SMALL_MODEL = 2_000_000  # parameters: below this, npgpt's own choice is one thread

_lock = threading.Lock()
_threads = None  # the count in force (None: not chosen yet)
_pool = None
_blas_limiter = None


def _from_env():
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) >= 1:
            return int(value)
    return None


def available_cpus():
    """How many CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def choose(threads=None, n_params=None):
    """The thread count the policy gives (see the module docstring); changes nothing."""
    if threads is not None:
        if not (isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1):
            raise ValueError(f"npgpt.fast: threads must be an integer >= 1, got {threads!r}")
        return threads
    env = _from_env()
    if env is not None:
        return env
    if n_params is not None and n_params < SMALL_MODEL:
        return 1
    return available_cpus()


def set_threads(threads=None, n_params=None):
    """Put the policy's count in force for npgpt's passes and (with threadpoolctl) for BLAS."""
    global _threads, _blas_limiter
    n = choose(threads, n_params)
    with _lock:
        if n == _threads:
            return n
        _shutdown_pool()
        _threads = n
        if threads is not None or _from_env() is None:  # an env count is already BLAS's own
            try:
                from threadpoolctl import threadpool_limits
            except ImportError:  # documented fallback: BLAS keeps the count it started with
                pass
            else:
                if _blas_limiter is not None:
                    _blas_limiter.restore_original_limits()
                _blas_limiter = threadpool_limits(limits=n, user_api="blas")
    return n


def threads():
    """The count in force, chosen by the policy on first use."""
    return _threads if _threads is not None else set_threads()


def pool():
    """The worker pool (threads() - 1 workers), started on first use."""
    global _pool
    with _lock:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor

            _pool = ThreadPoolExecutor(max_workers=max(1, _threads - 1), thread_name_prefix="npgpt")
        return _pool


def _shutdown_pool():
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=True)
        _pool = None


def shutdown():
    """Stop the pool's workers (a later fast call starts them again)."""
    with _lock:
        _shutdown_pool()


atexit.register(shutdown)
