"""Scoring one component: the child's frames against the expected answers, test by test.

Every test is named `<Class>.<forward|backward>: <tensor or check>` and scored all or nothing.
A frame the child never sent (it crashed, hung, raised) fails the tests that needed it with the
reason. Diagnoses (diagnose.py) are added to failed tests.
"""

from dataclasses import dataclass, field

import numpy as np

from . import diagnose
from .compare import compare, rel_error
from .components import FD_EPS


@dataclass
class TestResult:
    name: str
    component: str
    kind: str
    max_score: float
    score: float = 0.0
    passed: bool = False
    output: str = ""
    diagnoses: list = field(default_factory=list)
    visibility: str = "visible"


class Frames:
    """The child's results by (case, stage); `get` says why one is missing."""

    def __init__(self, frames, fate):
        self.by = {}
        self.import_error = None
        for header, arrays in frames:
            if header.get("stage") == "import":
                self.import_error = str(header.get("error"))
            self.by[(header.get("case"), header.get("stage"))] = (header, arrays)
        self.fate = fate

    def get(self, case, stage):
        """(arrays, None) or (None, reason)."""
        if self.import_error:
            return None, self.import_error
        if (case, stage) in self.by:
            header, arrays = self.by[(case, stage)]
            if header.get("error"):
                return None, f"{stage} raised: {header['error']}" if "sys.exit" not in header[
                    "error"
                ] else f"{stage}: {header['error']}"
            if header.get("bad"):
                return None, "; ".join(header["bad"])
            if not arrays:  # the worker always sends some: a forged frame
                return None, f"{stage}: the submission sent a result without arrays"
            return arrays, None
        if self.fate:
            return None, self.fate
        return None, "not run: the forward (or the first backward) of this case failed"


def evaluate(spec, form, params, cases, frames, rubric):
    """The list of TestResults for one component."""
    cls, names = spec.cls, list(params)
    ce = spec.key == "crossentropy"
    tol64, tol32 = rubric.threshold("float64"), rubric.threshold("float32")
    main, f32, edges = cases[0], cases[1], cases[2:]
    tests = []

    def add(kind, name, ok, text="", diags=(), share=1):
        pts = rubric.points(spec.key, kind, name, share)
        tests.append(
            TestResult(
                name,
                spec.key,
                kind,
                pts,
                pts if ok else 0.0,
                bool(ok),
                text,
                list(diags),
                rubric.visibility(kind),
            )
        )

    fwd, fwd_err = frames.get("main", "forward")
    bwd, bwd_err = frames.get("main", "backward")
    out_name = "loss" if ce else "out"
    c = compare(out_name, fwd.get("out"), main.expected["out"], tol64) if fwd else None
    forward_ok = bool(c and c.ok)
    add(
        "forward",
        f"{cls}.forward: {out_name}",
        forward_ok,
        c.text if c else fwd_err,
        diagnose.explain(spec.key, "out", fwd.get("out"), main, params) if c and not c.ok else (),
    )
    note = (
        []
        if forward_ok or not fwd
        else [
            f"your forward is also off, so this gradient is compared with the gradient of the correct forward; "
            f"{cls}.backward: vs finite differences of your forward checks your backward against your own forward"
        ]
    )
    dx_name = "dlogits" if ce else "dx"
    tensors = [("dx", dx_name, "dx")] + [(f"grad/{n}", f"{n}.grad", "param_grads") for n in names]
    for key, label, kind in tensors:
        c = compare(label, bwd.get(key), main.expected[key], tol64) if bwd else None
        diags = (
            diagnose.explain(spec.key, key, bwd.get(key), main, params, forward_ok) + note
            if c and not c.ok
            else []
        )
        add(
            kind,
            f"{cls}.backward: {label}",
            c and c.ok,
            c.text if c else bwd_err,
            diags,
            share=max(1, len(names)) if kind == "param_grads" else 1,
        )
    # the two checks below compare the submission with itself; they earn points only for a
    # forward that attempts the component (an identity layer is consistent with itself too)
    attempt = _attempt(fwd, main.expected["out"], rubric)
    _repeat(spec, form, names, bwd, bwd_err, frames, rubric, add, attempt)
    _numeric(cls, main, bwd, bwd_err, frames, rubric, add, dx_name, attempt)
    _float32(cls, f32, frames, tol32, ce, names, add)
    backward_ok = all(t.passed for t in tests if t.kind in ("dx", "param_grads"))
    _edges(
        spec,
        cls,
        edges,
        frames,
        tol64,
        names,
        {"forward": forward_ok, "backward": backward_ok},
        add,
        out_name,
        dx_name,
    )
    return tests


def _attempt(fwd, expected, rubric):
    """None when the forward's output is near enough the right one to earn self-consistency
    points (norm-wise relative error within the rubric's `attempt` threshold), else the reason."""
    out = None if fwd is None else fwd.get("out")
    tol = rubric.threshold("attempt")
    if out is None or np.shape(out) != np.shape(expected) or not np.all(np.isfinite(out)):
        return "not scored: your forward gave no usable output, and this check compares your code with itself"
    err = rel_error(out, expected, normwise=True)
    if err <= tol:
        return None
    return (
        f"not scored: your forward is far from the right output (norm-wise relative error {err:.2g}, "
        f"over {tol:g}), and this check compares your code with itself: an identity layer would pass it"
    )


def _repeat(spec, form, names, bwd, bwd_err, frames, rubric, add, attempt):
    again, again_err = frames.get("main", "again")
    accumulate = form == "class" and names
    name = f"{spec.cls}.backward: " + (
        "accumulation (+=) into .grad" if accumulate else "repeatable (backward twice)"
    )
    if bwd is None or again is None:
        return add("accumulate", name, False, bwd_err or again_err)
    tol = rubric.threshold("repeat")
    if any(not np.all(np.isfinite(a)) for arrays in (bwd, again) for a in arrays.values()):
        return add("accumulate", name, False, "a gradient is not finite (NaN or inf): nothing to repeat")
    if attempt is not None:
        return add("accumulate", name, False, attempt)
    if not accumulate:
        bad = [
            k
            for k in bwd
            if k in again and (bwd[k].shape != again[k].shape or not rel_error(bwd[k], again[k]) <= tol)
        ]
        return add(
            "accumulate",
            name,
            not bad,
            f"a second backward with the same dout changed: {', '.join(bad)} "
            "(does backward modify its cache or dout in place?)"
            if bad
            else "",
        )
    lines = []
    for n in names:
        g1, g2 = bwd.get(f"grad/{n}"), again.get(f"grad/{n}")
        if g1 is None or g2 is None or g1.shape != g2.shape:
            lines.append(f"{n}.grad: missing or changed shape")
        elif not np.any(g1):
            lines.append(f"{n}.grad is all zeros after one backward, so accumulation cannot be seen")
        elif not rel_error(g2, 2 * g1) <= tol:  # NaN (an overflow of 2 * g1) is a failure too
            hint = " (it was overwritten: use p.grad += ..., not =)" if rel_error(g2, g1) <= tol else ""
            lines.append(f"{n}.grad after two backward calls is not twice the first{hint}")
    return add("accumulate", name, not lines, "\n".join(lines))


def _numeric(cls, main, bwd, bwd_err, frames, rubric, add, dx_name, attempt):
    name = f"{cls}.backward: vs finite differences of your forward"
    fd, fd_err = frames.get("main", "fd")
    if bwd is None or fd is None:
        return add("numeric", name, False, bwd_err or fd_err)
    if attempt is not None:
        return add("numeric", name, False, attempt)
    tol, lines, ok = rubric.threshold("finite_differences"), [], True
    for key, u in main.directions.items():
        label = dx_name if key == "dx" else key[5:] + ".grad"
        g, f = bwd.get(key), fd.get(key)
        if g is None or g.shape != u.shape[1:] or f is None or f.shape != (len(u), 2):
            ok = False
            lines.append(
                f"{label}: cannot compare (shape {None if g is None else g.shape}, expected {u.shape[1:]})"
            )
            continue
        num = (f[:, 0] - f[:, 1]) / (2 * FD_EPS)
        ana = np.tensordot(u, g.astype(np.float64), axes=g.ndim)
        if key == "dx" and np.all(np.abs(num) < 1e-8):  # nothing to be consistent with: no credit
            ok = False
            lines.append(f"{label}: your forward does not depend on its input, so there is nothing to check")
            continue
        rel = rel_error(num, ana)
        ok = ok and bool(rel <= tol)
        lines.append(
            f"{label}: directional derivatives {'agree' if rel <= tol else 'DISAGREE'}, "
            f"relative error {rel:.1e} (threshold {tol:.0e})"
        )
    add("numeric", name, ok, "\n".join(lines))


def _float32(cls, case, frames, tol, ce, names, add):
    fwd, err = frames.get("float32", "forward")
    if fwd is None:
        add("dtype_forward", f"{cls}.forward: float32 dtype and shape", False, err)
    else:
        c = compare(
            "loss" if ce else "out",
            fwd.get("out"),
            case.expected["out"],
            tol,
            normwise=True,
            dtype=None if ce else np.float32,
        )
        add("dtype_forward", f"{cls}.forward: float32 dtype and shape", c.ok, c.text)
    bwd, err = frames.get("float32", "backward")
    if bwd is None:
        return add("dtype_backward", f"{cls}.backward: float32 dtype and shape", False, err)
    cs = [
        compare(
            k if k == "dx" else k[5:] + ".grad",
            bwd.get(k),
            case.expected[k],
            tol,
            normwise=True,
            dtype=np.float32,
        )
        for k in ["dx"] + [f"grad/{n}" for n in names]
    ]
    add(
        "dtype_backward",
        f"{cls}.backward: float32 dtype and shape",
        all(c.ok for c in cs),
        "\n".join(c.text for c in cs if not c.ok),
    )


def _edges(spec, cls, edges, frames, tol, names, main_ok, add, out_name, dx_name):
    for stage, kind, keys in (
        ("forward", "edge_forward", ["out"]),
        ("backward", "edge_backward", ["dx"] + [f"grad/{n}" for n in names]),
    ):
        lines, diags, ok = [], [], True
        for case in edges:
            got, err = frames.get(case.name, stage)
            if got is None:
                ok = False
                lines.append(f"{case.name}: {err}")
                continue
            cs = [
                compare(
                    {"out": out_name, "dx": dx_name}.get(k, k[5:] + ".grad"),
                    got.get(k),
                    case.expected[k],
                    tol,
                )
                for k in keys
            ]
            bad = [c for c in cs if not c.ok]
            ok = ok and not bad
            lines.append(
                f"{case.name}: " + ("PASS" if not bad else "FAIL: " + "; ".join(c.text for c in bad))
            )
            if bad and main_ok[stage]:  # otherwise the main test's failure explains it
                diags += diagnose.edge(spec.key, case)
        add(kind, f"{cls}.{stage}: hidden edge cases", ok, "\n".join(lines), diags)
