"""Shared for tests/golden: `npgpt reference` dumps of small configurations, written once."""

import json

import pytest

from npgpt import cli

MICRO = {"vocab_size": 13, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 2, "drop_rate": 0.0}


def run(capsys, *argv):
    """`npgpt ARGV` in this process -> (exit status, stdout, stderr)."""
    capsys.readouterr()  # drop what came before
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def make_reference(folder, dtype="float64", extra=(), cfg=MICRO, name=None):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name or 'ref_' + dtype}.safetensors"
    cfg_path = folder / "cfg.json"
    cfg_path.write_text(json.dumps(cfg))
    argv = ["reference", "--config", cfg_path, "--seed", "7", "--batch", "2", "--seq-len", "5"]
    argv += ["--dtype", dtype, "--perturb-norms", "0.1", *extra, "-o", path]
    assert cli.main([str(a) for a in argv]) == 0, f"npgpt reference {argv} failed"
    return path


@pytest.fixture(scope="session")
def ref64(tmp_path_factory):
    return make_reference(tmp_path_factory.mktemp("ref64"), "float64")


@pytest.fixture(scope="session")
def ref32(tmp_path_factory):
    return make_reference(tmp_path_factory.mktemp("ref32"), "float32")
