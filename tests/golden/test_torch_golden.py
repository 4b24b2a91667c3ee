"""The book's PyTorch GPTModel, float64, exported offline (tests/fixtures/export_golden_torch.py:
the weights, inputs and dropout masks of a reference dump, every activation and gradient, the
parameters after AdamW steps), against `npgpt reference` run now from the fixture's weights."""

import json
from pathlib import Path

import pytest

from .conftest import run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CASES = json.loads((FIXTURES / "golden_torch.json").read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_pytorch_dump_compares_clean_against_npgpt_reference(capsys, tmp_path, case):
    spec = CASES[case]
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(spec["cfg"]))
    fixture = FIXTURES / f"golden_torch_{case}.npz"
    args = [a for a in spec["args"] if a != "--perturb-norms" and a != "0.1"]  # the weights come --from
    status, out, err = run(
        capsys, "reference", "--config", cfg, *args, "--from", fixture, "-o", tmp_path / "ref.safetensors"
    )
    assert status == 0, err
    status, out, err = run(
        capsys, "compare", fixture, "--reference", tmp_path / "ref.safetensors", "--format", "json"
    )
    rep = json.loads(out)
    bad = [(r["name"], r.get("rel_err"), r.get("allowed")) for r in rep["tensors"] if r["status"] != "match"][
        :3
    ]
    assert status == 0 and rep["first_divergence"] is None, f"{case}: torch vs npgpt diverge at {bad}"
    compared = {r["name"] for r in rep["tensors"]}
    kinds = {n.split("/")[0] for n in compared}
    assert {"act", "dact", "grad", "param", "input", "loss"} <= kinds, f"{case}: only {kinds} compared"
    if "--keep-dropout" in spec["args"]:
        assert any(n.startswith("mask/") for n in compared), f"{case}: no mask compared"
    if "--adamw-steps" in spec["args"]:
        assert any(n.startswith("param_after/") for n in compared), f"{case}: no param_after compared"
    assert len(rep["missing"]) < len(compared) / 3, f"{case}: {len(rep['missing'])} missing"
