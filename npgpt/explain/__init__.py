"""Every intermediate of a component's forward and backward, computed by hand gate by gate as
in the tables of its docs page (docs/<component>.md), in the order a student computes them,
then compared with the reference module: its own caches, output, input gradient and every
parameter gradient. This walk-through is the one place the math is deliberately computed a
second time, to check the reference (npgpt/layers/, loss.py, model.py) against.

`explain(component, x=None, seed=0, dout=None, **options)` returns an `Explanation`; the
`npgpt explain` command prints it. Weights, `dout` and default inputs are drawn from `seed` and
rounded to 2 decimals, so every number can be checked with a pencil.

One file per component, with the stem of its module and its docs page (layernorm.py beside
npgpt/layers/layernorm.py and docs/layernorm.md); steps.py holds what they share.
"""

from ..registry import resolve, supported
from .attention import explain_attention
from .block import explain_block
from .dropout import explain_dropout
from .embedding import explain_embedding
from .feedforward import explain_feedforward
from .gelu import explain_gelu, gelu_parts
from .layernorm import BOOK_LAYERNORM_INPUT, explain_layernorm
from .linear import explain_linear
from .loss import explain_loss
from .model import explain_model
from .steps import TOL, Explanation, Step

# the registry's explain settings name each component's function here (npgpt/registry.py)
EXPLAINERS = {c.name: globals()[c.explain] for c in supported("explain")}
COMPONENTS = tuple(EXPLAINERS)  # in the order of the docs: the layers, the composites, the loss, the model


def explain(component, x=None, seed=0, dout=None, **options):
    """The Explanation of `component` for input `x` (default: a small example).

    `component` is a registry name (see COMPONENTS), a class name or an alias such as "loss";
    an unknown one raises registry.UnknownComponent (a ValueError) listing the valid names."""
    return EXPLAINERS[resolve(component, "explain").name](x=x, seed=seed, dout=dout, **options)


__all__ = [
    "BOOK_LAYERNORM_INPUT",
    "COMPONENTS",
    "EXPLAINERS",
    "TOL",
    "Explanation",
    "Step",
    "explain",
    "explain_attention",
    "explain_block",
    "explain_dropout",
    "explain_embedding",
    "explain_feedforward",
    "explain_gelu",
    "explain_layernorm",
    "explain_linear",
    "explain_loss",
    "explain_model",
    "gelu_parts",
]
