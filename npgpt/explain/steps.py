"""What every explainer returns and the helpers they share: a `Step` per intermediate, the
`Explanation` holding them and their comparison with the module, and hand-friendly numbers.
"""

from dataclasses import dataclass, field

import numpy as np

TOL = 1e-10  # hand steps and the module agree to float64 rounding


@dataclass
class Step:
    """One named intermediate: `name` as in the code and the docs, `eq` its equation label."""

    name: str
    value: np.ndarray
    eq: str = ""
    note: str = ""


@dataclass
class Explanation:
    """The steps of one forward and backward and how they compare with the module."""

    component: str
    title: str
    page: str
    forward: list = field(default_factory=list)
    backward: list = field(default_factory=list)
    checks: list = field(default_factory=list)  # (what, max |diff|)

    @property
    def passed(self):
        return all(d <= TOL for _, d in self.checks)

    def step(self, name):
        """The value of the step called `name` (forward or backward)."""
        for s in self.forward + self.backward:
            if s.name == name:
                return s.value
        raise KeyError(f"{self.component}: no step named {name!r}")


def _hand(rng, shape, decimals=2):
    return np.round(rng.standard_normal(shape), decimals)  # (shape) hand-friendly numbers


def _floats(where, x, default, min_ndim):
    x = np.asarray(default if x is None else x, dtype=np.float64)
    if x.ndim < min_ndim:
        raise ValueError(
            f"explain {where}: the input must have at least {min_ndim} dimension(s), got shape {x.shape}"
        )
    return x


def _round_params(module, rng=None):
    """Round every parameter to 2 decimals; with `rng`, first give every LayerNorm a scale and
    shift of its own (not 1 and 0, under which out == xhat and the scale's role never shows)."""
    from ..layers.layernorm import LayerNorm

    for _, m in module.named_modules() if rng is not None else []:
        if isinstance(m, LayerNorm):
            m.scale.data = rng.uniform(0.5, 1.5, m.scale.data.shape).astype(m.scale.data.dtype)
            m.shift.data = (0.5 * rng.standard_normal(m.shift.data.shape)).astype(m.shift.data.dtype)
    for p in module.parameters():
        p.data = np.round(p.data, 2)
    return module


def _keep_mask(att, att_d):
    """The dropout keep-mask the module drew, read off its cached weights before and after
    dropout (an input to the hand steps, like x): kept where att_d != 0; where att is 0 (the
    masked future) the mask does not matter and is shown as 1."""
    return (att_d != 0) | (att == 0)


def _diff(*pairs):
    return max(float(np.max(np.abs(np.asarray(a, np.float64) - b), initial=0.0)) for a, b in pairs)


def _dout(rng, dout, shape, where):
    if dout is None:
        return _hand(rng, shape)
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != tuple(shape):
        raise ValueError(f"explain {where}: dout has shape {dout.shape}, the output has shape {tuple(shape)}")
    return dout
