"""`npgpt grade --self-test`: grade a probe in the chosen sandbox and check it is contained.

The probe is a correct GELU whose module-level code tries what a hostile submission would: read
the grader's reference code and rubric, reach a loopback TCP listener of the grader, signal the
grader, write into its working folder, and reports what worked on stdout. The self-test passes
when the GELU gets full marks and (in the isolated modes) none of the attempts worked.
"""

import json
import os
import socket
import tempfile

from . import sandbox
from .grader import grade

PROBE = """import json, os, socket
import numpy as np
from npgpt import Module

seen = {"uid": os.getuid()}
for key, path in (("read_reference", %(ref)r), ("read_rubric", %(rubric)r)):
    try:
        with open(path, "rb") as f:
            seen[key] = len(f.read(1)) > 0
    except OSError:
        seen[key] = False
try:
    s = socket.create_connection(("127.0.0.1", %(port)d), timeout=1)
    s.close()
    seen["network"] = True
except OSError:
    seen["network"] = False
try:
    os.kill(%(pid)d, 0)
    seen["signal_grader"] = True
except OSError:
    seen["signal_grader"] = False
try:
    with open("probe-was-here", "w") as f:
        f.write("x")
    seen["write_cwd"] = True
except OSError:
    seen["write_cwd"] = False
print("PROBE " + json.dumps(seen))


class GELU(Module):
    def forward(self, x):
        self.x = x
        self.t = np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))
        return 0.5 * x * (1.0 + self.t)

    def backward(self, dout):
        x, t = self.x, self.t
        dt = (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3 * 0.044715 * x * x)
        return dout * (0.5 * (1.0 + t) + 0.5 * x * dt)
"""


def run(mode="auto", require=False):
    """(ok, lines): the self-test's verdict and a line per check."""
    box = mode if isinstance(mode, sandbox.Sandbox) else sandbox.choose(mode)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        with tempfile.TemporaryDirectory(prefix="npgpt-selftest-") as d:
            path = os.path.join(d, "probe.py")
            with open(path, "w") as f:
                f.write(
                    PROBE
                    % {
                        "ref": os.path.join(sandbox.NPGPT_DIR, "layers", "gelu.py"),
                        "rubric": os.path.join(sandbox.NPGPT_DIR, "grade", "rubric.json"),
                        "port": listener.getsockname()[1],
                        "pid": os.getpid(),
                    }
                )
            result = grade(path, only=["gelu"], seed=0, sandbox_mode=box, timeout=30.0)
    finally:
        listener.close()
    comp = result.components[0]
    seen = {}
    for line in comp.stdout.splitlines():
        if line.startswith("PROBE "):
            try:
                seen = json.loads(line[6:])
            except ValueError:
                seen = {}
    lines = [f"sandbox: {box.mode} ({box.detail}); memory cap: {box.memory}"]
    ok = result.score == result.max_score and isinstance(seen, dict) and bool(seen)
    lines.append(
        f"a correct GELU scores {result.score:g}/{result.max_score:g}"
        + (f" ({comp.problem})" if comp.problem else "")
    )
    checks = ("read_reference", "read_rubric", "network", "signal_grader", "write_cwd")
    for key in checks:
        got = seen.get(key)
        contained = got is False
        if box.isolated and not contained:
            ok = False
        lines.append(
            f"{key.replace('_', ' ')}: {'blocked' if contained else 'POSSIBLE' if got else 'unknown'}"
        )
    if os.geteuid() == 0 and box.mode != "none":
        uid = seen.get("uid")
        if uid == 0 or uid is None:
            ok = False
        lines.append(f"the submission runs as uid {uid} (the grader as 0)")
    if require and not box.isolated:
        ok = False
    return ok, lines
