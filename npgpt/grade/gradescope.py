"""Gradescope: the autograder zip (`npgpt grade --gradescope-zip OUT.zip`) and the uploaded file.

The zip holds setup.sh, run_autograder and a copy of the npgpt package (npgpt-src/npgpt).
setup.sh installs Python, numpy and bubblewrap, puts the grader where only root can read it, and
runs the sandbox self-test of the mode it will use, so a broken sandbox fails the instructor's
build instead of zeroing every student. run_autograder grades whichever .py file the student
uploaded (`pick`), and always leaves a results.json.
"""

import os
import shlex
import stat
import zipfile

from .sandbox import NPGPT_DIR

SETUP = """#!/usr/bin/env bash
# npgpt autograder set-up (built by `npgpt grade --gradescope-zip`). Runs as root at build time.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q python3 python3-venv bubblewrap util-linux
python3 -m venv /opt/npgpt
/opt/npgpt/bin/pip install -q "numpy>=1.24"
# The grader (reference layers, rubric, scoring) is readable by root alone: a submission that
# runs as another uid (user mode) cannot read it, and bwrap mode never mounts it.
rm -rf /opt/npgpt/grader
mkdir -p /opt/npgpt/grader
cp -r /autograder/source/npgpt-src/npgpt /opt/npgpt/grader/
if [ -f /autograder/source/npgpt-src/rubric.json ]; then
    cp /autograder/source/npgpt-src/rubric.json /opt/npgpt/grader/rubric.json
fi
chown -R root:root /opt/npgpt/grader /autograder/source
chmod -R go-rwx /opt/npgpt/grader /autograder/source
# Fail the build now if the sandbox does not work here.
cd /opt/npgpt/grader
/opt/npgpt/bin/python -m npgpt grade --self-test --sandbox {sandbox} --require-sandbox
"""

RUN = """#!/usr/bin/env bash
# npgpt autograder (built by `npgpt grade --gradescope-zip`): grades the .py file the student
# uploaded and writes /autograder/results/results.json (always, even for a missing file).
mkdir -p /autograder/results
# The metadata holds earlier submissions' full results, hidden tests included: closed to the
# sandbox's uid (user mode; bwrap mode never mounts it).
chmod go-rwx /autograder/results /autograder/submission_metadata.json 2>/dev/null || true
cd /opt/npgpt/grader
exec /opt/npgpt/bin/python -m npgpt grade /autograder/submission --format gradescope \\
    --results /autograder/results/results.json --sandbox {sandbox} --require-sandbox{extra}
"""


def build_zip(out, only, sandbox="auto", rubric=None, timeout=None, memory=None):
    """Write the autograder zip to `out`; returns the list of names in it."""
    extra = ""
    if only:
        extra += f" \\\n    --only {shlex.quote(','.join(only))}"
    if rubric:
        extra += " \\\n    --rubric /opt/npgpt/grader/rubric.json"
    if timeout:
        extra += f" --timeout {float(timeout):g}"
    if memory:
        extra += f" --memory {int(memory)}"
    names = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (
            ("setup.sh", SETUP.format(sandbox=sandbox)),
            ("run_autograder", RUN.format(sandbox=sandbox, extra=extra)),
        ):
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | 0o755) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
            names.append(name)
        if rubric:
            z.write(rubric, "npgpt-src/rubric.json")
            names.append("npgpt-src/rubric.json")
        for dirpath, dirnames, filenames in os.walk(NPGPT_DIR):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for f in sorted(filenames):
                if f.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(dirpath, f)
                arc = os.path.join("npgpt-src", "npgpt", os.path.relpath(path, NPGPT_DIR))
                z.write(path, arc)
                names.append(arc)
    return names


def pick(folder):
    """(path or None, message): the .py file to grade in a Gradescope submission folder.

    submission.py when present; else the only .py file; else, of several, the one that defines
    the most graded classes or function pairs (a tie or none is a message, not a guess).
    """
    try:
        pys = []
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
            pys += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
    except OSError as e:
        return None, f"cannot read the submission folder: {e}"
    if not pys:
        return None, "no .py file was uploaded: upload the file with your classes (for example layernorm.py)"
    named = [p for p in pys if os.path.basename(p) == "submission.py"]
    if len(named) == 1:
        return named[0], ""
    if len(pys) == 1:
        return pys[0], ""
    from .grader import detect

    counts = []
    for p in pys:
        try:  # never through a link (a repository may hold one) nor into a FIFO or a device
            with os.fdopen(os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise OSError("not a regular file")
                found, _ = detect(f.read(2 << 20).decode("utf-8", "replace"), p)
        except (OSError, ValueError, RecursionError):
            found = {}
        counts.append((len(found), p))
    counts.sort(reverse=True)
    names = ", ".join(os.path.relpath(p, folder) for p in pys)
    if counts[0][0] == 0:
        return None, f"none of the uploaded files ({names}) defines a graded class or function pair"
    if len(counts) > 1 and counts[1][0] == counts[0][0]:
        return None, f"several uploaded files ({names}) define graded components: upload one file"
    return counts[0][1], ""
