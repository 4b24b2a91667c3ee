"""npgpt.fast: the components made fast, each held equal to its reference by property tests.

The reference (npgpt/layers/, npgpt/loss.py, npgpt/model.py) is the plain math a reader
follows beside docs/. Here the same components keep buffers across calls, run elementwise
passes block by block on several threads, compute attention in tiles and fuse the loss.

    model = npgpt.fast.accelerate(GPTModel(cfg))   # in place; returns the model
    npgpt.fast.reference(model)                    # back to the plain code

A fast class subclasses its reference class and overrides forward and backward, so switching
is `module.__class__ = ...`: constructor arguments, parameters, state_dict and the
forward/backward protocol stay what they were. Only instances of exactly a reference class
switch (a subclass, such as a grader's mistake variant, keeps its own code). A switch drops
the module's cache: a backward pairs with a forward of the same implementation.

Process-wide state (the thread count, the worker pool, BLAS's thread count through
threadpoolctl, scratch buffers) lives here and starts on first use (_blas_threads.py).
"""

from .. import loss as _ref_loss
from ..layers import attention as _ref_attention
from ..layers import gelu as _ref_gelu
from ..layers import layernorm as _ref_layernorm
from ..layers import linear as _ref_linear
from . import _blas_threads
from .attention import MultiHeadAttention
from .gelu import GELU
from .layernorm import LayerNorm
from .linear import Linear
from .loss import CrossEntropyLoss

# reference class -> its fast twin
FAST = {
    _ref_layernorm.LayerNorm: LayerNorm,
    _ref_gelu.GELU: GELU,
    _ref_linear.Linear: Linear,
    _ref_attention.MultiHeadAttention: MultiHeadAttention,
    _ref_loss.CrossEntropyLoss: CrossEntropyLoss,
}
REFERENCE = {fast: ref for ref, fast in FAST.items()}


def _check_module(where, module):
    from ..module import Module

    if not isinstance(module, Module):
        raise TypeError(f"npgpt.fast.{where}: module must be an npgpt.Module, got {type(module).__name__}")


def _switch(module, table):
    for _, m in module.named_modules():
        cls = table.get(type(m))
        if cls is not None:
            m.__class__ = cls
            m.cache = None  # a cache of one implementation means nothing to the other
            m.__dict__.pop("_workspace", None)


def accelerate(module, threads=None):
    """Switch `module` and every submodule with a fast twin to it, in place; return `module`.

    threads: npgpt's and BLAS's thread count, process-wide (see _blas_threads.py): this
    argument, else OMP_NUM_THREADS / OPENBLAS_NUM_THREADS, else npgpt's choice from the CPUs
    this process may use and the model's size.
    """
    _check_module("accelerate", module)
    n_params = sum(p.data.size for p in module.parameters()) or None
    if threads is not None or n_params is not None or _blas_threads._threads is None:
        _blas_threads.set_threads(threads, n_params)
    _switch(module, FAST)
    return module


def reference(module):
    """Switch `module` and every fast submodule back to the reference, in place; return `module`."""
    _check_module("reference", module)
    _switch(module, REFERENCE)
    return module


def is_fast(module):
    """True when `module` or one of its submodules runs a fast implementation."""
    return any(type(m) in REFERENCE for _, m in module.named_modules())


threads = _blas_threads.threads
shutdown = _blas_threads.shutdown

__all__ = [
    "GELU",
    "CrossEntropyLoss",
    "LayerNorm",
    "Linear",
    "MultiHeadAttention",
    "accelerate",
    "is_fast",
    "reference",
    "shutdown",
    "threads",
]
