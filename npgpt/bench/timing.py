"""Timing for the benchmark: cases run interleaved, round by round, so a noisy neighbour
slows them alike; warm-up rounds dropped; fast cases repeated back to back. Method: docs/bench.md.
"""

import math
import statistics
import time
from dataclasses import dataclass, field


@dataclass
class Timing:
    """Seconds of each repeat of one case."""

    times: list = field(default_factory=list)

    @property
    def median(self):
        return statistics.median(self.times)

    @property
    def min(self):
        return min(self.times)

    @property
    def max(self):
        return max(self.times)


def interleave(fns, repeats=5, warmup=1, pause=0.0, min_time=0.0):
    """Run each callable of `fns` (label -> fn) once per round; warm-up rounds are not kept.

    `pause` seconds of sleep before each run let the previous case's idle threads (OpenMP's
    and OpenBLAS's spin a while after their work) go to sleep, so they do not slow this one.
    A case faster than `min_time` (measured in the first round) is repeated back to back
    enough times to take that long, and its time per call is kept.
    """
    out = {label: Timing() for label in fns}
    number = dict.fromkeys(fns, 1)
    for r in range(max(warmup, 1 if min_time else 0) + repeats):
        for label, fn in fns.items():
            if pause:
                time.sleep(pause)
            t0 = time.perf_counter()
            for _ in range(number[label]):
                fn()
            dt = (time.perf_counter() - t0) / number[label]
            if r == 0 and min_time:
                number[label] = max(1, math.ceil(min_time / max(dt, 1e-9)))
            if r >= max(warmup, 1 if min_time else 0):
                out[label].times.append(dt)
    return out
