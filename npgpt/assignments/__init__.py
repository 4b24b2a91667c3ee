"""Starter files for students: the classes to implement, with constructors, declared parameters,
docstrings (shapes, what to cache) and forward/backward bodies that raise NotImplementedError.

`starter(names)` returns the file's text; the classes a component is built from come with it
(feedforward brings Linear and GELU), in dependency order. Which components have a starter file
and what each brings along are the registry's assignment settings (npgpt/registry.py).
Templates: templates/<name>.txt.
"""

from importlib import resources

from ..registry import resolve_list, supported

ORDER = tuple(c.name for c in supported("assignment"))  # registry order is dependency order
NEEDS = {c.name: c.assignment for c in supported("assignment") if c.assignment}

HEADER = '''"""{title}

Implement forward and backward of each class (the derivations: `npgpt docs NAME`, as named in
the docstrings). Keep the class names, constructor arguments and parameter names: the grader
builds the classes, loads its own parameter values into them and compares your outputs and
gradients with its own, in float64 and float32. Rules of the protocol:
  - forward caches what backward needs (for the last call only) and returns the output;
  - backward takes dout (the shape of the output), ADDS (+=) each parameter's gradient into its
    .grad, and returns the gradient with respect to the input (the input's shape and dtype);
  - compute in the input's dtype (use Python floats such as math.sqrt(2.0), not np.float64 scalars).
Only Module, Parameter, Sequential and Dropout may come from npgpt; write everything else here.

Grade it yourself:  npgpt grade {filename}
"""

import math  # noqa: F401

import numpy as np

from npgpt import Dropout, Module, Parameter, Sequential  # noqa: F401
'''


def resolve(names):
    """The components to write for `names` (with what they are built from), in ORDER.

    Names are the registry's (class names and aliases too, comma lists, or all); an unknown or
    unsupported one raises registry.UnknownComponent (a ValueError) listing the valid ones."""
    wanted = set()
    for comp in resolve_list(names, "assignment"):
        wanted.add(comp.name)
        wanted.update(comp.assignment)
    return [n for n in ORDER if n in wanted]


def starter(names, filename="submission.py"):
    keys = resolve(names)
    title = "npgpt assignment: " + ", ".join(keys)
    parts = [HEADER.format(title=title, filename=filename)]
    for key in keys:
        parts.append(resources.files("npgpt.assignments").joinpath("templates", f"{key}.txt").read_text())
    return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"
