"""The catalogue of known mistakes: what a component computes when one classic error is made,
derived from the reference (npgpt/layers/) so the math stays in one place.

A mistake is one of two things:
- a class: the reference class with ONE step overridden. The reference keeps those steps as
  methods for this (`LayerNorm.rstd`, `LayerNorm.mean_term`, `GELU.du_dx`,
  `MultiHeadAttention.row_max`, ...), so a mistake class changes one line of the math and
  inherits the rest: its eps, its shapes and every other setting are the module's own. Use it
  by building the class like the reference, or by setting `module.__class__` on a copy.
- a change: a function that changes a module (in place; give it a copy) to other parameter
  values or buffers, e.g. an unmasked attention or a transposed weight.
The one exception is a GELU curve other than the tanh one (exact erf, sigmoid): a different
function, written out here.

Two tools read this catalogue and describe each mistake in their own words: the grader
(npgpt/grade/variants.py, for `npgpt grade`) and the golden-reference comparer
(npgpt/golden/diagnose.py, for `npgpt compare`). A mistake either can recognize belongs here.
"""

import math

import numpy as np

from .layers.attention import MultiHeadAttention
from .layers.gelu import COEF, GELU, SQRT_2_OVER_PI
from .layers.layernorm import LayerNorm

_erf = np.vectorize(math.erf)


# ---- LayerNorm (docs/layernorm.md) -------------------------------------------------------------
class EpsOutsideTheRoot(LayerNorm):
    def rstd(self, var):  # the mistake: 1 / (sqrt(var) + eps), not 1 / sqrt(var + eps)
        return 1.0 / (np.sqrt(var) + self.eps)


class NoMeanTerm(LayerNorm):
    def mean_term(self, dxhat):  # the mistake: eq. 9 without - mean(dxhat)
        return np.zeros_like(dxhat[..., :1])


class NoVarianceTerm(LayerNorm):
    def variance_term(self, dxhat, xhat, n):  # the mistake: eq. 9 without - xhat * sum(dxhat xhat) / n
        return np.zeros_like(dxhat[..., :1])


def unbiased_variance(ln):
    """LayerNorm dividing the variance by C - 1 (`unbiased=True`), not by C."""
    ln.unbiased = True


def unit_scale(ln):
    """LayerNorm with scale 1: dxhat = dout, the scale never multiplied in."""
    ln.scale.data = np.ones_like(ln.scale.data)


def unit_norm(ln):
    """LayerNorm with the book's initial scale 1 and shift 0: no scale and shift applied."""
    unit_scale(ln)
    ln.shift.data = np.zeros_like(ln.shift.data)


# ---- GELU (docs/gelu.md) -----------------------------------------------------------------------
class ErfGELU(GELU):
    def forward(self, x):  # not the tanh form: 0.5 x (1 + erf(x / sqrt(2)))
        self.cache = None
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class SigmoidGELU(GELU):
    def forward(self, x):  # not the tanh form: x sigmoid(1.702 x)
        self.cache = None
        return x / (1.0 + np.exp(-1.702 * x))


class NoCubicTerm(GELU):
    def u(self, x):  # the mistake: u = sqrt(2/pi) x, the 0.044715 x^3 term dropped
        return SQRT_2_OVER_PI * x


class NoTanhDerivative(GELU):
    def local_grad(self, x, t):  # the mistake: d tanh(u)/du taken as 1
        return 0.5 * (1.0 + t) + 0.5 * x * self.du_dx(x)


class NoCubicDerivative(GELU):
    def du_dx(self, x):  # the mistake: du/dx = sqrt(2/pi), the 3 * 0.044715 x^2 dropped
        return SQRT_2_OVER_PI + 0.0 * x


class NoThree(GELU):
    def du_dx(self, x):  # the mistake: sqrt(2/pi) (1 + 0.044715 x^2), the 3 of the x^3 rule dropped
        return SQRT_2_OVER_PI * (1.0 + COEF * (x * x))


class ErfDerivative(GELU):
    def local_grad(self, x, t):  # the mistake: Phi(x) + x phi(x), the exact GELU's derivative
        phi = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * phi


class NoFirstTerm(GELU):
    def local_grad(self, x, t):  # the mistake: the product rule's 0.5 (1 + t) term dropped
        return super().local_grad(x, t) - 0.5 * (1.0 + t)


# the GELU mistakes both tools look for, by what they get wrong
GELU_FORWARDS = {
    "exact erf GELU (the assignment uses the tanh approximation)": ErfGELU,
    "GELU without the 0.044715 x^3 term": NoCubicTerm,
    "sigmoid GELU x * sigmoid(1.702 x)": SigmoidGELU,
}
GELU_BACKWARDS = {
    "the derivative missing the 1 - tanh^2 factor (d tanh(u)/du = 1 - tanh(u)^2)": NoTanhDerivative,
    "the derivative missing the cubic term's derivative (du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2))": (
        NoCubicDerivative
    ),
    "the exact-erf GELU derivative Phi(x) + x phi(x) instead of the tanh form's": ErfDerivative,
    "the derivative missing the product rule's 0.5 (1 + tanh(u)) term": NoFirstTerm,
}


# ---- Linear (docs/linear.md) -------------------------------------------------------------------
def transposed_weight(lin):
    """Linear computing x @ W + b (forward) and dout @ W^T (backward): W used transposed. Only a
    square weight can be used so; for any other the shapes say so."""
    lin.weight.data = lin.weight.data.T.copy()


# ---- MultiHeadAttention (docs/attention.md) ----------------------------------------------------
class NoScaleForward(MultiHeadAttention):
    def scores(self, q, k):  # the mistake: q k^T, not divided by sqrt(hs)
        return super().scores(q, k) * math.sqrt(self.head_dim)


class NoScaleBackward(MultiHeadAttention):
    def scores_backward(self, dscores, q, k):  # the mistake: the 1/sqrt(hs) factor dropped
        return super().scores_backward(dscores * math.sqrt(self.head_dim), q, k)


class NoScale(NoScaleForward, NoScaleBackward):
    """Both: scores not scaled in forward, nor in backward."""


class ScoresOverHeadDim(MultiHeadAttention):
    def scores(self, q, k):  # the mistake: q k^T / hs, not / sqrt(hs)
        return super().scores(q, k) / math.sqrt(self.head_dim)


class ScoresOverSqrtEmbDim(MultiHeadAttention):
    def scores(self, q, k):  # the mistake: q k^T / sqrt(d_out), not / sqrt(hs)
        return super().scores(q, k) * math.sqrt(self.head_dim / self.d_out)


class NoMaxShift(MultiHeadAttention):
    """Softmax of the raw scores: exp overflows once a score exceeds log(dtype max). The row
    max it leaves out is kept in `skipped`, the largest score the module saw."""

    def row_max(self, masked):  # the mistake: nothing subtracted before exp
        self.skipped = float(np.max(super().row_max(masked), initial=-np.inf))
        return 0.0


class ElementwiseSoftmax(MultiHeadAttention):
    def softmax_backward(self, datt, att):  # the mistake: the Jacobian's diagonal only
        return datt * att * (1.0 - att)


class UnmaskedSoftmaxBackward(MultiHeadAttention):
    def scores(self, q, k):
        self.unmasked = super().scores(q, k)  # kept for the mistaken backward
        return self.unmasked

    def softmax_backward(self, datt, att):  # the mistake: softmax of the scores before the mask
        return super().softmax_backward(datt, self.softmax(self.unmasked))


def no_mask(att):
    """Attention whose causal mask hides nothing: a token sees the later tokens."""
    att.register_buffer("mask", np.zeros_like(att.mask))
