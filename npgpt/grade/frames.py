"""What the sandboxed child sends back, read as hostile bytes.

The worker (worker.py) writes frames on a private pipe: a 4-byte big-endian header length, a
JSON header (stage, case, error, array names and sizes), then each array as .npy bytes. Every
length, type and array header is checked here before anything is allocated; text the child
chose is cleaned of escape sequences and invisible Unicode before it reaches a report.
"""

import io
import json
import re
import struct
import unicodedata

import numpy as np

HEADER_LIMIT = 64 << 10  # bytes of one frame's JSON header
ARRAY_LIMIT = 8 << 20  # bytes of one array
MAX_ARRAYS = 64  # arrays in one frame
MAX_FRAMES = 512
STAGES = ("import", "forward", "backward", "again", "fd", "done")

_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


# Unicode categories that are invisible or move text around: format characters (bidirectional
# overrides and isolates, zero-width spaces and joiners, BOM), line and paragraph separators
# (U+2028/9, a line break to some readers and not to others), lone surrogates (which no report
# file can encode), private-use and unassigned code points.
_HIDDEN = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))


def clean(text):
    """`text` without escape sequences, control characters and invisible or bidirectional Unicode
    (tabs and newlines kept)."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n"))
    return "".join(c for c in text if c < "\x80" or unicodedata.category(c) not in _HIDDEN)


def one_line(text, limit=200):
    """`text` cleaned, on one line, at most `limit` characters: for names the child may choose."""
    return " ".join(clean(str(text)).split())[:limit]


def _npy(blob):
    """A float32/float64 array from .npy bytes, every header field checked before allocating."""
    f = io.BytesIO(blob)
    version = np.lib.format.read_magic(f)
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f"unsupported .npy version {version}")
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(f, max_header_size=1000)
    if (
        not isinstance(shape, tuple)
        or len(shape) > 8
        or not all(isinstance(n, int) and 0 <= n for n in shape)
    ):
        raise ValueError(f"bad shape {shape!r}")
    if dtype.hasobject or dtype.kind != "f" or dtype.itemsize not in (4, 8) or dtype.byteorder == ">":
        raise ValueError(f"dtype {dtype} (expected float32 or float64)")
    count = 1
    for n in shape:
        count *= n
        if count * dtype.itemsize > ARRAY_LIMIT:
            raise ValueError(f"shape {shape} is larger than the {ARRAY_LIMIT >> 20} MiB allowed")
    data = blob[f.tell() :]
    if len(data) != count * dtype.itemsize:
        raise ValueError(f"{len(data)} bytes of data for shape {shape} of {dtype}")
    arr = np.frombuffer(data, dtype=dtype, count=count).reshape(shape, order="F" if fortran else "C")
    return np.array(arr, copy=True)


def _header(raw):
    """The frame header as a dict of checked fields, or ValueError."""
    if raw.count(b"[") + raw.count(b"{") > 200:
        raise ValueError("header nested or listed too deeply")
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"header is not JSON ({type(e).__name__})") from None
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    stage, case = header.get("stage"), header.get("case")
    if stage not in STAGES:
        raise ValueError(f"unknown stage {str(stage)[:40]!r}")
    if case is not None and (not isinstance(case, str) or len(case) > 100):
        raise ValueError("case is not a short string")
    if "error" in header and not isinstance(header["error"], str):
        raise ValueError("error has the wrong type")
    names, sizes = header.get("arrays", []), header.get("sizes", [])
    if not (isinstance(names, list) and isinstance(sizes, list) and len(names) == len(sizes) <= MAX_ARRAYS):
        raise ValueError("arrays/sizes are not two lists of the same length")
    if not all(isinstance(n, str) and len(n) <= 100 for n in names) or len(set(names)) != len(names):
        raise ValueError("array names are not distinct short strings")
    if not all(type(s) is int and 0 <= s <= ARRAY_LIMIT + 1000 for s in sizes):
        raise ValueError("an array size is negative, not an integer, or too large")
    checked = {"stage": stage, "case": case, "arrays": names, "sizes": sizes}  # nothing else is kept
    if "error" in header:  # (a "bad" list of its own, say, would be read as the grader's)
        checked["error"] = clean(header["error"][:4000])
    return checked


def parse(buf):
    """(frames, problem): the frames read off the pipe; parsing stops at the first bad one."""
    frames, pos = [], 0
    while pos < len(buf):
        if len(frames) >= MAX_FRAMES:
            return frames, f"more than {MAX_FRAMES} frames"
        if pos + 4 > len(buf):
            return frames, "a frame was cut short"
        (n,) = struct.unpack(">i", buf[pos : pos + 4])
        if not 0 < n <= HEADER_LIMIT:
            return frames, f"a frame declares a header of {n} bytes (allowed 1..{HEADER_LIMIT})"
        if pos + 4 + n > len(buf):
            return frames, "a frame was cut short"
        try:
            header = _header(buf[pos + 4 : pos + 4 + n])
        except ValueError as e:
            return frames, f"bad frame header: {e}"
        pos += 4 + n
        if pos + sum(header.get("sizes", [])) > len(buf):
            return frames, "a frame was cut short"
        arrays = {}
        for name, size in zip(header.pop("arrays", []), header.pop("sizes", [])):
            try:
                arrays[name] = _npy(buf[pos : pos + size])
            except Exception as e:  # noqa: BLE001  (any malformed header is the child's problem)
                header.setdefault("bad", []).append(f"{name}: unreadable ({clean(str(e))[:200]})")
            pos += size
        frames.append((header, arrays))
    return frames, ""
