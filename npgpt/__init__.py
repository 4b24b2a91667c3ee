"""npgpt: GPT-2's building blocks in plain NumPy, every gradient written by hand.

The public contract (names, arguments, the forward/backward protocol) is docs/api.md; see
README.md. The components here are the reference, plain NumPy; `npgpt.fast` has their fast
twins. Importing npgpt sets no environment variable and starts no thread.
"""

import importlib
import sys
import types

# public name -> the submodule that defines it; loaded on first use (PEP 562), so that
# `import npgpt` loads no NumPy and the `npgpt` command can set what OpenBLAS reads at load time
# (npgpt/cli.py) before anything loads NumPy
_WHERE = {
    "load_gpt2": ".gpt2",
    "GradcheckReport": ".gradcheck",
    "gradcheck": ".gradcheck",
    "numerical_gradient": ".gradcheck",
    "GELU": ".layers",
    "Dropout": ".layers",
    "Embedding": ".layers",
    "FeedForward": ".layers",
    "LayerNorm": ".layers",
    "Linear": ".layers",
    "MultiHeadAttention": ".layers",
    "TransformerBlock": ".layers",
    "CrossEntropyLoss": ".loss",
    "GPT_CONFIG_124M": ".model",
    "GPTModel": ".model",
    "Module": ".module",
    "Parameter": ".module",
    "Sequential": ".module",
}


def __getattr__(name):
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name], __name__), name)
        globals()[name] = value
        return value
    try:
        return importlib.import_module(f"{__name__}.{name}")  # a submodule, e.g. npgpt.fast
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))


class _Package(types.ModuleType):
    """`npgpt.gradcheck` is the function, as `from npgpt import gradcheck` gives: importing the
    submodule npgpt/gradcheck.py must not rebind the name to the module."""

    def __setattr__(self, name, value):
        if name in _WHERE and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

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
