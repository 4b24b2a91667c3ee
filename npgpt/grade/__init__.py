"""Grading students' implementations of npgpt's components (`npgpt grade`; docs/grading.md).

grader.grade(path, ...) -> GradeResult; report.render(result, "text" | "json" | "gradescope").
The submission only ever runs in sandboxed child processes (sandbox.py, worker.py).
"""

from .grader import GradeResult, grade

__all__ = ["GradeResult", "grade"]
