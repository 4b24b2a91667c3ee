"""A GradeResult as text (for people), JSON (for scripts) or Gradescope's results.json.

Gradescope format (gradescope-autograders.readthedocs.io, "Autograder Specifications"): top-level
`score`, `execution_time` (seconds), `output`, `tests`; each test has `name`, `score`, `max_score`,
`status` ("passed" / "failed"), `output` and `visibility` (hidden, after_due_date,
after_published, visible).
"""

import json

from ..commands.docs import component_name
from .frames import one_line
from .rubric import Rubric

STUDENT_OUTPUT = 2000  # characters of a component's captured stdout/stderr shown per component


def _fmt(x):
    return f"{x:.10g}"


def _total(tests, attr):
    """The exact sum of rounded scores (whole numbers of 1e-4), as a float."""
    return sum(round(getattr(t, attr) * 10_000) for t in tests) / 10_000


def _block(head, text, indent):
    """`head` + `text`, every further line of `text` indented: a message the child wrote (an
    exception's text) can hold newlines, and must not start a line that looks like the report's own
    (a fake "== GELU ...: 10/10" or "total: 70/70")."""
    first, *rest = text.split("\n")
    return [head + first] + [indent + "| " + line for line in rest if line.strip()]


def _test_text(t, problem=""):
    lines = [f"{'PASS' if t.passed else 'FAIL'} {_fmt(t.score):>5}/{_fmt(t.max_score):<4} {t.name}"]
    if not t.passed and not (problem and problem in t.output):
        lines += ["      " + line for line in t.output.splitlines() if line]
        lines += [f"      diagnosis: {d}" for d in t.diagnoses]
    return lines


def _captured(c):
    out = []
    for what, text in (("stdout", c.stdout), ("stderr", c.stderr)):
        if text.strip():
            shown = text[:STUDENT_OUTPUT] + ("\n[... truncated]" if len(text) > STUDENT_OUTPUT else "")
            out.append(f"  the submission's {what} while grading {c.cls} (shown, not parsed):")
            out += ["    | " + line for line in shown.splitlines()]
    return out


def thresholds_line(rubric):
    return (
        f"relative error max|a-b|/max(1e-8, |a|+|b|) <= {rubric.threshold('float64'):g} (float64), "
        f"finite differences <= {rubric.threshold('finite_differences'):g}, float32 (norm-wise) "
        f"<= {rubric.threshold('float32'):g}; self-checks pay when out is within {rubric.threshold('attempt'):g}"
    )


def sandbox_line(result):
    """How the submission was isolated; a run that was not starts with "WARNING"."""
    box = result.sandbox
    if box is None:
        return "sandbox: none (nothing was run)"
    if not box.isolated:
        return f"WARNING: this run is NOT ISOLATED (sandbox mode {box.mode}): {box.detail}"
    return f"sandbox: {box.mode}: {box.detail}; memory cap: {box.memory}"


def sandbox_json(result):
    box = result.sandbox
    if box is None:
        return {"mode": "none", "isolated": False, "detail": "nothing was run", "memory": ""}
    return {"mode": box.mode, "isolated": box.isolated, "detail": box.detail, "memory": box.memory}


def to_text(result, rubric=None):
    rubric = rubric or Rubric.load()
    first = sandbox_line(result)
    lines = [first] if first.startswith("WARNING") else []
    lines += [f"npgpt grade: {one_line(result.submission)}  (seed {result.seed})", thresholds_line(rubric)]
    lines += ([] if first.startswith("WARNING") else [first]) + [""]
    for n in result.notes:
        lines += _block("note: ", n, "      ")
    for c in result.components:
        form = {"class": f"class {c.cls}", "function": "CS231n-style functions", "missing": "not defined"}[
            c.form
        ]
        got, total = _total(c.tests, "score"), _total(c.tests, "max_score")
        lines.append(f"== {c.cls} ({form}): {_fmt(got)}/{_fmt(total)}")
        if c.problem:
            lines += _block("  problem: ", c.problem, "           ")
        for t in c.tests:
            lines += ["  " + line for line in _test_text(t, c.problem)]
        if got < total:
            lines.append(f"  derivation: npgpt docs {component_name(c.cls)}")
        lines += _captured(c)
        lines.append("")
    lines.append(f"total: {_fmt(result.score)}/{_fmt(result.max_score)}  ({result.execution_time:.1f} s)")
    return "\n".join(lines) + "\n"


def _test_output(t):
    return "\n".join([t.output] + [f"diagnosis: {d}" for d in t.diagnoses]).strip()


def to_gradescope(result, rubric=None):
    rubric = rubric or Rubric.load()
    summary = [sandbox_line(result), f"seed {result.seed}; {thresholds_line(rubric)}"]
    for n in result.notes:
        summary += _block("note: ", n, "      ")
    for c in result.components:
        if c.problem:
            summary += _block(f"{c.cls}: ", c.problem, "    ")
        summary += _captured(c)
    tests = [
        {
            "name": t.name,
            "score": t.score,
            "max_score": t.max_score,
            "status": "passed" if t.passed else "failed",
            "output": _test_output(t),
            "visibility": t.visibility,
        }
        for t in result.tests
    ]
    return {
        "score": result.score,
        "execution_time": round(result.execution_time, 3),
        "output": "\n".join(summary),
        "tests": tests,
        "extra_data": {"sandbox": sandbox_json(result)},
    }


def to_json(result, rubric=None):
    return {
        "submission": result.submission,
        "seed": result.seed,
        "score": result.score,
        "max_score": result.max_score,
        "execution_time": round(result.execution_time, 3),
        "sandbox": sandbox_json(result),
        "notes": result.notes,
        "components": [
            {
                "component": c.key,
                "class": c.cls,
                "form": c.form,
                "problem": c.problem,
                "stdout": c.stdout,
                "stderr": c.stderr,
                "seconds": round(c.seconds, 3),
                "tests": [
                    {
                        "name": t.name,
                        "kind": t.kind,
                        "score": t.score,
                        "max_score": t.max_score,
                        "passed": t.passed,
                        "output": t.output,
                        "diagnoses": t.diagnoses,
                        "visibility": t.visibility,
                    }
                    for t in c.tests
                ],
            }
            for c in result.components
        ],
    }


def render(result, fmt, rubric=None):
    """The text of `result` in `fmt` ("text", "json" or "gradescope")."""
    if fmt == "text":
        return to_text(result, rubric)
    data = to_gradescope(result, rubric) if fmt == "gradescope" else to_json(result, rubric)
    return json.dumps(data, indent=2) + "\n"
