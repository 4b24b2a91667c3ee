"""npgpt: GPT-2's building blocks in plain NumPy, every gradient written by hand.

The public contract (names, arguments, the forward/backward protocol) is docs/api.md; see README.md.
"""

from . import _blas_threads  # noqa: F401  (first: it must run before NumPy loads OpenBLAS)
from .gpt2 import load_gpt2
from .gradcheck import GradcheckReport, gradcheck, numerical_gradient
from .layers import (
    GELU,
    Dropout,
    Embedding,
    FeedForward,
    LayerNorm,
    Linear,
    MultiHeadAttention,
    TransformerBlock,
)
from .loss import CrossEntropyLoss
from .model import GPT_CONFIG_124M, GPTModel
from .module import Module, Parameter, Sequential

__version__ = "0.1.0"

__all__ = [
    "GELU",
    "GPT_CONFIG_124M",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "FeedForward",
    "GPTModel",
    "GradcheckReport",
    "LayerNorm",
    "Linear",
    "Module",
    "MultiHeadAttention",
    "Parameter",
    "Sequential",
    "TransformerBlock",
    "gradcheck",
    "load_gpt2",
    "numerical_gradient",
]
