"""The GPT-2 components, one file each."""

from .attention import MultiHeadAttention
from .block import TransformerBlock
from .dropout import Dropout
from .embedding import Embedding
from .feedforward import FeedForward
from .gelu import GELU
from .layernorm import LayerNorm
from .linear import Linear

__all__ = [
    "Dropout",
    "Embedding",
    "FeedForward",
    "GELU",
    "LayerNorm",
    "Linear",
    "MultiHeadAttention",
    "TransformerBlock",
]
