"""npgpt/golden/tensorfile.py: safetensors written and read without the package, checked against
the `safetensors` package itself (an independent implementation); .npz and folder maps; every
bad file is a one-line TensorFileError naming the file."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npgpt.golden.tensorfile import (
    TensorFileError,
    read_folder,
    read_safetensors,
    read_tensors,
    write_safetensors,
)
from tests.strategies import arrays, shapes

DTYPES = (np.float64, np.float32, np.int64, np.uint8)


@st.composite
def tensor_dicts(draw):
    n = draw(st.integers(1, 4))
    out = {}
    for i in range(n):
        dtype = draw(st.sampled_from(DTYPES))
        shape = draw(st.one_of(st.just(()), shapes(min_dims=1, max_dims=3, min_side=0, max_side=4)))
        if np.dtype(dtype).kind == "f":
            a = draw(arrays(dtype, shape))
        else:
            a = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
        out[f"act/m{i}#{i % 2}"] = a
    return out


@given(tensor_dicts())
def test_safetensors_round_trip_keeps_names_order_dtypes_shapes_and_bytes(tensors):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.safetensors"
        write_safetensors(path, tensors, {"k": "v"})
        back, meta = read_safetensors(path)
        assert list(back) == list(tensors), f"names/order {list(back)} != {list(tensors)}"
        assert meta == {"k": "v"}, f"metadata {meta}"
        for name, a in tensors.items():
            b = back[name]
            assert b.dtype == a.dtype.newbyteorder("<") and b.shape == a.shape, f"{name}: {b.dtype} {b.shape}"
            assert b.tobytes() == a.tobytes(), f"{name}: bytes differ"


def test_the_safetensors_package_reads_ours_and_we_read_its(tmp_path):
    sn = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(0)
    tensors = {
        "param/a.weight": rng.normal(size=(3, 4)),
        "loss": np.array(2.5),
        "input/ids": np.arange(6).reshape(2, 3),
    }
    write_safetensors(tmp_path / "ours.safetensors", tensors)
    theirs = sn.load_file(str(tmp_path / "ours.safetensors"))
    for k, a in tensors.items():
        np.testing.assert_array_equal(theirs[k], a, err_msg=f"safetensors package reading our {k}")
    sn.save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(tmp_path / "pkg.safetensors"))
    back, _ = read_safetensors(tmp_path / "pkg.safetensors")
    for k, a in tensors.items():
        np.testing.assert_array_equal(back[k], a, err_msg=f"our reader on the package's {k}")


def _good(tmp_path):
    path = tmp_path / "g.safetensors"
    write_safetensors(path, {"x": np.arange(4.0)})
    return path, path.read_bytes()


def _header(raw):
    n = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def _with_header(h, data):
    hb = json.dumps(h).encode()
    return len(hb).to_bytes(8, "little") + hb + data


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda raw: raw[:5], "shorter than the 8-byte header"),
        (lambda raw: raw[:-8], "outside the"),
        (lambda raw: (10**15).to_bytes(8, "little") + raw[8:], "exceeds the file"),
        (lambda raw: raw[:8] + b"{not json" + raw[17:], "not valid JSON"),
        (lambda raw: _with_header([1, 2], b""), "not a JSON object"),
        (
            lambda raw: _with_header(
                {"x": {"dtype": "F32", "shape": [10**9, 10**9], "data_offsets": [0, 32]}}, _header(raw)[1]
            ),
            "needs",
        ),
        (
            lambda raw: _with_header(
                {"x": {"dtype": "Q9", "shape": [4], "data_offsets": [0, 32]}}, _header(raw)[1]
            ),
            "unknown dtype",
        ),
        (
            lambda raw: _with_header(
                {"x": {"dtype": "F64", "shape": [-4], "data_offsets": [0, 32]}}, _header(raw)[1]
            ),
            "non-negative",
        ),
        (
            lambda raw: _with_header(
                {"x": {"dtype": "F64", "shape": [4], "data_offsets": [0, 10**12]}}, _header(raw)[1]
            ),
            "outside",
        ),
        (
            lambda raw: _with_header(
                {"x": {"dtype": "F64", "shape": [4], "data_offsets": "0-32"}}, _header(raw)[1]
            ),
            "data_offsets",
        ),
    ],
)
def test_bad_safetensors_files_are_one_line_errors(tmp_path, mutate, words):
    path, raw = _good(tmp_path)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(mutate(raw))
    with pytest.raises(TensorFileError) as e:
        read_safetensors(bad)
    msg = str(e.value)
    assert "\n" not in msg and str(bad) in msg and words in msg, f"message {msg!r} lacks {words!r}"


def test_folder_of_npy_and_raw_bin_files_with_a_name_map(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "a.npy", a)
    b = np.linspace(0, 1, 4)
    (tmp_path / "b.bin").write_bytes(b.astype("<f8").tobytes())
    spec = {
        "tensors": [
            {"name": "act/x", "file": "a.npy"},
            {"name": "grad/y", "file": "b.bin", "dtype": "float64", "shape": [2, 2]},
        ]
    }
    (tmp_path / "tensors.json").write_text(json.dumps(spec))
    got = read_tensors(tmp_path)
    np.testing.assert_array_equal(got["act/x"], a, err_msg="act/x from a.npy")
    np.testing.assert_array_equal(got["grad/y"], b.reshape(2, 2), err_msg="grad/y from b.bin")


@pytest.mark.parametrize(
    "entry, words",
    [
        ({"name": "x", "file": "../outside.bin", "dtype": "float64", "shape": [1]}, "outside the folder"),
        ({"name": "x", "file": "b.bin"}, "needs dtype and shape"),
        ({"name": "x", "file": "b.bin", "dtype": "float64", "shape": [3]}, "needs 24"),
        ({"name": "x", "file": "b.txt"}, "neither .npy nor .bin"),
        ({"name": "x", "file": "b.bin", "dtype": "complex128", "shape": [1]}, "not a number type"),
        ({"file": "b.bin"}, "name and file"),
    ],
)
def test_bad_folder_maps_are_one_line_errors(tmp_path, entry, words):
    (tmp_path / "b.bin").write_bytes(b"\0" * 16)
    (tmp_path / "tensors.json").write_text(json.dumps({"tensors": [entry]}))
    with pytest.raises(TensorFileError) as e:
        read_folder(tmp_path)
    assert "\n" not in str(e.value) and words in str(e.value), f"{e.value!r} lacks {words!r}"


def test_garbage_npz_and_missing_paths_are_errors(tmp_path):
    (tmp_path / "g.npz").write_bytes(b"PK\x03\x04garbage")
    for path, words in (
        (tmp_path / "g.npz", "not a readable .npz"),
        (tmp_path / "none.safetensors", "no such file"),
    ):
        with pytest.raises(TensorFileError) as e:
            read_tensors(path)
        assert words in str(e.value) and "\n" not in str(e.value), f"{e.value!r}"


def test_bfloat16_is_read_as_float32_from_safetensors_and_bin(tmp_path):
    # bfloat16 is float32's upper half: 1.0 = 0x3F80, -2.5 = 0xC020, 0.15625 = 0x3E20
    bits = np.array([0x3F80, 0xC020, 0x3E20, 0x0000], "<u2")
    want = np.array([1.0, -2.5, 0.15625, 0.0], np.float32)
    raw = bits.tobytes()
    header = json.dumps({"x": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, len(raw)]}}).encode()
    (tmp_path / "b.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + raw)
    got, _ = read_safetensors(tmp_path / "b.safetensors")
    np.testing.assert_array_equal(got["x"], want.reshape(2, 2), err_msg="BF16 from safetensors")
    assert got["x"].dtype == np.float32
    (tmp_path / "x.bin").write_bytes(raw)
    spec = {"tensors": [{"name": "x", "file": "x.bin", "dtype": "bfloat16", "shape": [4]}]}
    (tmp_path / "tensors.json").write_text(json.dumps(spec))
    np.testing.assert_array_equal(read_folder(tmp_path)["x"], want, err_msg="bfloat16 from a .bin")
