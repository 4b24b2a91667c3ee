"""Sends an output array whose .npy header declares 4 EiB (shape (2**59,), float64) in a few bytes.
Contained: refused before anything is allocated; GELU fails with a message, LayerNorm unaffected."""

import json
import os
import struct
import sys

import numpy as np

from npgpt import Module, Parameter


def send(payload):
    fd = int(sys.argv[1])  # the worker's result pipe
    os.write(fd, payload)
    os._exit(0)


def attack():
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (576460752303423488,), }"
    header = header.ljust(118) + "\n"
    blob = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"\0" * 64
    head = json.dumps({"case": "main", "stage": "forward", "arrays": ["out"], "sizes": [len(blob)]}).encode()
    done = json.dumps({"stage": "done", "arrays": [], "sizes": []}).encode()
    send(struct.pack(">I", len(head)) + head + blob + struct.pack(">I", len(done)) + done)


_done = []


def attack_once():
    if not _done:
        _done.append(1)
        attack()


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
    """Wrong on purpose (all zeros): full marks would mean the attack worked."""

    def forward(self, x):
        attack_once()
        return np.zeros_like(x)

    def backward(self, dout):
        return np.zeros_like(dout)
