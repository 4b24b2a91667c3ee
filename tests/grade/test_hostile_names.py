"""Folder runs with the names and links a student may choose: formulas, escape sequences,
newlines and bytes that are not UTF-8 in file names, and a submission that is a symbolic link to
another student's folder or file, files named like the modules the harness imports (numpy.py,
npgpt.py, sitecustomize.py). Contained: every name reaches grades.csv, the reports and the
progress lines as one line of visible text that no spreadsheet reads as a formula, and a link is
never followed (its row scores 0 and says why); a file named like a module is only ever the
submission (full marks: it shadowed nothing). Runs in whatever mode `auto` picks here: these
are the grader's own outputs, the same in every mode.
"""

import csv
import os
import shutil
import subprocess
import sys
import unicodedata

from npgpt.grade import frames, sandbox
from npgpt.grade.batch import _cell

HOSTILE = os.path.join(os.path.dirname(__file__), "hostile")
BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from npgpt.cli import main; sys.exit(main())"
NAMES = ['=HYPERLINK("evil","x")', "evil\x1b[2J\ntotal: 99", "-2+3", "@SUM(A1)"]


def _visible_one_line(text):
    bad = [c for c in text if c in "\n\r\x1b" or unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]
    return not bad


def test_names_and_links_chosen_by_students(tmp_path):
    victim, subs, out = tmp_path / "victim", tmp_path / "subs", tmp_path / "out"
    victim.mkdir()
    subs.mkdir()
    shutil.copy(os.path.join(HOSTILE, "honest_correct.py"), victim / "submission.py")
    os.symlink(victim, subs / "copycat")  # another student's folder
    os.symlink(victim / "submission.py", subs / "linked.py")  # another student's file
    wrong = os.path.join(HOSTILE, "nan_gradients.py")  # GELU scores 0
    for name in NAMES:
        shutil.copy(wrong, subs / f"{name}.py")
    shutil.copy(wrong, os.path.join(os.fsencode(subs), b"bytes\xff.py"))
    for shadow in ("numpy", "npgpt", "sitecustomize"):  # only ever the submission, never imported
        shutil.copy(os.path.join(HOSTILE, "honest_correct.py"), subs / f"{shadow}.py")
    shutil.copy(os.path.join(HOSTILE, "honest_correct.py"), subs / "twin.py")  # twin.json ...
    (subs / "twin").mkdir()
    shutil.copy(wrong, subs / "twin" / "submission.py")  # ... twice, unless renamed
    parent = os.path.dirname(sandbox.NPGPT_DIR)
    cmd = [sys.executable, "-c", BOOT, parent, "grade", str(subs), "--only", "gelu", "--jobs", "2"]
    cmd += ["--seed", "1", "--timeout", "6", "--results", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, errors="replace")
    assert proc.returncode == 0, proc.stderr[-1000:]
    assert _visible_one_line(proc.stderr.replace("\n", "")), f"progress lines: {proc.stderr!r}"

    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(NAMES) + 8, [r["submission"] for r in rows]
    for row in rows:
        for col, cell in row.items():
            assert _visible_one_line(cell), f"grades.csv {col}: {cell!r}"
            assert cell[:1] not in "=+-@" or cell == "", f"grades.csv {col} is a formula: {cell!r}"
    by = {r["submission"]: r for r in rows}
    for link in ("copycat", "linked"):
        assert by[link]["score"] == "0" and "symbolic link" in by[link]["error"], by[link]
    assert {"'" + NAMES[0], "evil total: 99", "'-2+3", "'@SUM(A1)"} <= set(by)
    for shadow in ("numpy", "npgpt", "sitecustomize"):
        assert by[shadow]["score"] == "10.0", by[shadow]
    twins = sorted(by[n]["score"] for n in ("twin", "twin-2"))  # the folder and the file, one each
    assert twins == ["0.0", "10.0"], (by["twin"], by["twin-2"])
    for name in NAMES:
        with open(out / f"{name}.txt", encoding="utf-8") as f:
            head = f.read().splitlines()[:3]
        assert all(_visible_one_line(ln) for ln in head) and head[0].startswith("npgpt grade: "), head
        assert not any(ln.startswith("total:") for ln in head), head


def test_a_cell_is_text_on_one_line():
    assert _cell("=1+1") == "'=1+1" and _cell("+1") == "'+1" and _cell("@x") == "'@x"
    assert _cell("a\nb\x1b[31mc\u202ed\u200b") == "a bcd"
    assert _cell(2.5) == 2.5, "scores stay numbers"


def test_clean_strips_invisible_and_bidirectional_unicode():
    text = "a\u202db\u202bc\u2066d\u2069e\u200bf\u200fg\ufeffh\u2028i\u2029j\ud800k\x1b[2Jl\tm\nn"
    assert frames.clean(text) == "abcdefghijkl\tm\nn", repr(frames.clean(text))
