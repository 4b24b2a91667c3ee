"""What the grader asks of each component: how to build it, its inputs, and the reference answers.

A `Spec` names the class (and the CS231n-style function pair) a submission may define, as the
registry's grade settings give it (npgpt/registry.py); `make_cases` makes the cases from the
run's seed: "main" (graded against the reference, float64), "float32" (dtype and shape
preserved) and the hidden edge cases. Reference answers are computed here, in the
grader's own process, with the reference classes; the submission never sees them.
"""

import inspect
from dataclasses import dataclass, field

import numpy as np

from ..registry import resolve, supported

K_DIRECTIONS = 3  # random directions per tensor for the finite-difference check
FD_EPS = 1e-5


@dataclass
class Case:
    """One call of forward then backward: inputs, parameter values, dout and the expected answers."""

    name: str
    inputs: list
    dout: object
    dtype: str = "float64"
    edge: bool = False
    expected: dict = field(default_factory=dict)  # "out", "dx", "grad/<param>"
    directions: dict = field(default_factory=dict)  # tensor name -> (K, *shape), main case only


class Spec:
    """What the grader asks of one component: the registry's grade settings (fwd, bwd, ctor,
    fn_extra, fn_grads, make_inputs, dict_params; see registry.Grade) with the component's
    name (`key`, as --only and `npgpt assignment` take it), class name (`cls`, the class a
    submission defines) and docs page (`doc`)."""

    def __init__(self, comp):
        self.key, self.cls, self.doc = comp.name, comp.cls.__name__, comp.doc
        self.__dict__.update(vars(comp.grade))


SPECS = {comp.name: Spec(comp) for comp in supported("grade")}  # in registry order


def reference_module(spec, rng=None, cls=None, **changes):
    """The reference class (npgpt/layers/, npgpt/loss.py), or its subclass `cls` (a mistake of
    npgpt/mistakes.py), built with the spec's constructor arguments; `changes` are keywords on top."""
    cls = cls or resolve(spec.key).cls
    if "rng" in inspect.signature(cls).parameters:
        changes["rng"] = rng
    return cls(*spec.ctor, **changes)


def run_module(m, inputs, dout=None):
    """{"out", "dx", "grad/<name>"} of module `m` on `inputs` then `dout`, in float64.

    dout=None runs the forward only and returns {"out": ...}."""
    ins = [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else a for a in inputs]
    out = m.forward(*ins)
    if dout is None:
        return {"out": np.asarray(out, np.float64)}
    dx = m.backward(dout)
    exp = {"out": np.asarray(out, np.float64), "dx": np.asarray(dx, np.float64)}
    exp.update({f"grad/{n}": p.grad.copy() for n, p in m.named_parameters()})
    return exp


def reference_run(spec, params, inputs, dout=None):
    """Expected answers in float64 from the reference: "out", "dx" and "grad/<name>" for every
    parameter (dout=None: the forward only, {"out": ...})."""
    m = reference_module(spec)
    m.load_state_dict({**m.state_dict(), **params})
    return run_module(m, inputs, dout)


def make_cases(spec, seed):
    """(params, cases) for `seed`: parameter values by name, and the cases with expected answers."""
    rng = np.random.default_rng([seed, list(SPECS).index(spec.key)])
    ref = reference_module(spec, rng=rng)
    params = {}
    for name, p in ref.named_parameters():
        if name.endswith("scale") or name.endswith("shift"):  # LayerNorm's: move them off 1 and 0
            p.data = (1.0 if name.endswith("scale") else 0.0) + 0.3 * rng.standard_normal(p.data.shape)
        params[name] = p.data.astype(np.float64)
    cases = []
    for name, inputs in spec.make_inputs(rng).items():
        out_shape = reference_run(spec, params, inputs)["out"].shape
        dout = 1.0 if spec.key == "crossentropy" else rng.standard_normal(out_shape)
        cases.append(Case(name, inputs, dout, edge=name != "main"))
    main = cases[0]
    tensors = {"dx": main.inputs[0], **{f"grad/{n}": v for n, v in params.items()}}
    main.directions = {t: rng.standard_normal((K_DIRECTIONS,) + np.shape(v)) for t, v in tensors.items()}
    f32 = [a.astype(np.float32) if a.dtype.kind == "f" else a for a in main.inputs]
    dout32 = main.dout if np.ndim(main.dout) == 0 else np.asarray(main.dout, np.float32)
    cases.insert(1, Case("float32", f32, dout32, dtype="float32"))
    for c in cases:
        p = (
            {n: v.astype(np.float32).astype(np.float64) for n, v in params.items()}
            if c.dtype == "float32"
            else params
        )
        c.expected = reference_run(
            spec, p, c.inputs, np.asarray(c.dout, np.float64) if np.ndim(c.dout) else 1.0
        )
    return params, cases
