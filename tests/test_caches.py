"""What a cache holds (docs/index.md): arrays the module computed itself, so that

- a backward after the caller changed the forward's input in place still gives the gradient of
  the forward that ran (PyTorch raises here; npgpt keeps its own copy), on the reference and on
  the fast path;
- an array a learner kept from a reference module's cache does not change under them when the
  module runs its next forward.
"""

import numpy as np
import pytest

import npgpt
from npgpt.fast import accelerate
from tests.asserts import assert_close, assert_equal

PATHS = {"reference": lambda m: m, "fast": accelerate}
CFG = dict(vocab_size=11, context_length=6, emb_dim=6, n_heads=2, n_layers=1, drop_rate=0.2, qkv_bias=True)


def cases():
    """(name, build, input builder, dout builder): every component, its float input (B, T, C)."""
    E = CFG["emb_dim"]
    return {
        "Linear": (lambda: npgpt.Linear(E, 5, rng=0), (2, 4, E), (2, 4, 5)),
        "GELU": (npgpt.GELU, (2, 4, E), (2, 4, E)),
        "LayerNorm": (lambda: npgpt.LayerNorm(E), (2, 4, E), (2, 4, E)),
        "Dropout": (lambda: npgpt.Dropout(0.3, rng=0), (2, 4, E), (2, 4, E)),
        "FeedForward": (lambda: npgpt.FeedForward(CFG, rng=0), (2, 4, E), (2, 4, E)),
        "MultiHeadAttention": (
            lambda: npgpt.MultiHeadAttention(E, E, 6, 0.2, 2, True, rng=0),
            (2, 4, E),
            (2, 4, E),
        ),
        "TransformerBlock": (lambda: npgpt.TransformerBlock(CFG, rng=0), (2, 4, E), (2, 4, E)),
    }


def step(module, x, dout):
    module.forward(x)
    return module.backward(dout), {n: p.grad.copy() for n, p in module.named_parameters()}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("name", sorted(cases()))
def test_changing_the_input_after_forward_changes_no_gradient(name, path):
    build, xshape, dshape = cases()[name]
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xshape)
    dout = rng.standard_normal(dshape)
    expected_dx, expected = step(PATHS[path](build()), x.copy(), dout)  # nobody touches its input
    module = PATHS[path](build())
    module.forward(x)
    x *= 6.0  # the caller reuses its array
    dx = module.backward(dout)
    assert_close(f"{name} ({path}) dx after x *= 6", dx, expected_dx, rtol=0, atol=0)
    for n, p in module.named_parameters():
        assert_close(f"{name} ({path}) {n}.grad after x *= 6", p.grad, expected[n], rtol=0, atol=0)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_the_issues_linear_example(path):
    """out = lin.forward(x); x *= 6; lin.backward(ones): weight.grad is ones^T x of the x that
    ran (each entry the sum of a column of x), not 6 times it."""
    lin = PATHS[path](npgpt.Linear(3, 2, bias=False, rng=0))
    x = np.arange(12.0).reshape(4, 3)  # (N, in)
    lin.forward(x)
    x *= 6.0
    lin.backward(np.ones((4, 2)))
    column_sums = np.array([0 + 3 + 6 + 9, 1 + 4 + 7 + 10, 2 + 5 + 8 + 11], dtype=np.float64)
    assert_close(f"Linear ({path}) weight.grad", lin.weight.grad, np.stack([column_sums] * 2), rtol=0, atol=0)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_changing_token_ids_and_targets_after_forward_changes_no_gradient(path):
    ids = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    targets = np.array([[2, 3, 4, 5], [6, 7, 8, -100]])

    def run(touch):
        model, ce = PATHS[path](npgpt.GPTModel(CFG, rng=2)), PATHS[path](npgpt.CrossEntropyLoss())
        i, t = ids.copy(), targets.copy()
        ce.forward(model.forward(i), t)
        if touch:
            i[:] = 0
            t[:] = 1
        model.backward(ce.backward())
        return {n: p.grad.copy() for n, p in model.named_parameters()}

    expected, got = run(False), run(True)
    for n in expected:
        assert_close(
            f"GPTModel ({path}) {n}.grad after changing ids and targets", got[n], expected[n], rtol=0, atol=0
        )


def cache_arrays(module):
    """Every ndarray in the caches of `module` and its submodules: {(module path, field): array}."""
    found = {}
    for mname, m in module.named_modules():
        cache = m.__dict__.get("cache")
        if isinstance(cache, np.ndarray):
            found[(mname, "cache")] = cache
        elif isinstance(cache, tuple):
            for field, value in zip(getattr(cache, "_fields", range(len(cache))), cache):
                if isinstance(value, np.ndarray):
                    found[(mname, str(field))] = value
    return found


@pytest.mark.parametrize("name", sorted(cases()))
def test_a_kept_reference_cache_does_not_change_on_the_next_forward(name):
    build, xshape, _ = cases()[name]
    rng = np.random.default_rng(3)
    module = build()
    module.forward(rng.standard_normal(xshape))
    kept = cache_arrays(module)
    assert kept, f"{name}: no cached arrays found"
    values = {k: v.copy() for k, v in kept.items()}
    module.forward(rng.standard_normal(xshape))
    for key, arr in kept.items():
        assert_equal(f"{name} cache {key} after the next forward", arr, values[key])


def test_a_kept_reference_loss_cache_does_not_change_on_the_next_forward():
    ce = npgpt.CrossEntropyLoss()
    rng = np.random.default_rng(4)
    ce.forward(rng.standard_normal((3, 5)), np.array([0, 1, 2]))
    kept = cache_arrays(ce)
    values = {k: v.copy() for k, v in kept.items()}
    ce.forward(rng.standard_normal((3, 5)), np.array([4, 3, 2]))
    for key, arr in kept.items():
        assert_equal(f"CrossEntropyLoss cache {key} after the next forward", arr, values[key])
