"""Known mistakes, computed from the reference: what each component returns when one classic
error is made, in the grader's words.

The mistakes themselves are npgpt/mistakes.py, the one catalogue (shared with `npgpt compare`):
the reference class with one step overridden, or a change to the module's parameters or
buffers. Here each is also the reference built with another argument (`unbiased=True`) or other
parameter values (`scale` = 1), so its eps and every other setting are the module's own.

`variants(key, tensor, case, params)` yields (description, thunk) pairs; the thunk computes the
mistaken answer for that case in float64, here in the grader's process. diagnose.py names a
variant when the submission's answer matches it and not the correct one.
"""

import numpy as np

from .. import mistakes
from ..gradcheck import numerical_gradient
from ..mistakes import GELU_BACKWARDS, GELU_FORWARDS
from .components import SPECS, reference_module, run_module


def reference(key, params, cls=None, **changes):
    """The reference module of `key` (or its subclass `cls`) with the grader's parameter values
    `params`; `changes` are constructor keywords that differ from the grader's."""
    m = reference_module(SPECS[key], cls=cls, **changes)
    m.load_state_dict({**m.state_dict(), **params})
    return m


def _changed(module, change):
    """`module` after a change of npgpt/mistakes.py (other parameter values or buffers)."""
    change(module)
    return module


def answers(module, case, backward=True):
    """{"out", "dx", "grad/<name>"} of `module` on the case's inputs and dout, in float64
    (backward=False: {"out"} only)."""
    return run_module(module, case.inputs, case.dout if backward else None)


# ---- LayerNorm ---------------------------------------------------------------------------------
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
            lambda: answers(reference("layernorm", P, mistakes.EpsOutsideTheRoot), case, False)["out"],
        )
        yield (
            "no scale and shift applied",
            lambda: answers(_changed(reference("layernorm", P), mistakes.unit_norm), case, False)["out"],
        )
        return
    if tensor == "dx":
        # a missing mean or variance term is found from the residual's shape (diagnose.py)
        yield (
            "the gradient with dout not multiplied by scale",
            lambda: answers(_changed(reference("layernorm", P), mistakes.unit_scale), case)["dx"],
        )
        yield (
            "the gradient of the unbiased-variance LayerNorm (divide by C, not C - 1)",
            lambda: answers(reference("layernorm", P, unbiased=True), case)["dx"],
        )
        eps_outside = reference("layernorm", P, mistakes.EpsOutsideTheRoot)
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
def _attention(tensor, case, P):
    runs = {
        "the causal mask not applied in forward": (
            lambda: _changed(reference("attention", P), mistakes.no_mask)
        ),
        "scores not scaled by 1/sqrt(head_dim)": lambda: reference("attention", P, mistakes.NoScale),
    }
    if tensor != "out":
        runs.update(
            {
                "softmax treated as elementwise in backward (att * (1 - att) instead of the Jacobian)": (
                    lambda: reference("attention", P, mistakes.ElementwiseSoftmax)
                ),
                "the 1/sqrt(head_dim) scaling missing in backward": (
                    lambda: reference("attention", P, mistakes.NoScaleBackward)
                ),
                "the mask ignored in backward (softmax of the unmasked scores)": (
                    lambda: reference("attention", P, mistakes.UnmaskedSoftmaxBackward)
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
