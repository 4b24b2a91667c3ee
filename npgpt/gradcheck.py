"""Gradient checking: a module's hand-written backward against central finite differences.

For a random upstream gradient `dout`, the scalar L = sum(forward(...) * dout) has gradient
backward(dout) with respect to every input and parameter; central differences estimate it as
(L(t + eps) - L(t - eps)) / (2 eps). Everything runs in float64 on a copy of the module.
How to read the report and choose eps and tolerances: docs/gradcheck.md.
"""

import copy
import inspect
from dataclasses import dataclass, field

import numpy as np

from .module import Module


def _dot(out, dout):
    return float(np.sum(np.asarray(out, dtype=np.float64) * dout))


def numerical_gradient(f, x, dout=None, eps=1e-6, indices=None):
    """Central-difference gradient of sum(f(x) * dout) with respect to the float64 array `x`.

    `x` is perturbed in place one coordinate at a time and restored; `dout` defaults to 1
    (for a scalar `f`). `indices` (flat positions) restricts the work to those coordinates;
    the others are left at 0.
    """
    if not (isinstance(x, np.ndarray) and x.dtype == np.float64):
        raise TypeError(
            f"numerical_gradient: x must be a float64 ndarray, got {type(x).__name__} "
            f"{getattr(x, 'dtype', '')}"
        )
    dout = 1.0 if dout is None else dout
    grad = np.zeros_like(x)
    flat, gflat = x.reshape(-1), grad.reshape(-1)
    if not np.shares_memory(flat, x):
        raise ValueError("numerical_gradient: x must be contiguous so it can be perturbed in place")
    for i in range(flat.size) if indices is None else indices:
        old = flat[i]
        flat[i] = old + eps
        f_plus = _dot(f(x), dout)
        flat[i] = old - eps
        f_minus = _dot(f(x), dout)
        flat[i] = old
        gflat[i] = (f_plus - f_minus) / (2 * eps)
    return grad


@dataclass
class GradcheckRow:
    """One tensor's comparison: the worst absolute and relative error and where it is."""

    name: str
    shape: tuple
    max_abs: float
    max_rel: float
    worst_index: object
    passed: bool
    checked: int
    mode: str


@dataclass
class GradcheckReport:
    """What `gradcheck` found: one row per tensor plus the protocol checks; `.passed`, `str()`."""

    module: str
    rows: list = field(default_factory=list)
    checks: list = field(default_factory=list)  # (description, passed, detail)
    settings: str = ""

    @property
    def passed(self):
        return all(r.passed for r in self.rows) and all(ok for _, ok, _ in self.checks)

    def __bool__(self):
        return self.passed

    def __str__(self):
        head = f"{'tensor':<28} {'shape':<16} {'checked':>7} {'max abs':>9} {'max rel':>9}  {'worst at':<14} result"
        lines = [f"gradcheck {self.module} ({self.settings})", head, "-" * len(head)]
        for r in self.rows:
            lines.append(
                f"{r.name:<28} {str(r.shape):<16} {r.checked:>7} {r.max_abs:>9.2e} {r.max_rel:>9.2e}  "
                f"{str(r.worst_index):<14} {'PASS' if r.passed else 'FAIL'}"
            )
        for desc, ok, detail in self.checks:
            lines.append(f"{desc:<90} {'PASS' if ok else 'FAIL'}" + (f"\n    {detail}" if detail else ""))
        lines.append(f"overall: {'PASS' if self.passed else 'FAIL'}")
        return "\n".join(lines)


def _generators(module):
    """Every np.random.Generator the module tree holds (dropout masks draw from them)."""
    gens = []
    for _, mod in module.named_modules():
        gens += [v for v in vars(mod).values() if isinstance(v, np.random.Generator)]
    return gens


def _compare(name, numeric, analytic, atol, rtol, mode, index_of):
    numeric, analytic = np.asarray(numeric, np.float64), np.asarray(analytic, np.float64)
    err = np.abs(numeric - analytic)
    size = np.maximum(np.abs(numeric), np.abs(analytic))
    err = np.where(np.isfinite(err), err, np.inf)  # a NaN gradient is the worst error
    rel = err / (size + atol)  # relative, with atol as the floor for gradients near zero
    excess = err - (atol + rtol * size)
    w = int(np.argmax(excess)) if excess.size else 0
    return GradcheckRow(
        name=name,
        shape=tuple(np.shape(analytic)) if mode == "full" else (len(err),),
        max_abs=float(err.max(initial=0.0)),
        max_rel=float(rel.max(initial=0.0)),
        worst_index=index_of(w),
        passed=bool(np.all(excess <= 0)),
        checked=int(err.size),
        mode=mode,
    )


def gradcheck(
    module,
    *inputs,
    dout=None,
    eps=1e-6,
    atol=1e-6,
    rtol=1e-5,
    mode="full",
    directions=8,
    max_coords=None,
    seed=0,
):
    """Check `module.backward` against finite differences of `module.forward(*inputs)`.

    mode="full" compares every coordinate (or `max_coords` sampled ones per tensor);
    mode="fast" compares `directions` random directional derivatives per tensor. Float inputs
    and every parameter are checked; integer inputs (token ids, targets) are passed through.
    The caller's module is not changed: the check runs on a float64 deep copy. Deterministic
    for a given `seed`. Returns a GradcheckReport.
    """
    if mode not in ("full", "fast"):
        raise ValueError(f"gradcheck: mode must be 'full' or 'fast', got {mode!r}")
    if not isinstance(module, Module):
        raise TypeError(f"gradcheck: module must be an npgpt.Module, got {type(module).__name__}")
    for name, v, low in (("eps", eps, "> 0"), ("atol", atol, ">= 0"), ("rtol", rtol, ">= 0")):
        ok = isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)
        if not (ok and np.isfinite(v) and (v > 0 if name == "eps" else v >= 0)):
            raise ValueError(f"gradcheck: {name} must be a finite number {low}, got {v!r}")
    for i, a in enumerate(inputs):
        if np.asarray(a).dtype.kind not in "fiu":
            raise TypeError(
                f"gradcheck: input {i} must be a float array (or integer ids), got {type(a).__name__} "
                f"of dtype {np.asarray(a).dtype}"
            )
    rng = np.random.default_rng(seed)
    m = copy.deepcopy(module).astype(np.float64)
    ins = [np.array(a, dtype=np.float64) if np.asarray(a).dtype.kind == "f" else a for a in inputs]
    float_pos = [i for i, a in enumerate(inputs) if np.asarray(a).dtype.kind == "f"]
    try:
        arg_names = list(inspect.signature(m.forward).parameters)
    except (TypeError, ValueError):
        arg_names = []
    names = [arg_names[i] if i < len(arg_names) else f"input{i}" for i in range(len(ins))]
    gens = _generators(m)
    states = [g.bit_generator.state for g in gens]

    def run_forward():
        for g, s in zip(gens, states):  # the same dropout masks on every call
            g.bit_generator.state = s
        return m.forward(*ins)

    report = GradcheckReport(
        type(module).__name__, settings=f"float64, {mode}, eps {eps:g}, atol {atol:g}, rtol {rtol:g}"
    )
    before = [a.copy() for a in ins]
    m.zero_grad()
    out = run_forward()
    changed = [names[i] for i in range(len(ins)) if not np.array_equal(before[i], ins[i])]
    report.checks.append(
        (
            "forward leaves its inputs unchanged",
            not changed,
            f"modified in place: {', '.join(changed)}" if changed else "",
        )
    )
    if dout is None:
        dout = rng.standard_normal(np.shape(out))
    dout = np.array(dout, dtype=np.float64) if np.ndim(dout) else float(dout)
    dout_copy = np.copy(dout)
    dx = m.backward(dout)
    report.checks.append(("backward leaves dout unchanged", bool(np.array_equal(dout, dout_copy)), ""))
    dins = list(dx) if isinstance(dx, (tuple, list)) else [dx]
    grads = {name: p.grad.copy() for name, p in m.named_parameters()}

    # repeatability: a second forward and backward with the same dout gives the same result
    m.zero_grad()
    run_forward()
    dx2 = m.backward(np.copy(dout))
    dins2 = list(dx2) if isinstance(dx2, (tuple, list)) else [dx2]
    same = all(np.allclose(a, b, rtol=1e-12, atol=0) for a, b in zip(dins, dins2) if a is not None)
    same = same and all(np.allclose(grads[n], p.grad, rtol=1e-12, atol=0) for n, p in m.named_parameters())
    report.checks.append(("backward is repeatable (same dout, same result)", same, ""))

    targets = [(names[i], ins[i], dins[k] if k < len(dins) else None) for k, i in enumerate(float_pos)]
    targets += [(n, p.data, grads[n]) for n, p in m.named_parameters()]
    loss = lambda _x: run_forward()  # noqa: E731  (the perturbed array is read through m / ins)
    for name, x, g in targets:
        if g is None or np.shape(g) != x.shape:
            report.rows.append(
                GradcheckRow(
                    name,
                    x.shape,
                    np.inf,
                    np.inf,
                    f"backward gave {None if g is None else np.shape(g)}",
                    False,
                    0,
                    mode,
                )
            )
            continue
        if mode == "full":
            idx = None
            if max_coords is not None and x.size > max_coords:
                idx = np.sort(rng.choice(x.size, size=max_coords, replace=False))
            num = numerical_gradient(loss, x, dout, eps=eps, indices=idx)
            sel = np.arange(x.size) if idx is None else idx
            row = _compare(
                name,
                num.reshape(-1)[sel],
                np.asarray(g).reshape(-1)[sel],
                atol,
                rtol,
                mode,
                lambda w, sel=sel, shape=x.shape: tuple(int(i) for i in np.unravel_index(sel[w], shape)),
            )
            row.shape = x.shape
        else:
            us = rng.standard_normal((directions,) + x.shape)
            num = np.empty(directions)
            for j, u in enumerate(us):
                x += eps * u
                f_plus = _dot(run_forward(), dout)
                x -= 2 * eps * u
                f_minus = _dot(run_forward(), dout)
                x += eps * u
                num[j] = (f_plus - f_minus) / (2 * eps)
            ana = np.tensordot(us, np.asarray(g, np.float64), axes=x.ndim)  # (directions,)
            row = _compare(name, num, ana, atol, rtol, mode, lambda w: f"direction {w}")
            row.shape = x.shape
        report.rows.append(row)
    return report
