"""npgpt against PyTorch autograd, recorded offline by tests/fixtures/export_torch.py.

Each fixture holds a component's config, input, state dict, output, upstream gradient and
every gradient torch computed. Here npgpt builds the same component, loads the state dict
through `load_state_dict`, casts to the fixture's dtype and must reproduce every tensor within
the tolerances in tests/fixtures/MANIFEST.json (justified in tests/fixtures/README.md).
Each fixture runs on the reference and again on the fast path (`npgpt.fast.accelerate`).
No torch is imported here. The optimizer and gpt2-tiny fixtures are read by their own tests.
"""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import npgpt
from npgpt.fast import accelerate
from tests.asserts import assert_close

PATHS = {"reference": lambda m: m, "fast": accelerate}

FIXTURES = Path(__file__).parent / "fixtures"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text())
TOLERANCES = MANIFEST["tolerances"]
OWN_TESTS = ("optim_", "gpt2-tiny", "block124m", "golden_torch")  # fixtures checked elsewhere or below
MODULE_FIXTURES = sorted(n for n in MANIFEST["files"] if n.endswith(".npz") and not n.startswith(OWN_TESTS))
BUILDERS = {
    "LayerNorm": lambda c: npgpt.LayerNorm(**c),
    "GELU": lambda c: npgpt.GELU(),
    "Linear": lambda c: npgpt.Linear(**c),
    "FeedForward": lambda c: npgpt.FeedForward(c),
    "Dropout": lambda c: npgpt.Dropout(**c),
    "MultiHeadAttention": lambda c: npgpt.MultiHeadAttention(**c),
    "TransformerBlock": lambda c: npgpt.TransformerBlock(c),
    "GPTModel": lambda c: npgpt.GPTModel(c),
    "CrossEntropyLoss": lambda c: npgpt.CrossEntropyLoss(**c),
}


def load(name):
    """The fixture's arrays (a dict) and its config (component, dtype, ctor, mode)."""
    with np.load(FIXTURES / name, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return arrays, json.loads(str(arrays.pop("config")))


def check(fixture, pairs, dtype):
    """Compare every (tensor, npgpt, torch, scale); one failure lists every tensor that is off.

    Element rule: |npgpt - torch| <= rtol * |torch| + atol_scale * scale (MANIFEST.json).
    """
    tol = TOLERANCES[dtype]
    problems = []
    for tensor, got, ref, scale in pairs:
        try:
            assert_close(
                f"{fixture}: {tensor} vs torch", got, ref, rtol=tol["rtol"], atol=tol["atol_scale"] * scale
            )
        except AssertionError as e:
            problems.append(str(e))
    assert not problems, "\n".join(problems)


def grad_scale(arrays, prefixes=("grad.",)):
    """max |torch gradient| over the file: the absolute floor's scale for every gradient."""
    return max(float(np.abs(v).max()) for k, v in arrays.items() if k.startswith(prefixes))


def run_fixture(name, path="reference"):
    """Run npgpt (`path`: "reference" or "fast") on fixture `name`; return
    [(tensor, npgpt value, torch value, scale)], dtype."""
    arrays, cfg = load(name)
    dtype = cfg["dtype"]
    module = PATHS[path](BUILDERS[cfg["component"]](cfg["ctor"]))
    state = {k[len("state.") :]: v for k, v in arrays.items() if k.startswith("state.")}
    if state:
        module.load_state_dict(state)
    module.astype(np.dtype(dtype))
    if cfg["mode"] == "train":
        module.train()
    else:
        module.eval()
    x, dout = arrays["x"], arrays["dout"]
    if cfg["component"] == "CrossEntropyLoss":
        out = module.forward(x, arrays["targets"])
        dx = module.backward(float(dout))
    elif cfg["component"] == "Dropout":
        out = module.forward(x, mask=arrays["mask"])
        dx = module.backward(dout)
    else:
        out = module.forward(x)
        dx = module.backward(dout)
    gscale = grad_scale(arrays)
    pairs = [("out", out, arrays["out"], float(np.abs(arrays["out"]).max()))]
    if "grad.x" in arrays:
        pairs.append(("grad.x", dx, arrays["grad.x"], gscale))
    else:
        assert dx is None, f"{name}: backward of an index-input module must return None"
    params = dict(module.named_parameters())
    recorded = {k[len("grad.") :] for k in arrays if k.startswith("grad.") and k != "grad.x"}
    assert set(params) == recorded, (
        f"{name}: npgpt parameters {sorted(set(params) - recorded)} have no torch gradient, "
        f"torch gradients {sorted(recorded - set(params))} have no npgpt parameter"
    )
    pairs += [(f"grad.{n}", p.grad, arrays[f"grad.{n}"], gscale) for n, p in params.items()]
    return pairs, dtype


@pytest.mark.parametrize("name", sorted(MANIFEST["files"]))
def test_checksum(name):
    digest = hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest()
    assert digest == MANIFEST["files"][name]["sha256"], (
        f"{name}: sha256 {digest} differs from MANIFEST.json; re-run export_torch.py"
    )


def test_every_fixture_is_listed_and_small():
    on_disk = {
        p.relative_to(FIXTURES).as_posix()
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.suffix in (".npz", ".json", ".safetensors", ".txt")
    }
    unlisted = on_disk - set(MANIFEST["files"]) - {"MANIFEST.json"}
    assert not unlisted, f"fixture files without a MANIFEST.json checksum: {sorted(unlisted)}"
    total = sum(f["bytes"] for f in MANIFEST["files"].values())
    assert total < 5_000_000, f"fixtures total {total} bytes, over the 5 MB budget"


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("name", MODULE_FIXTURES)
def test_matches_torch(name, path):
    pairs, dtype = run_fixture(name, path)
    for tensor, got, ref, _ in pairs:
        if tensor != "out" or np.ndim(ref):
            assert np.asarray(got).dtype == np.dtype(dtype), (
                f"{name}: {tensor} has dtype {np.asarray(got).dtype}, the fixture's is {dtype}"
            )
    check(f"{name} ({path})", pairs, dtype)


def block124_weights(cfg):
    """The exporter's recipe: one NumPy Generator, weights = mean + std * N(0, 1) as float32."""
    rng = np.random.default_rng(cfg["recipe_seed"])
    return {
        name: (mean + std * rng.standard_normal(shape)).astype(np.float32)
        for name, shape, mean, std in cfg["recipe"]
    }


@pytest.mark.parametrize("path", sorted(PATHS))
def test_block_at_124m_shapes(path):
    name = "block124m_float32.npz"
    arrays, cfg = load(name)
    weights = block124_weights(cfg)
    digest = hashlib.sha256(b"".join(w.tobytes() for w in weights.values())).hexdigest()
    assert digest == str(arrays["weights_sha256"]), (
        f"{name}: regenerated weights differ from the exporter's (sha256 {digest}); "
        "NumPy's Generator stream changed, re-run export_torch.py"
    )
    block = PATHS[path](npgpt.TransformerBlock(cfg["ctor"]).astype(np.float32))
    ctx = cfg["ctor"]["context_length"]
    weights["att.mask"] = np.triu(np.ones((ctx, ctx)), k=1)  # the book's buffer
    block.load_state_dict(weights)
    block.eval()
    out = block.forward(arrays["x"])
    dx = block.backward(arrays["dout"])
    gscale = grad_scale(arrays, ("grad.", "gradslice."))
    pairs = [
        ("out", out, arrays["out"], float(np.abs(arrays["out"]).max())),
        ("grad.x", dx, arrays["grad.x"], gscale),
    ]
    s = cfg["gradslice_stride"]
    for pname, p in block.named_parameters():
        if p.grad.ndim == 1:
            pairs.append((f"grad.{pname}", p.grad, arrays[f"grad.{pname}"], gscale))
            continue
        # a strided slice of torch's own gradient, then every element through torch's
        # recorded Linear input and output gradient: dW = sum over (b, t) of gradout^T input
        pairs.append((f"gradslice.{pname}", p.grad[::s, ::s], arrays[f"gradslice.{pname}"], gscale))
        lin = pname.rsplit(".", 1)[0]
        dw = np.einsum(
            "bto,bti->oi",
            arrays[f"act.{lin}.gradout"].astype(np.float64),
            arrays[f"act.{lin}.input"].astype(np.float64),
        )
        pairs.append((f"grad.{pname} (from act.{lin})", p.grad, dw, gscale))
        norm = np.linalg.norm(p.grad.astype(np.float64))
        pairs.append((f"gradnorm.{pname}", norm, arrays[f"gradnorm.{pname}"], 0.0))
    check(f"{name} ({path})", pairs, "float32")
