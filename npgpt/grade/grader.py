"""Grade one submission file: find its components, run each in the sandbox, score the results.

The source is only parsed here (ast), never run: the class names and CS231n-style function pairs
it defines decide which components are graded and in which form. Each component then runs in its
own child process inside the sandbox (sandbox.py); its frames are scored against answers
computed here (scoring.py). Points are exact fractions until the end, where they are rounded to
1e-4 so that the tests add up to each component's total and to the grand total exactly.
"""

import ast
import errno
import os
import secrets
import stat
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from . import sandbox
from .components import FD_EPS, SPECS, make_cases
from .rubric import Rubric
from .scoring import Frames, evaluate


@dataclass
class ComponentResult:
    key: str
    cls: str
    form: str  # "class", "function" or "missing"
    tests: list
    stdout: str = ""
    stderr: str = ""
    problem: str = ""  # why the whole component could not run, if it could not
    seconds: float = 0.0


@dataclass
class GradeResult:
    submission: str
    seed: int
    components: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    execution_time: float = 0.0
    sandbox: object = None  # sandbox.Sandbox: which mode ran and what it isolates

    @property
    def tests(self):
        return [t for c in self.components for t in c.tests]

    @property
    def score(self):
        return _sum(t.score for t in self.tests)

    @property
    def max_score(self):
        return _sum(t.max_score for t in self.tests)


UNITS = 10_000  # scores are multiples of 1/UNITS


def _sum(values):
    """The sum of rounded scores, exact: each is a whole number of 1/UNITS."""
    return float(Fraction(sum(round(Fraction(v) * UNITS) for v in values), UNITS))


def apportion(tests):
    """Round each test's max_score to 1/UNITS so that they add up to the rounded exact total.

    Largest remainder: the floors first, then one unit each to the largest remainders (ties by
    order). A test scores its rounded max_score or 0 (tests are all or nothing).
    """
    exact = [Fraction(t.max_score).limit_denominator(10**9) * UNITS for t in tests]
    units = [int(x) for x in exact]  # floors (non-negative points)
    short = round(sum(exact)) - sum(units)
    for i in sorted(range(len(tests)), key=lambda i: (-(exact[i] - units[i]), i))[: max(0, short)]:
        units[i] += 1
    for t, u in zip(tests, units):
        t.max_score = float(Fraction(u, UNITS))
        t.score = t.max_score if t.passed else 0.0


def detect(source, filename):
    """({key: "class" | "function"}, syntax error text or None) from the submission's top level."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as e:
        return {}, f"SyntaxError at line {e.lineno}: {e.msg}"
    except (ValueError, RecursionError, MemoryError) as e:
        return {}, f"the file cannot be parsed: {type(e).__name__}: {e}"
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    found = {}
    for key, spec in SPECS.items():
        if spec.cls in classes:
            found[key] = "class"
        elif spec.fwd in funcs and spec.bwd in funcs:
            found[key] = "function"
    return found, None


def request_for(spec, form, params, cases):
    req = {
        "form": form,
        "cls": spec.cls,
        "ctor": spec.ctor,
        "fwd": spec.fwd,
        "bwd": spec.bwd,
        "fn_extra": spec.fn_extra,
        "fn_grads": spec.fn_grads,
        "dict_params": spec.dict_params,
        "param_names": list(params),
        "param_shapes": [list(v.shape) for v in params.values()],
        "scalar_out": spec.key == "crossentropy",
        "eps": FD_EPS,
        "cases": [],
    }
    arrays = {}
    for i, c in enumerate(cases):
        req["cases"].append(
            {
                "name": c.name,
                "dtype": c.dtype,
                "n_inputs": len(c.inputs),
                "again": c.name == "main",
                "fd": bool(c.directions),
            }
        )
        for j, a in enumerate(c.inputs):
            arrays[f"c{i}/in{j}"] = a
        arrays[f"c{i}/dout"] = np.asarray(c.dout)
        for n, v in params.items():
            arrays[f"c{i}/p/{n}"] = v.astype(c.dtype)
        for t, u in c.directions.items():
            arrays[f"c{i}/dir/{t}"] = u
    return req, arrays


def grade_component(spec, form, jail, seed, rubric, timeout, memory_mb, problem=""):
    params, cases = make_cases(spec, seed)
    if problem:
        tests = evaluate(spec, "class", params, cases, Frames([], problem), rubric)
        return ComponentResult(spec.key, spec.cls, form, tests, problem=problem)
    req, arrays = request_for(spec, form, params, cases)
    run = sandbox.run(jail, req, arrays, timeout=timeout, memory_mb=memory_mb)
    frames = Frames(run.frames, f"the submission {run.fate}" if run.fate else "")
    tests = evaluate(spec, form, params, cases, frames, rubric)
    problem = frames.import_error or (f"the submission {run.fate}" if run.fate else "")
    return ComponentResult(spec.key, spec.cls, form, tests, run.stdout, run.stderr, problem, run.seconds)


MAX_SOURCE = 2 << 20  # bytes of a submission file


def grade(
    submission,
    only=None,
    seed=None,
    rubric=None,
    timeout=10.0,
    memory_mb=2048,
    progress=None,
    sandbox_mode="auto",
    unreadable=None,
):
    """Grade `submission` (a .py path); returns a GradeResult. Never runs the submission here.

    `sandbox_mode` is "auto", "bwrap", "user" or "none" (sandbox.choose), or a sandbox.Sandbox;
    a mode that cannot run here raises sandbox.SandboxError. `unreadable` is a reason the file
    cannot be graded (Gradescope: no file was uploaded); every component then scores 0 with it.
    """
    t0 = time.monotonic()
    box = sandbox_mode if isinstance(sandbox_mode, sandbox.Sandbox) else sandbox.choose(sandbox_mode)
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    rubric = rubric or Rubric.load()
    result = GradeResult(os.path.basename(submission), seed, sandbox=box)
    try:
        if unreadable:
            raise OSError(unreadable)
        fd = os.open(submission, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise OSError("not a regular file")
            raw = f.read(MAX_SOURCE + 1)
        if len(raw) > MAX_SOURCE:
            raise OSError(f"the file is larger than {MAX_SOURCE >> 20} MiB")
        found, syntax = detect(raw.decode("utf-8", "replace"), submission)
    except OSError as e:
        why = "it is a symbolic link" if e.errno == errno.ELOOP else e.strerror or str(e)
        found, syntax = {}, unreadable or f"cannot read the submission: {why}"
    keys = list(only) if only else [k for k in SPECS if k in found]
    if not keys:
        keys = list(SPECS)
        result.notes.append(
            f"{syntax}; every component scores 0"
            if syntax
            else "the submission defines none of the graded classes or function pairs "
            f"({', '.join(s.cls for s in SPECS.values())}); every component scores 0"
        )
    jail = sandbox.Jail(submission, box, raw) if found and not syntax else None
    try:
        for key in keys:
            spec = SPECS[key]
            if progress:
                progress(spec.cls)
            form = found.get(key, "missing")
            problem = syntax or (
                ""
                if key in found
                else f"the submission defines neither class {spec.cls} nor functions {spec.fwd}/{spec.bwd}"
            )
            result.components.append(
                grade_component(spec, form, jail, seed, rubric, timeout, memory_mb, problem)
            )
    finally:
        if jail:
            jail.close()
    for c in result.components:
        apportion(c.tests)
    result.execution_time = time.monotonic() - t0
    return result
