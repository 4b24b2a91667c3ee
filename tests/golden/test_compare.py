"""`npgpt compare` (npgpt/golden/compare.py): exit codes, the first divergence and what is
downstream, the float32 rule, the formats THEIRS may come in, missing tensors, checksums."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npgpt.golden.compare import compare, load_reference
from npgpt.golden.tensorfile import read_safetensors, read_tensors, write_safetensors

from .conftest import make_reference, run


def _tensors(path):
    t, _ = read_safetensors(path)
    return {k: np.array(v) for k, v in t.items()}


def _manifest(path):
    return json.loads(path.with_suffix(".json").read_text())


def _compare(capsys, theirs, ref, *extra):
    status, out, err = run(capsys, "compare", theirs, "--reference", ref, "--format", "json", *extra)
    return status, (json.loads(out) if out.strip() else None), err


def _float_names(path):
    return [t["name"] for t in _manifest(path)["tensors"] if t["dtype"].startswith("float")]


def test_the_reference_matches_itself(capsys, ref64, ref32):
    for ref in (ref64, ref32):
        status, rep, err = _compare(capsys, ref, ref)
        assert status == 0 and rep["first_divergence"] is None, (
            f"{ref.name}: {err} {rep and rep['first_divergence']}"
        )
        assert all(r["status"] == "match" for r in rep["tensors"]) and len(rep["tensors"]) == len(
            _manifest(ref)["tensors"]
        )


@given(data=st.data())
def test_scaling_any_one_tensor_by_1_001_is_caught_and_named(tmp_path_factory, ref64, ref32, data):
    ref = data.draw(st.sampled_from([ref64, ref32]), label="reference")
    name = data.draw(st.sampled_from(_float_names(ref)), label="tensor")
    t = _tensors(ref)
    t[name] = t[name] * (1.001 if t[name].dtype == np.float64 else np.float32(1.001))
    path = tmp_path_factory.mktemp("scaled") / "theirs.safetensors"
    write_safetensors(path, t)
    ref_t, entries, _ = load_reference(ref)
    rep = compare(read_tensors(path), ref_t, entries)
    row = next(r for r in rep["tensors"] if r["name"] == name)
    assert rep["first_divergence"] == name, (
        f"{name} x 1.001 ({ref.name}) named as {rep['first_divergence']}: {row}"
    )


def test_first_divergence_is_the_earliest_and_the_later_ones_are_downstream(capsys, tmp_path, ref64):
    t = _tensors(ref64)
    t["act/trf_blocks.0.norm2"] *= 1.01
    t["grad/trf_blocks.0.norm1.scale"] *= 5.0  # much worse, but later in the step
    write_safetensors(tmp_path / "t.safetensors", t)
    status, rep, _ = _compare(capsys, tmp_path / "t.safetensors", ref64)
    assert status == 1 and rep["first_divergence"] == "act/trf_blocks.0.norm2", rep["first_divergence"]
    st_ = {r["name"]: r["status"] for r in rep["tensors"]}
    assert (
        st_["act/trf_blocks.0.norm2"] == "diverges" and st_["grad/trf_blocks.0.norm1.scale"] == "downstream"
    )
    assert sum(s == "diverges" for s in st_.values()) == 1, "more than one tensor called the divergence"
    row = next(r for r in rep["tensors"] if r["name"] == "act/trf_blocks.0.norm2")
    assert row["rel_err"] == pytest.approx(0.01, rel=1e-9), f"rel_err {row['rel_err']}"
    assert row["max_abs"] == pytest.approx(
        0.01 * np.abs(_tensors(ref64)["act/trf_blocks.0.norm2"]).max(), rel=1e-9
    )
    ref_t = _tensors(ref64)["act/trf_blocks.0.norm2"]
    assert tuple(row["worst_index"]) == np.unravel_index(np.argmax(np.abs(ref_t)), ref_t.shape)


def test_a_changed_token_id_is_caught(capsys, tmp_path, ref64):
    t = _tensors(ref64)
    t["input/ids"][1, 2] = (t["input/ids"][1, 2] + 1) % 13
    write_safetensors(tmp_path / "t.safetensors", t)
    status, rep, _ = _compare(capsys, tmp_path / "t.safetensors", ref64)
    assert status == 1 and rep["first_divergence"] == "input/ids"
    row = rep["tensors"][0]
    assert row["worst_index"] == [1, 2] and row["differing"] == 1, row


def test_float32_theirs_against_a_float64_reference_uses_the_yardstick(capsys, tmp_path, ref64):
    t = {k: (v.astype(np.float32) if v.dtype == np.float64 else v) for k, v in _tensors(ref64).items()}
    write_safetensors(tmp_path / "f32.safetensors", t)
    status, rep, _ = _compare(capsys, tmp_path / "f32.safetensors", ref64)
    assert status == 0, f"float32-rounded reference flagged at {rep['first_divergence']}"
    name = "act/trf_blocks.1.ff.layers.0"
    yard = next(e["f32_vs_f64"] for e in _manifest(ref64)["tensors"] if e["name"] == name)
    ref = _tensors(ref64)[name]
    noise = np.random.default_rng(0).standard_normal(ref.shape)
    for k, expect in ((4.0, 0), (20.0, 1)):  # norm-wise error k x the yardstick; the line is 8x
        t[name] = (ref + k * yard * np.linalg.norm(ref) * noise / np.linalg.norm(noise)).astype(np.float32)
        write_safetensors(tmp_path / "n.safetensors", t)
        status, rep, _ = _compare(capsys, tmp_path / "n.safetensors", ref64)
        assert status == expect, f"error {k} x yardstick: exit {status}, first {rep['first_divergence']}"
    status, rep, _ = _compare(capsys, tmp_path / "n.safetensors", ref64, "--rtol", "1e-3")
    assert status == 0, "--rtol 1e-3 should accept a 20 x yardstick error"


def test_missing_tensors_are_skipped_and_listed_and_extras_listed(capsys, tmp_path, ref64):
    t = _tensors(ref64)
    gone = [n for n in t if n.startswith("dact/")]
    for n in gone:
        del t[n]
    t["act/mine.only"] = np.zeros(3)
    np.savez(tmp_path / "t.npz", **t)
    status, rep, _ = _compare(capsys, tmp_path / "t.npz", ref64)
    assert status == 0 and rep["missing"] == gone and rep["extra"] == ["act/mine.only"], (
        rep["missing"],
        rep["extra"],
    )


def test_folder_of_bin_files_and_text_and_summary_formats(capsys, tmp_path, ref64):
    t = _tensors(ref64)
    t["act/trf_blocks.0.att"] = t["act/trf_blocks.0.att"] + 1e-3
    entries = []
    for i, (n, a) in enumerate(t.items()):
        a.astype(a.dtype.newbyteorder("<")).tofile(tmp_path / f"{i}.bin")
        entries.append({"name": n, "file": f"{i}.bin", "dtype": a.dtype.name, "shape": list(a.shape)})
    (tmp_path / "tensors.json").write_text(json.dumps({"tensors": entries}))
    status, out, _ = run(capsys, "compare", tmp_path, "--reference", ref64, "--format", "summary")
    assert status == 1 and len(out.strip().splitlines()) == 1 and "act/trf_blocks.0.att " in out, out
    status, out, _ = run(capsys, "compare", tmp_path, "--reference", ref64)
    assert status == 1 and "first divergence: act/trf_blocks.0.att (forward)" in out, out


def test_a_reference_whose_bytes_changed_fails_its_checksum(capsys, tmp_path, ref64):
    raw = bytearray(ref64.read_bytes())
    raw[-3] ^= 0x40
    bad = tmp_path / "ref.safetensors"
    bad.write_bytes(bytes(raw))
    bad.with_suffix(".json").write_text(ref64.with_suffix(".json").read_text())
    status, out, err = run(capsys, "compare", ref64, "--reference", bad)
    assert status == 2 and "sha256" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("content", [b"", b"\x08\0\0\0\0\0\0\0{garbage", b"\xff" * 64])
def test_bad_theirs_files_are_one_line_errors(capsys, tmp_path, ref64, content):
    bad = tmp_path / "theirs.safetensors"
    bad.write_bytes(content)
    status, out, err = run(capsys, "compare", bad, "--reference", ref64)
    assert status == 2 and len(err.strip().splitlines()) == 1 and str(bad) in err, (status, err)


def test_no_known_name_and_a_missing_manifest_are_errors(capsys, tmp_path, ref64):
    write_safetensors(tmp_path / "x.safetensors", {"foo": np.zeros(2)})
    status, _, err = run(capsys, "compare", tmp_path / "x.safetensors", "--reference", ref64)
    assert status == 2 and "none of its 1 tensors" in err, err
    status, _, err = run(capsys, "compare", ref64, "--reference", tmp_path / "x.safetensors")
    assert status == 2 and "manifest" in err, err


def test_a_wrong_shape_is_a_divergence(capsys, tmp_path, ref64):
    t = _tensors(ref64)
    t["grad/out_head.weight"] = t["grad/out_head.weight"].T.copy()
    write_safetensors(tmp_path / "t.safetensors", t)
    status, rep, _ = _compare(capsys, tmp_path / "t.safetensors", ref64)
    assert status == 1 and rep["first_divergence"] == "grad/out_head.weight"
    assert any("transpose" in d for d in rep["diagnosis"]), rep["diagnosis"]


def test_nonfinite_theirs_is_a_divergence(capsys, tmp_path, ref32):
    t = _tensors(ref32)
    t["dact/final_norm"][0, 0, 0] = np.nan
    write_safetensors(tmp_path / "t.safetensors", t)
    status, rep, _ = _compare(capsys, tmp_path / "t.safetensors", ref32)
    row = next(r for r in rep["tensors"] if r["name"] == "dact/final_norm")
    assert status == 1 and rep["first_divergence"] == "dact/final_norm" and row["nonfinite"] == 1, row
    assert row["worst_index"] == [0, 0, 0] and row["rel_err"] is None, row


def test_float32_dump_of_a_dropout_step_compares_with_float64_one(capsys, tmp_path):
    cfg = {"vocab_size": 11, "context_length": 6, "emb_dim": 4, "n_heads": 2, "n_layers": 1, "drop_rate": 0.3}
    r64 = make_reference(tmp_path / "a", "float64", ["--keep-dropout"], cfg)
    r32 = make_reference(tmp_path / "b", "float32", ["--keep-dropout"], cfg)
    status, rep, _ = _compare(capsys, r32, r64)
    assert status == 0, rep["first_divergence"]
