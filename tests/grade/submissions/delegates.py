"""Hands its work to npgpt's own LayerNorm: not allowed while grading."""

from npgpt import LayerNorm as Reference


class LayerNorm(Reference):
    pass
