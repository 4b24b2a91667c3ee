"""Known mistakes, computed from the reference: what each component returns when one classic
error is made.

A mistake is the reference class (npgpt/layers/, npgpt/loss.py) with one step changed: a
subclass overriding one of the steps the reference keeps as a method for this (`LayerNorm.rstd`,
`GELU.du_dx`, `MultiHeadAttention.softmax_backward`, ...), or the reference built with another
argument (`unbiased=True`) or other parameter values (`scale` = 1), so its eps and every other
setting are the module's own. The one exception is a GELU curve other than the tanh one (exact
erf, sigmoid), a different function, written out here.

`variants(key, tensor, case, params)` yields (description, thunk) pairs; the thunk computes the
mistaken answer for that case in float64, here in the grader's process. diagnose.py names a
variant when the submission's answer matches it and not the correct one.
"""

import math

import numpy as np

from ..gradcheck import numerical_gradient
from ..layers import GELU, LayerNorm, MultiHeadAttention
from ..layers.gelu import SQRT_2_OVER_PI
from .components import SPECS, reference_module, run_module

_erf = np.vectorize(math.erf)


def reference(key, params, cls=None, **changes):
    """The reference module of `key` (or its subclass `cls`) with the grader's parameter values
    `params`; `changes` are constructor keywords that differ from the grader's."""
    m = reference_module(SPECS[key], cls=cls, **changes)
    m.load_state_dict({**m.state_dict(), **params})
    return m


def answers(module, case, backward=True):
    """{"out", "dx", "grad/<name>"} of `module` on the case's inputs and dout, in float64
    (backward=False: {"out"} only)."""
    return run_module(module, case.inputs, case.dout if backward else None)


# ---- LayerNorm ---------------------------------------------------------------------------------
class _EpsOutsideTheRoot(LayerNorm):
    def rstd(self, var):
        return 1.0 / (np.sqrt(var) + self.eps)  # the mistake: 1 / (sqrt(var) + eps)


def _layernorm(tensor, case, P):
    x, dout = case.inputs[0], case.dout
    C = x.shape[-1]
    if tensor == "out":
        yield (
            "the unbiased variance (divided by C - 1; LayerNorm divides by C)",
            lambda: answers(reference("layernorm", P, unbiased=True), case, False)["out"],
        )
        yield (
            "eps added outside the square root (use 1/sqrt(var + eps))",
            lambda: answers(reference("layernorm", P, _EpsOutsideTheRoot), case, False)["out"],
        )
        yield "no scale and shift applied", lambda: answers(reference("layernorm", {}), case, False)["out"]
        return
    if tensor == "dx":
        # a missing mean or variance term is found from the residual's shape (diagnose.py)
        unit_scale = {**P, "scale": np.ones_like(P["scale"])}
        yield (
            "the gradient with dout not multiplied by scale",
            lambda: answers(reference("layernorm", unit_scale), case)["dx"],
        )
        yield (
            "the gradient of the unbiased-variance LayerNorm (divide by C, not C - 1)",
            lambda: answers(reference("layernorm", P, unbiased=True), case)["dx"],
        )
        eps_outside = reference("layernorm", P, _EpsOutsideTheRoot)
        yield (
            "the gradient of a LayerNorm with eps outside the square root",
            lambda: numerical_gradient(eps_outside.forward, x.copy(), dout),
        )
    elif tensor == "grad/scale":
        yield "sum(dout * x) (use the normalized xhat, not x)", lambda: (dout * x).reshape(-1, C).sum(0)
        yield (
            "sum(dout) (the xhat factor is missing)",
            lambda: answers(reference("layernorm", P), case)["grad/shift"],
        )


# ---- GELU --------------------------------------------------------------------------------------
class _ErfGELU(GELU):
    def forward(self, x):  # not the tanh form: 0.5 x (1 + erf(x / sqrt(2)))
        self.cache = None
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class _SigmoidGELU(GELU):
    def forward(self, x):  # not the tanh form: x sigmoid(1.702 x)
        self.cache = None
        return x / (1.0 + np.exp(-1.702 * x))


class _NoCubicTerm(GELU):
    def u(self, x):  # the mistake: u = sqrt(2/pi) x, the 0.044715 x^3 term dropped
        return SQRT_2_OVER_PI * x


class _NoTanhDerivative(GELU):
    def local_grad(self, x, t):  # the mistake: d tanh(u)/du taken as 1
        return 0.5 * (1.0 + t) + 0.5 * x * self.du_dx(x)


class _NoCubicDerivative(GELU):
    def du_dx(self, x):  # the mistake: du/dx = sqrt(2/pi), the 3 * 0.044715 x^2 dropped
        return SQRT_2_OVER_PI + 0.0 * x


class _ErfDerivative(GELU):
    def local_grad(self, x, t):  # the mistake: Phi(x) + x phi(x), the exact GELU's derivative
        phi = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * phi


class _NoFirstTerm(GELU):
    def local_grad(self, x, t):  # the mistake: the product rule's 0.5 (1 + t) term dropped
        return super().local_grad(x, t) - 0.5 * (1.0 + t)


GELU_FORWARDS = {
    "exact erf GELU (the assignment uses the tanh approximation)": _ErfGELU,
    "GELU without the 0.044715 x^3 term": _NoCubicTerm,
    "sigmoid GELU x * sigmoid(1.702 x)": _SigmoidGELU,
}
GELU_BACKWARDS = {
    "the derivative missing the 1 - tanh^2 factor (d tanh(u)/du = 1 - tanh(u)^2)": _NoTanhDerivative,
    "the derivative missing the cubic term's derivative (du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2))": (
        _NoCubicDerivative
    ),
    "the exact-erf GELU derivative Phi(x) + x phi(x) instead of the tanh form's": _ErfDerivative,
    "the derivative missing the product rule's 0.5 (1 + tanh(u)) term": _NoFirstTerm,
}


def _gelu(tensor, case, P):
    if tensor == "out":
        for desc, cls in GELU_FORWARDS.items():
            yield desc, lambda cls=cls: answers(reference("gelu", P, cls), case, False)["out"]
    elif tensor == "dx":
        for desc, cls in GELU_BACKWARDS.items():
            yield desc, lambda cls=cls: answers(reference("gelu", P, cls), case)["dx"]
        ones = case.__class__(case.name, case.inputs, np.ones_like(case.dout))
        yield (
            "the local derivative not multiplied by dout",
            lambda: answers(reference("gelu", P), ones)["dx"],
        )


# ---- FeedForward: its GELU swapped for a mistaken one --------------------------------------------
def _feedforward_with(P, gelu_cls):
    ff = reference("feedforward", P)
    ff.layers[1].__class__ = gelu_cls  # the GELU has no parameters: only its class changes
    return ff


def _feedforward(tensor, case, P):
    if tensor == "out":
        for desc, cls in GELU_FORWARDS.items():
            yield (
                f"a FeedForward using the {desc}",
                lambda cls=cls: answers(_feedforward_with(P, cls), case, False)["out"],
            )
    elif tensor in ("dx", "grad/layers.0.weight", "grad/layers.0.bias"):
        for desc, cls in GELU_BACKWARDS.items():
            yield (
                f"a FeedForward whose GELU uses {desc}",
                lambda cls=cls: answers(_feedforward_with(P, cls), case)[tensor],
            )


# ---- MultiHeadAttention ------------------------------------------------------------------------
class _NoScaleForward(MultiHeadAttention):
    def scores(self, q, k):  # the mistake: q k^T, not divided by sqrt(hs)
        return super().scores(q, k) * math.sqrt(self.head_dim)


class _NoScaleBackward(MultiHeadAttention):
    def scores_backward(self, dscores, q, k):  # the mistake: the 1/sqrt(hs) factor dropped
        return super().scores_backward(dscores * math.sqrt(self.head_dim), q, k)


class _NoScale(_NoScaleForward, _NoScaleBackward):
    pass


class _ElementwiseSoftmax(MultiHeadAttention):
    def softmax_backward(self, datt, att):  # the mistake: the Jacobian's diagonal only
        return datt * att * (1.0 - att)


class _UnmaskedSoftmaxBackward(MultiHeadAttention):
    def scores(self, q, k):
        self.unmasked = super().scores(q, k)  # kept for the mistaken backward
        return self.unmasked

    def softmax_backward(self, datt, att):  # the mistake: softmax of the scores before the mask
        return super().softmax_backward(datt, self.softmax(self.unmasked))


def _unmasked(P):
    m = reference("attention", P)
    m.register_buffer("mask", np.zeros_like(m.mask))  # the mistake: no position is masked
    return m


def _attention(tensor, case, P):
    runs = {
        "the causal mask not applied in forward": lambda: _unmasked(P),
        "scores not scaled by 1/sqrt(head_dim)": lambda: reference("attention", P, _NoScale),
    }
    if tensor != "out":
        runs.update(
            {
                "softmax treated as elementwise in backward (att * (1 - att) instead of the Jacobian)": (
                    lambda: reference("attention", P, _ElementwiseSoftmax)
                ),
                "the 1/sqrt(head_dim) scaling missing in backward": (
                    lambda: reference("attention", P, _NoScaleBackward)
                ),
                "the mask ignored in backward (softmax of the unmasked scores)": (
                    lambda: reference("attention", P, _UnmaskedSoftmaxBackward)
                ),
            }
        )
    for desc, build in runs.items():
        yield desc, lambda build=build: answers(build(), case, tensor != "out")[tensor]


# ---- CrossEntropyLoss: the right answer rescaled, or without its one-hot term --------------------
def _crossentropy(tensor, case, P):
    logits, targets = case.inputs
    keep = targets.reshape(-1) != -100
    n, N = int(keep.sum()), keep.size
    exp = case.expected[tensor]
    if tensor == "out":
        yield f"the sum over the {n} targets instead of the mean", lambda: exp * n
        if n != N:
            yield "the mean over all rows, ignored ones included", lambda: exp * n / N
    else:
        yield f"the gradient not divided by N = {n} (the number of counted targets)", lambda: exp * n
        if n != N:
            yield f"the gradient divided by all {N} rows, ignored ones included", lambda: exp * n / N
        onehot = np.zeros((N, logits.shape[-1]))
        onehot[np.arange(N)[keep], targets.reshape(-1)[keep]] = 1.0 / n
        yield (
            "softmax / N without subtracting the one-hot target",
            lambda: exp + onehot.reshape(logits.shape),
        )


TABLE = {
    "layernorm": _layernorm,
    "gelu": _gelu,
    "attention": _attention,
    "feedforward": _feedforward,
    "crossentropy": _crossentropy,
}


def variants(key, tensor, case, params):
    fn = TABLE.get(key)
    return fn(tensor, case, params) if fn else iter(())
