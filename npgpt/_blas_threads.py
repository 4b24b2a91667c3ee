"""Let OpenBLAS's idle threads sleep at once, so npgpt's elementwise passes get the cores.

After each matrix product OpenBLAS's worker threads spin, by default for 2^28 cycles (about
0.1 s), before they sleep. In a training step a product comes every few milliseconds, so they
never sleep, and the second core that `_workspace.blockwise` hands a share of each elementwise
pass to is busy spinning: measured here, a softmax pass after a product took as long on two
threads as on one. OPENBLAS_THREAD_TIMEOUT=16 (2^16 cycles, about 25 us) frees the cores at
once; the next product wakes the threads again. Measured on the GPT-2 124M step at B1xT1024,
one process per setting: 1.22x and 1.24x the GEMM floor with the default, 1.14x and 1.15x
with 16 (docs/bench.md).

OpenBLAS reads the variable once, when NumPy loads it: this takes effect only when npgpt is
imported before NumPy (the `npgpt` command always is). A value the user set wins.
"""

import os
import sys

if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "16")
