"""Forges the worker's frames in GELU's child (it reads which class is asked for, and the inputs):
a zero forward, a random dx sent twice, finite differences made up to agree with that dx; frames
with a "bad" field of its own, without arrays, or with arrays under other names; then "done".
Contained: fields the grader did not ask for are dropped, a frame without the arrays a test
needs fails that test with a message, nothing raises in the grader, and the forger earns at most
the points that compare the submission with itself (docs/grading.md, "What is not defended")."""

import io
import json
import os
import struct
import sys

import numpy as np

from npgpt import Module, Parameter


def send(fd, header, arrays=None):
    blobs = []
    for name, a in (arrays or {}).items():
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.ascontiguousarray(a, np.float64))
        blobs.append((name, buf.getvalue()))
    header = dict(header, arrays=[n for n, _ in blobs], sizes=[len(b) for _, b in blobs])
    data = json.dumps(header).encode()
    msg = struct.pack(">I", len(data)) + data + b"".join(b for _, b in blobs)
    while msg:
        msg = msg[os.write(fd, msg) :]


def forge(fd, inputs, req):
    z = np.load(os.path.join(inputs, "request.npz"))
    rng = np.random.default_rng(0)
    for i, case in enumerate(req["cases"]):
        name, x = case["name"], z[f"c{i}/in0"]
        if i == 0:
            g = rng.standard_normal(x.shape)
            send(fd, {"case": name, "stage": "forward"}, {"out": np.zeros_like(x)})
            send(fd, {"case": name, "stage": "backward"}, {"dx": g})
            send(fd, {"case": name, "stage": "again"}, {"dx": g})
            u = z[f"c{i}/dir/dx"]
            d = np.tensordot(u, g, axes=g.ndim) * req["eps"]
            send(fd, {"case": name, "stage": "fd"}, {"dx": np.stack([d, -d], 1)})
        else:
            send(fd, {"case": name, "stage": "forward", "bad": [1, {"a": 2}]})
            send(fd, {"case": name, "stage": "backward", "bad": 7}, {"x": np.zeros_like(x)})
    send(fd, {"stage": "done"})
    print("ATTACK forged every frame", flush=True)
    os._exit(0)


with open(os.path.join(sys.argv[-1], "request.json")) as f:
    _req = json.load(f)
if _req.get("cls") == "GELU":
    forge(int(sys.argv[1]), sys.argv[-1], _req)


class LayerNorm(Module):
    """Correct, and graded in a child of its own: it must keep its 10 points."""

    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.scale = Parameter(np.ones(emb_dim))
        self.shift = Parameter(np.zeros(emb_dim))

    def forward(self, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        self.rstd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (x - mean) * self.rstd
        return self.xhat * self.scale.data + self.shift.data

    def backward(self, dout):
        C = dout.shape[-1]
        self.scale.grad += (dout * self.xhat).reshape(-1, C).sum(0)
        self.shift.grad += dout.reshape(-1, C).sum(0)
        g = dout * self.scale.data
        return self.rstd * (
            g - g.mean(-1, keepdims=True) - self.xhat * (g * self.xhat).mean(-1, keepdims=True)
        )


class GELU(Module):
    """Never run: the forger exits first."""

    def forward(self, x):
        return np.zeros_like(x)

    def backward(self, dout):
        return np.zeros_like(dout)
