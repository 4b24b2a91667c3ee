"""Leaves a note in the kernel's keyrings, and looks for one left by an earlier submission: the
user keyring belongs to the uid (the sandbox uid is reused by the next submission graded in that
slot), the session keyring is the grader's, and neither is in any namespace, so both outlive
the sandbox. Contained: add_key, request_key and keyctl fail (seccomp, in every isolated mode)."""

import ctypes
import os

import numpy as np

from npgpt import Module, Parameter

# add_key, keyctl; KEYCTL_SEARCH, KEYCTL_READ; KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING
CALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}
SEARCH, READ, USER, SESSION = 10, 11, -4, -3


def attack():
    libc = ctypes.CDLL(None, use_errno=True)
    add_key, keyctl = CALLS.get(os.uname().machine, (248, 250))
    for ring, where in ((USER, "user"), (SESSION, "session")):
        kid = libc.syscall(keyctl, SEARCH, ring, b"user", b"npgpt-hostile-note", 0)
        if kid > 0:
            buf = ctypes.create_string_buffer(100)
            n = libc.syscall(keyctl, READ, kid, buf, 100)
            print(f"ATTACK found a note in the {where} keyring: {buf.raw[: max(n, 0)]!r}", flush=True)
        r = libc.syscall(add_key, b"user", b"npgpt-hostile-note", b"from an earlier child", 21, ring)
        if r > 0:
            print(f"ATTACK stored a note in the {where} keyring", flush=True)
        else:
            print(f"ATTACK the {where} keyring refused: errno {ctypes.get_errno()}", flush=True)


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
