"""examples/buggy_gpt2.py, a GPT-2 step written as a port would be (plain NumPy, llm.c's names):
without its bug it matches `npgpt reference` (an independent implementation agreeing), and with
each bug `npgpt compare` names the tensor the bug first touches and the mistake."""

import importlib.util
import json
from pathlib import Path

import pytest

from .conftest import make_reference, run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "buggy_gpt2.py"
CFG = {"vocab_size": 29, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 2, "drop_rate": 0.0}


def _example():
    spec = importlib.util.spec_from_file_location("buggy_gpt2", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# bug -> (first divergence, words of the diagnosis, extra `npgpt reference` arguments)
BUGS = {
    "gelu-no-3": ("dact/trf_blocks.1.ff.layers.0", "factor 3 is missing", []),
    "ln-no-mean": ("dact/trf_blocks", "mean term is missing", []),
    "eps-outside": ("act/trf_blocks.0.norm1", "eps added outside the square root", []),
    "transposed": ("act/trf_blocks.0.att.out_proj", "weight used transposed", []),
    "no-mask": ("act/trf_blocks.0.att.out_proj", "causal mask not applied", []),
    "scale-hs": ("act/trf_blocks.0.att.out_proj", "scaled by 1/head_dim", []),
    "no-max-shift": (
        "act/trf_blocks.0.att.out_proj",
        "does not subtract the row max",
        ["--scale-weights", "6"],
    ),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("bug", [*BUGS, "none"])
def test_compare_names_the_example_bug(capsys, tmp_path, bug, dtype):
    first, words, extra = BUGS.get(bug, (None, None, []))
    ref = make_reference(tmp_path, "float64", extra, CFG)
    _example().main([str(ref), str(tmp_path / "mine"), "--bug", bug, "--dtype", dtype])
    status, out, err = run(capsys, "compare", tmp_path / "mine", "--reference", ref, "--format", "json")
    rep = json.loads(out)
    assert rep["first_divergence"] == first, (
        f"bug {bug} ({dtype}): first divergence {rep['first_divergence']}"
    )
    assert status == (0 if first is None else 1), f"bug {bug}: exit {status}"
    if first is not None:
        assert any(words in d for d in rep["diagnosis"]), f"bug {bug} ({dtype}): diagnosis {rep['diagnosis']}"
        assert len(rep["diagnosis"]) == 1, f"bug {bug} ({dtype}): more than one diagnosis {rep['diagnosis']}"
