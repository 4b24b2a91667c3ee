"""Named-tensor files in plain NumPy: safetensors (read and written here, no package needed),
.npz, and a folder of .npy / raw .bin files with a JSON name map. Layouts: docs/reference.md.

Every file is hostile input: sizes, offsets, dtypes and shapes are checked against the file's
real size before anything is read, and a bad file is a `TensorFileError` whose message is one
line naming the file and what is wrong. Safetensors data is memory-mapped, so a 3 GB reference
costs no more memory than the tensors actually compared.
"""

import json
import math
import mmap
import os
import zipfile
from pathlib import Path

import numpy as np

from ..errors import InputError

# safetensors dtype codes <-> NumPy, little-endian
ST_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}
NP_TO_ST = {np.dtype(v).str.replace("|", ""): k for k, v in ST_DTYPES.items()}
BF16 = ("BF16", "bfloat16")  # read (as float32, exactly), never written: NumPy has no bfloat16


def _from_bf16(raw):
    """bfloat16 bit patterns (uint16) -> float32: they are float32's upper 16 bits."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


MAX_HEADER = 100 * 2**20  # the reference's own header is ~100 bytes per tensor
MAP_NAME = "tensors.json"  # the name map of a folder


class TensorFileError(InputError):
    """A file that is not what it claims to be: one line, naming the file and the problem."""


def st_code(dtype):
    dtype = np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).itemsize > 1 else np.dtype(dtype)
    code = NP_TO_ST.get(dtype.str.replace("|", ""))
    if code is None:
        raise TypeError(f"safetensors: no dtype code for {dtype}")
    return code


def write_safetensors(path, tensors, metadata=None):
    """Write {name: ndarray} in the given order: u64 LE header size, JSON header, raw bytes."""
    header, offset = {}, 0
    arrays = []
    for name, a in tensors.items():
        a = np.asarray(a)
        code = st_code(a.dtype)
        a = np.asarray(a, dtype=np.dtype(ST_DTYPES[code]), order="C")  # 0-d stays 0-d
        header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        arrays.append(a)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # pad so the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for a in arrays:
            f.write(memoryview(a.reshape(-1)).cast("B"))


def _fail(path, what):
    raise TensorFileError(f"{path}: {what}")


def _shape_ok(shape):
    return isinstance(shape, list) and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    )


def read_safetensors(path):
    """-> (dict name -> read-only ndarray view of the memory-mapped file, metadata dict)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        f = open(path, "rb")
    except OSError as e:
        _fail(path, f"cannot open: {e.strerror}")
    with f:
        if size < 8:
            _fail(path, f"not a safetensors file: {size} bytes, shorter than the 8-byte header size")
        n = int.from_bytes(f.read(8), "little")
        if n > min(size - 8, MAX_HEADER):
            _fail(
                path, f"not a safetensors file: header size {n} exceeds the file's {size - 8} remaining bytes"
            )
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            _fail(path, f"safetensors header is not valid JSON ({e.__class__.__name__}: {str(e)[:80]})")
        if not isinstance(header, dict):
            _fail(path, "safetensors header is not a JSON object")
        meta = header.pop("__metadata__", {}) or {}
        if not isinstance(meta, dict):
            _fail(path, "safetensors __metadata__ is not an object")
        data_size = size - 8 - n
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size > 0 else None
    out = {}
    for name, entry in header.items():
        if not isinstance(entry, dict):
            _fail(path, f"tensor {name!r}: header entry is not an object")
        code, shape, offs = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if code not in ST_DTYPES and code != "BF16":
            known = ", ".join([*ST_DTYPES, "BF16"])
            _fail(path, f"tensor {name!r}: unknown dtype {str(code)[:20]!r} (known: {known})")
        if not _shape_ok(shape):
            _fail(path, f"tensor {name!r}: shape {str(shape)[:60]} is not a list of non-negative ints")
        if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int for o in offs)):
            _fail(path, f"tensor {name!r}: data_offsets {str(offs)[:60]} is not [begin, end]")
        dt = np.dtype("<u2" if code == "BF16" else ST_DTYPES[code])
        nbytes = math.prod(shape) * dt.itemsize
        b, e = offs
        if not 0 <= b <= e <= data_size:
            _fail(
                path,
                f"tensor {name!r}: data_offsets [{b}, {e}] outside the {data_size} data bytes (truncated?)",
            )
        if e - b != nbytes:
            _fail(
                path,
                f"tensor {name!r}: shape {shape} of {code} needs {nbytes} bytes, data_offsets give {e - b}",
            )
        out[name] = (
            np.frombuffer(mm, dt, math.prod(shape), 8 + n + b).reshape(tuple(shape))
            if nbytes
            else np.zeros(tuple(shape), dt)
        )
        if code == "BF16":
            out[name] = _from_bf16(out[name])
    return out, meta


def read_npz(path):
    """-> dict name -> ndarray from a .npz (no pickle), checked like the other formats."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        _fail(path, f"not a readable .npz: {str(e).splitlines()[0][:100] if str(e) else type(e).__name__}")


def read_folder(path):
    """-> dict name -> ndarray from a folder holding tensors.json and .npy / raw .bin files.

    tensors.json: {"tensors": [{"name": N, "file": F, "dtype": D, "shape": S}, ...]}; dtype and
    shape are required for .bin (raw C-order little-endian bytes), optional checks for .npy."""
    path = Path(path)
    mp = path / MAP_NAME
    try:
        spec = json.loads(mp.read_text())
    except OSError as e:
        _fail(mp, f"cannot read the folder's name map: {e.strerror}")
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        _fail(mp, f"not valid JSON ({str(e)[:80]})")
    entries = spec.get("tensors") if isinstance(spec, dict) else None
    if not isinstance(entries, list):
        _fail(mp, 'expected {"tensors": [{"name": ..., "file": ...}, ...]}')
    root = path.resolve()
    out = {}
    for i, ent in enumerate(entries):
        if not (
            isinstance(ent, dict) and isinstance(ent.get("name"), str) and isinstance(ent.get("file"), str)
        ):
            _fail(mp, f"tensors[{i}] needs string fields name and file")
        name, fp = ent["name"], (path / ent["file"]).resolve()
        if root not in fp.parents:
            _fail(mp, f"tensor {name!r}: file {ent['file']!r} is outside the folder")
        dtype, shape = ent.get("dtype"), ent.get("shape")
        bf16 = dtype in BF16
        if bf16:
            dtype = "<u2"
        if dtype is not None:
            try:
                dtype = np.dtype(ST_DTYPES.get(dtype, dtype))
            except TypeError:
                _fail(mp, f"tensor {name!r}: unknown dtype {str(dtype)[:20]!r}")
            if dtype.kind not in "fiub":
                _fail(mp, f"tensor {name!r}: dtype {dtype} is not a number type")
        if shape is not None and not _shape_ok(shape):
            _fail(mp, f"tensor {name!r}: shape {str(shape)[:60]} is not a list of non-negative ints")
        if fp.suffix == ".npy" and bf16:
            _fail(mp, f"tensor {name!r}: bfloat16 is read from a raw .bin file, not a .npy")
        if fp.suffix == ".npy":
            try:
                a = np.load(fp, allow_pickle=False, mmap_mode="r")
            except (OSError, ValueError) as e:
                _fail(
                    fp, f"not a readable .npy: {str(e).splitlines()[0][:100] if str(e) else type(e).__name__}"
                )
            if shape is not None and list(a.shape) != shape:
                _fail(fp, f"tensor {name!r} has shape {list(a.shape)}, the name map says {shape}")
        elif fp.suffix == ".bin":
            if dtype is None or shape is None:
                _fail(mp, f"tensor {name!r}: a raw .bin file needs dtype and shape in the name map")
            dtype = dtype.newbyteorder("<") if dtype.itemsize > 1 else dtype
            try:
                size = os.path.getsize(fp)
            except OSError as e:
                _fail(fp, f"cannot open: {e.strerror}")
            need = math.prod(shape) * dtype.itemsize
            if size != need:
                _fail(fp, f"tensor {name!r}: {size} bytes, but shape {shape} of {dtype.name} needs {need}")
            a = np.fromfile(fp, dtype).reshape(shape) if need else np.zeros(shape, dtype)
            a = _from_bf16(a) if bf16 else a
        else:
            _fail(mp, f"tensor {name!r}: file {ent['file']!r} is neither .npy nor .bin")
        out[name] = a
    return out


def read_tensors(path):
    """Any supported format by its name: a folder, *.npz, else safetensors. -> dict name -> array."""
    path = Path(path)
    if path.is_dir():
        return read_folder(path)
    if not path.exists():
        _fail(path, "no such file or folder")
    if path.suffix == ".npz":
        return read_npz(path)
    return read_safetensors(path)[0]
