"""`npgpt compare`'s work: another implementation's tensors against a reference dump, in the
order the step computed them (forward, then backward, then the optimizer's update).

A float tensor matches when its norm-wise relative error ||theirs - ref|| / ||ref|| is within
    float32 (theirs or the reference):  8 * max(yardstick, 2^-24)
    float64 (both):                     max(1e-10, 8 * yardstick * 2^-29)
where the yardstick is npgpt's own float32-vs-float64 error for that tensor (the manifest's
f32_vs_f64); 2^-29 scales a float32 error to float64's. `rtol` replaces both. Integer tensors
(ids, targets, dropout masks) must be equal. The first tensor that does not match is the
divergence; every later one that does not match is downstream of it. docs/reference.md.
"""

import json
import math
from pathlib import Path

import numpy as np

from .dump import FORMAT, sha256
from .tensorfile import TensorFileError, read_tensors

PHASES = ("forward", "backward", "update")
U32 = 2.0**-24  # float32's unit roundoff
F64_PER_F32 = 2.0**-29  # float64's unit roundoff over float32's
F64_RTOL = 1e-10
FACTOR = 8.0


def load_reference(path, verify=True):
    """-> (tensors, manifest entries in step order, manifest) after checking REF.json and the
    checksums. Raises TensorFileError (one line) on anything wrong."""
    path = Path(path)
    mpath = path.with_suffix(".json")
    try:
        manifest = json.loads(mpath.read_text())
    except OSError as e:
        raise TensorFileError(f"{mpath}: cannot read the reference's manifest: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TensorFileError(f"{mpath}: manifest is not valid JSON ({str(e)[:80]})") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != FORMAT
        or not isinstance(manifest.get("tensors"), list)
    ):
        raise TensorFileError(f"{mpath}: not an npgpt reference manifest (expected format {FORMAT!r})")
    tensors = read_tensors(path)
    entries = []
    for i, ent in enumerate(manifest["tensors"]):
        if not (isinstance(ent, dict) and isinstance(ent.get("name"), str) and ent.get("phase") in PHASES):
            raise TensorFileError(f"{mpath}: tensors[{i}] lacks a name or a phase")
        name = ent["name"]
        if name not in tensors:
            raise TensorFileError(f"{path}: the manifest lists {name!r} but the file has no such tensor")
        a = tensors[name]
        if list(a.shape) != ent.get("shape") or a.dtype.name != ent.get("dtype"):
            raise TensorFileError(
                f"{path}: tensor {name!r} is {a.dtype.name} {list(a.shape)}, the manifest says "
                f"{ent.get('dtype')} {ent.get('shape')}"
            )
        if verify and sha256(a) != ent.get("sha256"):
            raise TensorFileError(
                f"{path}: tensor {name!r} does not match its manifest sha256 (file changed or corrupt)"
            )
        entries.append(ent)
    entries.sort(key=lambda e: (PHASES.index(e["phase"]), e.get("order", 0)))
    return tensors, entries, manifest


def allowed_error(ent, their_dtype, rtol=None):
    """The largest norm-wise relative error that still matches (module docstring)."""
    if rtol is not None:
        return rtol
    yard = ent.get("f32_vs_f64") or 0.0
    yard = yard if isinstance(yard, (int, float)) and math.isfinite(yard) else 0.0
    if np.dtype(their_dtype).itemsize <= 4 or ent["dtype"] in ("float32", "float16"):
        return FACTOR * max(yard, U32)
    return max(F64_RTOL, FACTOR * yard * F64_PER_F32)


def _num(x):
    return float(x) if math.isfinite(x) else None  # JSON has no inf or NaN


def compare_tensor(ent, theirs, ref, rtol=None):
    """One row of the report: status "match" or "mismatch" and the errors."""
    row = {"name": ent["name"], "phase": ent["phase"], "shape": ent["shape"]}
    if theirs.dtype.kind not in "fiub":
        raise TensorFileError(f"tensor {ent['name']!r} has dtype {theirs.dtype}, not a number type")
    if theirs.size == 1 == ref.size:  # a scalar written as [1] (or [1, 1]) is still the scalar
        theirs = np.reshape(theirs, ref.shape)
    if list(theirs.shape) != list(ref.shape):
        row.update(status="mismatch", why=f"shape {list(theirs.shape)}, expected {list(ref.shape)}")
        return row
    if ref.dtype.kind in "iub":  # ids, targets, masks: exact
        bad = np.asarray(theirs) != np.asarray(ref)
        n = int(bad.sum())
        row.update(status="mismatch" if n else "match", rel_err=float(n > 0), differing=n)
        if n:
            idx = np.unravel_index(int(np.argmax(bad)), bad.shape)
            row.update(
                worst_index=[int(i) for i in idx],
                theirs_at_worst=float(theirs[idx]),
                ref_at_worst=float(ref[idx]),
            )
            row["why"] = f"{n} of {bad.size} elements differ"
        return row
    t = np.asarray(theirs, np.float64)
    r = np.asarray(ref, np.float64)
    d = np.abs(t - r)
    fin = np.isfinite(t)
    nonfinite = int(t.size - fin.sum())
    dn = float(np.linalg.norm(np.where(fin, d, 0.0).ravel()))
    rn = float(np.linalg.norm(r.ravel()))
    rel = math.inf if nonfinite else (0.0 if dn == 0.0 else (dn / rn if rn > 0 else math.inf))
    allowed = allowed_error(ent, theirs.dtype, rtol)
    yard = ent.get("f32_vs_f64") or 0.0
    row.update(rel_err=_num(rel), allowed=allowed, f32_units=_num(rel / max(yard, U32)))
    if t.size:
        dd = np.where(np.isnan(d), np.inf, d)
        w = np.unravel_index(int(np.argmax(dd)), d.shape)
        nz = np.abs(r) > 0
        row.update(
            max_abs=_num(float(dd[w])),
            max_rel=_num(
                float(np.max(np.where(nz, dd / np.where(nz, np.abs(r), 1.0), np.where(dd > 0, np.inf, 0.0))))
            ),
            worst_index=[int(i) for i in w],
            theirs_at_worst=_num(float(t[w])),
            ref_at_worst=_num(float(r[w])),
        )
    if nonfinite:
        row["nonfinite"] = nonfinite
        row["why"] = f"{nonfinite} of {t.size} elements are inf or NaN"
    row["status"] = "match" if rel <= allowed else "mismatch"
    return row


def compare(theirs, ref_tensors, entries, rtol=None):
    """-> report dict: tensors (rows in step order), first_divergence, missing, extra."""
    rows, missing, first = [], [], None
    for ent in entries:
        name = ent["name"]
        if name not in theirs:
            missing.append(name)
            continue
        row = compare_tensor(ent, theirs[name], ref_tensors[name], rtol)
        if row["status"] == "mismatch":
            if first is None:
                first = name
                row["status"] = "diverges"
            else:
                row["status"] = "downstream"
        rows.append(row)
    known = {e["name"] for e in entries}
    extra = [n for n in theirs if n not in known]
    return {"first_divergence": first, "tensors": rows, "missing": missing, "extra": extra}
