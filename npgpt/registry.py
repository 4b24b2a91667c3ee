"""The components, named once for every command: check, bench, grade, assignment and explain.

Each `Component` gives the name every command uses, the names accepted for it (its class name in
any case, and its aliases), the reference class, the stem of its files (npgpt/layers/<stem>.py
or npgpt/<stem>.py, docs/<stem>.md) and, beside that, each command's own settings: `check`
(gradcheck cases at small sizes), `bench` (how the benchmark builds it from a config), `grade`
(what a submission defines and the hidden cases), `assignment` (what its starter file brings
along) and `explain` (the function of npgpt.explain that walks through it). A command that has
no settings for a component does not support it.

`resolve(name, command)` turns a name into its Component or raises `UnknownComponent` (a
ValueError) whose one-line message lists the valid names; `resolve_list("a,b", command)` does a
comma-separated list (and "all"). The API reference (docs/api.md) lists the names.
"""

import inspect
from dataclasses import dataclass, field

import numpy as np

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
from .model import GPTModel

COMMANDS = ("check", "bench", "grade", "assignment", "explain")


class UnknownComponent(ValueError):
    """A component name that is not in the registry, or that a command does not support."""


# -- what each command keeps per component ----------------------------------------------------


@dataclass(frozen=True)
class Normal:
    """check: a float input of `shape` drawn from N(0, scale^2)."""

    shape: tuple
    scale: float = 1.0


@dataclass(frozen=True)
class Ids:
    """check: integer ids in [0, high) of `shape`; positions in `ignored` get -100."""

    shape: tuple
    high: int
    ignored: tuple = ()


@dataclass(frozen=True)
class Check:
    """check: one gradcheck case, the module built as cls(*args, **kwargs) (plus rng= if it takes one)."""

    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    inputs: tuple = ()


@dataclass(frozen=True)
class Bench:
    """bench: `build(cfg, rng)` makes the module from a GPT config; its input is (B, T, width * E).

    part "steps" means the benchmark times it as the training step, not as a component."""

    build: object
    width: int = 1
    part: str = "components"


@dataclass(frozen=True)
class Grade:
    """grade: the class a submission defines (the component's class name) or this CS231n-style
    function pair, how the grader builds it, and the cases it is graded on."""

    fwd: str
    bwd: str
    ctor: list  # positional constructor arguments (JSON)
    fn_extra: list  # trailing arguments of the forward function
    fn_grads: list  # the names the backward function returns its gradients under
    make_inputs: object  # (rng) -> {case name: inputs}; "main" first
    dict_params: bool = False  # the function form takes/returns parameters as a dict (block)


@dataclass(frozen=True)
class Component:
    """One component: its names, reference class and files, and each command's settings (a
    command with none, an empty `check` or a None elsewhere, does not support it)."""

    name: str
    cls: type  # the reference class
    stem: str  # npgpt/layers/<stem>.py (or npgpt/<stem>.py), docs/<stem>.md
    aliases: tuple = ()  # accepted besides the name and the class name
    check: tuple = ()  # of Check
    bench: Bench = None
    grade: Grade = None
    assignment: tuple = None  # the components its starter file brings along (NEEDS); None: no starter
    explain: str = None  # the function of npgpt.explain

    @property
    def doc(self):
        return f"docs/{self.stem}.md"

    @property
    def names(self):
        """Every name accepted for it, lower case: the name, the class name, the aliases."""
        return tuple(dict.fromkeys((self.name, self.cls.__name__.lower(), *self.aliases)))

    def supports(self, command):
        if command not in COMMANDS:
            raise ValueError(f"no command {command!r} in the registry; commands: {', '.join(COMMANDS)}")
        setting = getattr(self, command)
        return bool(setting) if command == "check" else setting is not None


# -- check's and grade's configurations, and grade's cases ---------------------------------------

CHECK_CFG = {
    "vocab_size": 11,
    "context_length": 6,
    "emb_dim": 8,
    "n_heads": 2,
    "n_layers": 2,
    "drop_rate": 0.1,
    "qkv_bias": True,
}
GRADE_CFG = {
    "vocab_size": 11,
    "context_length": 5,
    "emb_dim": 8,
    "n_heads": 2,
    "n_layers": 1,
    "drop_rate": 0.0,
    "qkv_bias": False,
}
X = Normal((2, 4, 8))  # check's (B, T, C) input


def _grade_layernorm(rng):
    x = rng.standard_normal((2, 3, 8))  # (B, T, C)
    return {
        "main": [x],
        "large offset": [x[:1] + 1e6],
        "single row": [rng.standard_normal((1, 8))],
        "T == 1": [rng.standard_normal((2, 1, 8))],
    }


def _grade_gelu(rng):
    return {
        "main": [2.5 * rng.standard_normal((2, 3, 8))],
        "large inputs": [np.array([[-40.0, -12.0, -5.0, 0.0, 5.0, 12.0, 40.0]])],
        "single row": [rng.standard_normal((1, 5))],
        "T == 1": [rng.standard_normal((2, 1, 8))],
    }


def _grade_linear(rng):
    return {
        "main": [rng.standard_normal((2, 3, 6))],
        "single row": [rng.standard_normal((1, 6))],
        "T == 1": [rng.standard_normal((2, 1, 6))],
        "large offset": [rng.standard_normal((2, 6)) + 1e3],
    }


def _grade_feedforward(rng):
    return {
        "main": [rng.standard_normal((2, 3, 8))],
        "single row": [rng.standard_normal((1, 8))],
        "T == 1": [rng.standard_normal((2, 1, 8))],
    }


def _grade_attention(rng):
    return {
        "main": [rng.standard_normal((2, 5, 6))],
        "T == 1": [rng.standard_normal((2, 1, 6))],
        "single sequence": [rng.standard_normal((1, 4, 6))],
        "large scores": [100.0 * rng.standard_normal((1, 5, 6))],
    }


def _grade_block(rng):
    return {
        "main": [rng.standard_normal((2, 5, 8))],
        "T == 1": [rng.standard_normal((2, 1, 8))],
        "single sequence": [rng.standard_normal((1, 3, 8))],
    }


def _grade_crossentropy(rng):
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


# -- the registry, in the order of the docs: the layers, the composites, the loss, the model -----

COMPONENTS = (
    Component(
        "layernorm",
        LayerNorm,
        "layernorm",
        check=(
            Check("LayerNorm", (8,), inputs=(X,)),
            Check("LayerNorm(unbiased)", (8,), {"eps": 1e-6, "unbiased": True}, inputs=(X,)),
        ),
        bench=Bench(lambda cfg, rng: LayerNorm(cfg["emb_dim"])),
        grade=Grade(
            "layernorm_forward",
            "layernorm_backward",
            [8],
            [{"eps": inspect.signature(LayerNorm).parameters["eps"].default}],  # the module's own
            ["dgamma", "dbeta"],
            _grade_layernorm,
        ),
        assignment=(),
        explain="explain_layernorm",
    ),
    Component(
        "gelu",
        GELU,
        "gelu",
        check=(Check("GELU", inputs=(Normal((2, 4, 8), 3.0),)),),
        bench=Bench(lambda cfg, rng: GELU(), width=4),
        grade=Grade("gelu_forward", "gelu_backward", [], [], [], _grade_gelu),
        assignment=(),
        explain="explain_gelu",
    ),
    Component(
        "linear",
        Linear,
        "linear",
        check=(
            Check("Linear", (8, 5), inputs=(X,)),
            Check("Linear(bias=False)", (8, 5), {"bias": False}, inputs=(X,)),
        ),
        grade=Grade("linear_forward", "linear_backward", [6, 4], [], ["dw", "db"], _grade_linear),
        assignment=(),
        explain="explain_linear",
    ),
    Component(
        "dropout",
        Dropout,
        "dropout",
        check=(Check("Dropout", (0.3,), inputs=(X,)),),
        explain="explain_dropout",
    ),
    Component(
        "embedding",
        Embedding,
        "embedding",
        check=(Check("Embedding", (11, 8), inputs=(Ids((2, 4), 11),)),),
        explain="explain_embedding",
    ),
    Component(
        "feedforward",
        FeedForward,
        "feedforward",
        check=(Check("FeedForward", (CHECK_CFG,), inputs=(X,)),),
        bench=Bench(lambda cfg, rng: FeedForward(cfg, rng=rng)),
        grade=Grade(
            "feedforward_forward",
            "feedforward_backward",
            [GRADE_CFG],
            [],
            ["dw1", "db1", "dw2", "db2"],
            _grade_feedforward,
        ),
        assignment=("linear", "gelu"),
        explain="explain_feedforward",
    ),
    Component(
        "attention",
        MultiHeadAttention,
        "attention",
        check=(Check("MultiHeadAttention", (8, 6, 6, 0.1, 3), {"qkv_bias": True}, inputs=(X,)),),
        bench=Bench(
            lambda cfg, rng: MultiHeadAttention(
                cfg["emb_dim"],
                cfg["emb_dim"],
                cfg["context_length"],
                cfg["drop_rate"],
                cfg["n_heads"],
                cfg["qkv_bias"],
                rng=rng,
            )
        ),
        grade=Grade(
            "attention_forward",
            "attention_backward",
            [6, 8, 5, 0.0, 2],
            [2],
            ["dw_query", "dw_key", "dw_value", "dw_out", "db_out"],
            _grade_attention,
        ),
        assignment=("linear",),
        explain="explain_attention",
    ),
    Component(
        "block",
        TransformerBlock,
        "block",
        check=(Check("TransformerBlock", (CHECK_CFG,), inputs=(X,)),),
        bench=Bench(lambda cfg, rng: TransformerBlock(cfg, rng=rng)),
        grade=Grade(
            "transformer_block_forward",
            "transformer_block_backward",
            [GRADE_CFG],
            [GRADE_CFG["n_heads"]],
            [],
            _grade_block,
            dict_params=True,
        ),
        assignment=("layernorm", "gelu", "linear", "feedforward", "attention"),
        explain="explain_block",
    ),
    Component(
        "crossentropy",
        CrossEntropyLoss,
        "loss",
        aliases=("loss",),
        check=(
            Check("CrossEntropyLoss", inputs=(Normal((2, 4, 11), 3.0), Ids((2, 4), 11, ignored=((0, 1),)))),
        ),
        grade=Grade("cross_entropy_forward", "cross_entropy_backward", [], [-100], [], _grade_crossentropy),
        assignment=(),
        explain="explain_loss",
    ),
    Component(
        "model",
        GPTModel,
        "model",
        check=(Check("GPTModel", (CHECK_CFG,), inputs=(Ids((2, 5), 11),)),),
        bench=Bench(lambda cfg, rng: GPTModel(cfg, rng=rng), part="steps"),
        explain="explain_model",
    ),
)
BY_NAME = {c.name: c for c in COMPONENTS}
NAMES = tuple(BY_NAME)
_LOOKUP = {n: c for c in COMPONENTS for n in c.names}


def supported(command):
    """The components `command` supports, in registry order."""
    return [c for c in COMPONENTS if c.supports(command)]


def _listing(components):
    return ", ".join(c.name + (f" ({'/'.join(c.aliases)})" if c.aliases else "") for c in components)


def resolve(name, command=None):
    """The Component called `name` (its name, class name in any case, or alias).

    Raises UnknownComponent with a one-line message listing the valid names, or, for a valid
    name that `command` does not support, the names that command supports."""
    c = _LOOKUP.get(str(name).strip().lower())
    if c is None:
        raise UnknownComponent(
            f"unknown component {str(name).strip()!r}; valid names: {_listing(COMPONENTS)} "
            "(class names such as LayerNorm work too)"
        )
    if command is not None and not c.supports(command):
        raise UnknownComponent(
            f"{c.name!r} is a component, but {command} does not support it; "
            f"{command} supports: {_listing(supported(command))}"
        )
    return c


def resolve_list(names, command=None, allow_all=True):
    """Components for a comma-separated string or a list of names (each may hold commas), in
    registry order without repeats; "all" means every component `command` supports."""
    if isinstance(names, str):
        names = [names]
    parts = [p.strip() for n in names for p in str(n).split(",") if p.strip()]
    if not parts:
        raise UnknownComponent(f"no component named; valid names: {_listing(COMPONENTS)}")
    if allow_all and any(p.lower() == "all" for p in parts):
        return supported(command) if command else list(COMPONENTS)
    wanted = {resolve(p, command).name for p in parts}
    return [c for c in COMPONENTS if c.name in wanted]
