"""What the grader asks of each component: how to build it, its inputs, and the reference answers.

A `Spec` names the class (and the CS231n-style function pair) a submission may define and makes
the cases from the run's seed: "main" (graded against the reference, float64), "float32" (dtype
and shape preserved) and the hidden edge cases. Reference answers are computed here, in the
grader's own process, with npgpt's classes; the submission never sees them.
"""

from dataclasses import dataclass, field

import numpy as np

import npgpt

K_DIRECTIONS = 3  # random directions per tensor for the finite-difference check
FD_EPS = 1e-5

CFG = {
    "vocab_size": 11,
    "context_length": 5,
    "emb_dim": 8,
    "n_heads": 2,
    "n_layers": 1,
    "drop_rate": 0.0,
    "qkv_bias": False,
}


@dataclass
class Case:
    """One call of forward then backward: inputs, parameter values, dout and the expected answers."""

    name: str
    inputs: list
    dout: object
    dtype: str = "float64"
    edge: bool = False
    expected: dict = field(default_factory=dict)  # "out", "dx", "grad/<param>"
    directions: dict = field(default_factory=dict)  # tensor name -> (K, *shape), main case only


@dataclass
class Spec:
    key: str  # the name used by --only and `npgpt assignment`
    cls: str  # the class a submission defines
    fwd: str  # or this CS231n-style function pair
    bwd: str
    ctor: list  # positional constructor arguments (JSON)
    fn_extra: list  # trailing arguments of the forward function
    fn_grads: list  # the names the backward function returns its gradients under
    doc: str  # the docs page with the derivation
    make_inputs: object  # (rng) -> {case name: inputs}; "main" first
    dict_params: bool = False  # function form takes/returns parameters as a dict (block)


def _ln_inputs(rng):
    x = rng.standard_normal((2, 3, 8))  # (B, T, C)
    return {
        "main": [x],
        "large offset": [x[:1] + 1e6],
        "single row": [rng.standard_normal((1, 8))],
        "T == 1": [rng.standard_normal((2, 1, 8))],
    }


def _gelu_inputs(rng):
    return {
        "main": [2.5 * rng.standard_normal((2, 3, 8))],
        "large inputs": [np.array([[-40.0, -12.0, -5.0, 0.0, 5.0, 12.0, 40.0]])],
        "single row": [rng.standard_normal((1, 5))],
        "T == 1": [rng.standard_normal((2, 1, 8))],
    }


def _linear_inputs(rng):
    return {
        "main": [rng.standard_normal((2, 3, 6))],
        "single row": [rng.standard_normal((1, 6))],
        "T == 1": [rng.standard_normal((2, 1, 6))],
        "large offset": [rng.standard_normal((2, 6)) + 1e3],
    }


def _ff_inputs(rng):
    return {
        "main": [rng.standard_normal((2, 3, 8))],
        "single row": [rng.standard_normal((1, 8))],
        "T == 1": [rng.standard_normal((2, 1, 8))],
    }


def _attn_inputs(rng):
    return {
        "main": [rng.standard_normal((2, 5, 6))],
        "T == 1": [rng.standard_normal((2, 1, 6))],
        "single sequence": [rng.standard_normal((1, 4, 6))],
        "large scores": [100.0 * rng.standard_normal((1, 5, 6))],
    }


def _block_inputs(rng):
    return {
        "main": [rng.standard_normal((2, 5, 8))],
        "T == 1": [rng.standard_normal((2, 1, 8))],
        "single sequence": [rng.standard_normal((1, 3, 8))],
    }


def _ce_inputs(rng):
    def targets(shape, V):
        return rng.integers(0, V, shape)

    t3 = targets((2, 3), 7)
    t3[0, 1] = t3[1, 2] = -100  # ignored positions
    return {
        "main": [3.0 * rng.standard_normal((6, 7)), targets((6,), 7)],
        "large logits": [rng.standard_normal((4, 7)) + 1e3, targets((4,), 7)],
        "single row": [rng.standard_normal((1, 7)), targets((1,), 7)],
        "(B, T, V) with ignore_index": [rng.standard_normal((2, 3, 7)), t3],
    }


SPECS = {
    "layernorm": Spec(
        "layernorm",
        "LayerNorm",
        "layernorm_forward",
        "layernorm_backward",
        [8],
        [{"eps": 1e-5}],
        ["dgamma", "dbeta"],
        "docs/layernorm.md",
        _ln_inputs,
    ),
    "gelu": Spec("gelu", "GELU", "gelu_forward", "gelu_backward", [], [], [], "docs/gelu.md", _gelu_inputs),
    "linear": Spec(
        "linear",
        "Linear",
        "linear_forward",
        "linear_backward",
        [6, 4],
        [],
        ["dw", "db"],
        "docs/linear.md",
        _linear_inputs,
    ),
    "feedforward": Spec(
        "feedforward",
        "FeedForward",
        "feedforward_forward",
        "feedforward_backward",
        [CFG],
        [],
        ["dw1", "db1", "dw2", "db2"],
        "docs/feedforward.md",
        _ff_inputs,
    ),
    "attention": Spec(
        "attention",
        "MultiHeadAttention",
        "attention_forward",
        "attention_backward",
        [6, 8, 5, 0.0, 2],
        [2],
        ["dw_query", "dw_key", "dw_value", "dw_out", "db_out"],
        "docs/attention.md",
        _attn_inputs,
    ),
    "block": Spec(
        "block",
        "TransformerBlock",
        "transformer_block_forward",
        "transformer_block_backward",
        [CFG],
        [CFG["n_heads"]],
        [],
        "docs/block.md",
        _block_inputs,
        dict_params=True,
    ),
    "crossentropy": Spec(
        "crossentropy",
        "CrossEntropyLoss",
        "cross_entropy_forward",
        "cross_entropy_backward",
        [],
        [-100],
        [],
        "docs/loss.md",
        _ce_inputs,
    ),
}


def reference_module(spec, rng=None):
    """npgpt's own class, built with the spec's constructor arguments."""
    cls = getattr(npgpt, spec.cls)
    if spec.key in ("linear", "feedforward", "attention", "block"):
        return cls(*spec.ctor, rng=rng)
    return cls(*spec.ctor)


def reference_run(spec, params, inputs, dout=None):
    """Expected answers in float64: "out", "dx" and "grad/<name>" for every parameter.

    dout=None runs the forward only and returns {"out": ...}.
    """
    m = reference_module(spec)
    m.load_state_dict({**m.state_dict(), **params})
    ins = [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else a for a in inputs]
    out = m.forward(*ins)
    if dout is None:
        return {"out": np.asarray(out, np.float64)}
    dx = m.backward(dout)
    exp = {"out": np.asarray(out, np.float64), "dx": np.asarray(dx, np.float64)}
    exp.update({f"grad/{n}": p.grad.copy() for n, p in m.named_parameters()})
    return exp


def make_cases(spec, seed):
    """(params, cases) for `seed`: parameter values by name, and the cases with expected answers."""
    rng = np.random.default_rng([seed, list(SPECS).index(spec.key)])
    ref = reference_module(spec, rng=rng)
    params = {}
    for name, p in ref.named_parameters():
        if name.endswith("scale") or name.endswith("shift"):  # LayerNorm's: move them off 1 and 0
            p.data = (1.0 if name.endswith("scale") else 0.0) + 0.3 * rng.standard_normal(p.data.shape)
        params[name] = p.data.astype(np.float64)
    cases = []
    for name, inputs in spec.make_inputs(rng).items():
        out_shape = reference_run(spec, params, inputs)["out"].shape
        dout = 1.0 if spec.key == "crossentropy" else rng.standard_normal(out_shape)
        cases.append(Case(name, inputs, dout, edge=name != "main"))
    main = cases[0]
    tensors = {"dx": main.inputs[0], **{f"grad/{n}": v for n, v in params.items()}}
    main.directions = {t: rng.standard_normal((K_DIRECTIONS,) + np.shape(v)) for t, v in tensors.items()}
    f32 = [a.astype(np.float32) if a.dtype.kind == "f" else a for a in main.inputs]
    dout32 = main.dout if np.ndim(main.dout) == 0 else np.asarray(main.dout, np.float32)
    cases.insert(1, Case("float32", f32, dout32, dtype="float32"))
    for c in cases:
        p = (
            {n: v.astype(np.float32).astype(np.float64) for n, v in params.items()}
            if c.dtype == "float32"
            else params
        )
        c.expected = reference_run(
            spec, p, c.inputs, np.asarray(c.dout, np.float64) if np.ndim(c.dout) else 1.0
        )
    return params, cases
