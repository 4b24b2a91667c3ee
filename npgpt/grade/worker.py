"""Runs inside the sandbox (`python -I -S -B worker.py FD SITE LIB SUBMISSION INPUTS`).

SITE holds numpy alone; LIB holds this file and a stub `npgpt` package (Module, Parameter,
Sequential, Dropout, numerical_gradient, gradcheck), copied there by the grader, so a submission
can subclass Module but cannot hand its work to npgpt's layers: they are not in the sandbox. The
request (INPUTS/request.json + request.npz) is read before the submission is imported. Results
go back as frames on the private pipe FD: a 4-byte length, a JSON header, then the .npy bytes of
the arrays it names (written with allow_pickle=False). Nothing here compares or scores: the
grader does that in its own process, and it checks every byte of every frame.
"""

import io
import json
import os
import struct
import sys
import traceback
import types

sys.path[:0] = sys.argv[2:4]  # numpy, then the stub npgpt and nothing else of site-packages
import numpy as np  # noqa: E402

FATAL = (MemoryError, SystemExit, KeyboardInterrupt)  # after these, the remaining cases are skipped


class Channel:
    def __init__(self, fd):
        self.fd, self.write = fd, os.write  # keep our own reference to os.write

    def send(self, header, arrays=None):
        blobs = []
        for name, arr in (arrays or {}).items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=False)
            blobs.append((name, buf.getvalue()))
        header = dict(header, arrays=[n for n, _ in blobs], sizes=[len(b) for _, b in blobs])
        data = json.dumps(header).encode()
        msg = struct.pack(">I", len(data)) + data + b"".join(b for _, b in blobs)
        while msg:
            msg = msg[self.write(self.fd, msg) :]


def describe(exc, filename, memory_mb):
    """A one-paragraph account of an exception: its type, message and the submission's lines."""
    if isinstance(exc, SystemExit):
        return f"the submission called sys.exit({exc.code!r})"
    if isinstance(exc, MemoryError):
        return f"MemoryError: ran out of memory (the limit is {memory_mb} MB)"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    where = "".join(f"\n  line {f.lineno}, in {f.name}: {(f.line or '').strip()}" for f in frames[-3:])
    return f"{type(exc).__name__}: {str(exc)[:500]}{where}"


def as_array(value, what, scalar=False):
    """The submission's value as a float ndarray, or a ValueError saying what is wrong with it."""
    if scalar and isinstance(value, (float, int, np.floating)) and not isinstance(value, bool):
        return np.asarray(float(value))
    if isinstance(value, np.ndarray) and type(value) is not np.ndarray:
        raise ValueError(
            f"{what} is a {type(value).__module__}.{type(value).__name__}, an ndarray "
            "subclass; return a plain np.ndarray"
        )
    if not isinstance(value, np.ndarray):
        raise ValueError(f"{what} is a {type(value).__name__}, expected a NumPy array")
    if value.dtype.kind != "f" or value.dtype.itemsize not in (4, 8):
        raise ValueError(f"{what} has dtype {value.dtype}, expected float32 or float64")
    if scalar and value.ndim != 0 and value.size != 1:
        raise ValueError(f"{what} has shape {value.shape}, expected a scalar")
    return np.array(value, copy=True)


def function_form(ns, req, module):
    """A Module-like adapter around forward/backward functions: (out, cache) = f(x, *params, *extra)."""
    fwd, bwd = ns[req["fwd"]], ns[req["bwd"]]
    names, dict_params, extra = req["param_names"], req["dict_params"], req["fn_extra"]

    class FunctionForm:
        def __init__(self):
            self.params = {n: module.Parameter(np.zeros(s)) for n, s in zip(names, req["param_shapes"])}
            self.cache = None

        def named_parameters(self):
            return list(self.params.items())

        def _arg(self, p):  # every 2-D weight is (in, out) in the function form: x @ w + b
            return p.data.T if p.data.ndim == 2 else p.data

        def forward(self, *inputs):
            args = list(inputs)
            if dict_params:
                args.append({n: self._arg(p) for n, p in self.params.items()})
            else:
                args += [self._arg(p) for p in self.params.values()]
            res = fwd(*args, *extra)
            if not (isinstance(res, tuple) and len(res) == 2):
                raise ValueError(f"{req['fwd']} must return (out, cache), got {type(res).__name__}")
            out, self.cache = res
            return out

        def backward(self, dout):
            res = bwd(dout, self.cache)
            if not names:
                return res[0] if isinstance(res, tuple) and len(res) == 1 else res
            if dict_params:
                if not (isinstance(res, tuple) and len(res) == 2 and isinstance(res[1], dict)):
                    raise ValueError(f"{req['bwd']} must return (dx, grads) with grads a dict")
                dx, grads = res[0], [res[1].get(n) for n in names]
            else:
                if not (isinstance(res, tuple) and len(res) == 1 + len(names)):
                    raise ValueError(
                        f"{req['bwd']} must return a tuple of {1 + len(names)} arrays "
                        f"(dx, {', '.join(req['fn_grads'])})"
                    )
                dx, grads = res[0], res[1:]
            for (n, p), g in zip(self.params.items(), grads):
                g = as_array(g, f"the gradient for {n}")
                p.grad = g.T if g.ndim == 2 else g  # back to the (out, in) layout
            return dx

    return FunctionForm


def set_params(m, values, dtype):
    own = dict(m.named_parameters())
    for name, arr in values.items():
        if name not in own:
            raise ValueError(
                f"no parameter named {name!r}; the module has: {', '.join(own) or 'none'} "
                "(assign npgpt.Parameter objects to attributes in __init__)"
            )
        p = own[name]
        if np.shape(p.data) != arr.shape:
            raise ValueError(f"parameter {name} has shape {np.shape(p.data)}, expected {arr.shape}")
        p.data = arr.astype(dtype)
        p.grad = np.zeros_like(p.data)
    return own


def run_case(ch, build, case, arrays, prefix, names, scalar_out, eps, fail):
    name = case["name"]
    dtype = np.dtype(case["dtype"])
    ins = [arrays[f"{prefix}in{j}"] for j in range(case["n_inputs"])]
    fresh = lambda: [a.copy() for a in ins]  # noqa: E731
    dout = arrays[f"{prefix}dout"]
    dout = float(dout) if dout.ndim == 0 else dout
    grads = lambda: {f"grad/{n}": as_array(own[n].grad, f"{n}.grad") for n in names}  # noqa: E731
    try:
        m = build()
        own = set_params(m, {n: arrays[f"{prefix}p/{n}"] for n in names}, dtype)
        out = as_array(m.forward(*fresh()), "forward's output", scalar=scalar_out)
    except BaseException as e:  # noqa: B036  (sys.exit and friends are the submission's too)
        ch.send({"case": name, "stage": "forward", "error": fail(e)})
        return isinstance(e, FATAL)
    ch.send({"case": name, "stage": "forward"}, {"out": out})
    for stage in ("backward", "again") if case["again"] else ("backward",):
        try:
            dx = as_array(m.backward(np.copy(dout) if np.ndim(dout) else dout), "backward's dx")
            ch.send({"case": name, "stage": stage}, {"dx": dx, **grads()})
        except BaseException as e:  # noqa: B036
            ch.send({"case": name, "stage": stage, "error": fail(e)})
            return isinstance(e, FATAL)
    if not case["fd"]:
        return False
    try:  # finite differences of the submission's own forward, along the grader's directions
        res = {}
        for t in ["dx"] + [f"grad/{n}" for n in names]:
            target = ins[0] if t == "dx" else own[t[5:]].data
            base = target.copy()
            vals = []
            for u in arrays[f"{prefix}dir/{t}"]:
                for sign in (1.0, -1.0):
                    target[...] = base + sign * eps * u
                    outp = as_array(m.forward(*fresh()), "forward's output", scalar=scalar_out)
                    vals.append(float(np.sum(outp.astype(np.float64) * dout)))
            target[...] = base
            res[t] = np.array(vals).reshape(-1, 2)
        ch.send({"case": name, "stage": "fd"}, res)
    except BaseException as e:  # noqa: B036
        ch.send({"case": name, "stage": "fd", "error": fail(e)})
        return isinstance(e, FATAL)
    return False


def leave():
    """Flush what the submission printed, then exit: no atexit handlers, no lingering threads."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:  # noqa: B036, S110  (a stream the submission broke)
            pass
    os._exit(0)


def main():
    ch = Channel(int(sys.argv[1]))
    submission, inputs = sys.argv[4], sys.argv[5]
    with open(os.path.join(inputs, "request.json")) as f:
        req = json.load(f)
    with np.load(os.path.join(inputs, "request.npz"), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    fail = lambda e: describe(e, submission, req["memory_mb"])  # noqa: E731
    try:
        import npgpt.module as module

        with open(submission, encoding="utf-8", errors="replace") as f:
            source = f.read()
        sub = types.ModuleType("submission")
        sub.__file__ = submission
        sys.modules["submission"] = sub
        exec(compile(source, submission, "exec"), sub.__dict__)
        ns = sub.__dict__
        if req["form"] == "class":
            if not isinstance(ns.get(req["cls"]), type):
                raise NameError(f"the submission defines no class {req['cls']}")
            cls = ns[req["cls"]]
            build = lambda: cls(*req["ctor"])  # noqa: E731
        else:
            build = function_form(ns, req, module)
    except BaseException as e:  # noqa: B036
        ch.send({"stage": "import", "error": "importing the submission failed: " + fail(e)})
        leave()
    stopped = None
    for i, case in enumerate(req["cases"]):
        if stopped:
            ch.send(
                {
                    "case": case["name"],
                    "stage": "forward",
                    "error": f"skipped after case {stopped!r} ran out of memory or called sys.exit",
                }
            )
        elif run_case(
            ch, build, case, arrays, f"c{i}/", req["param_names"], req["scalar_out"], req["eps"], fail
        ):
            stopped = case["name"]
    ch.send({"stage": "done"})
    leave()


if __name__ == "__main__":
    main()
