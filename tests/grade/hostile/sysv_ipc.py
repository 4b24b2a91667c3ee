"""Pins memory that outlives every process: four SysV shared-memory segments of 64 MB each,
touched and detached (so no process maps them and RLIMIT_AS never sees them), and a SysV message
queue. Without an IPC namespace (user mode) they would stay in the kernel after the sandbox is
killed, for every later student, until the machine reboots. Contained: bwrap gives the sandbox
its own IPC namespace, which dies with it; in user mode the grader removes every IPC object of
the sandbox uid after each component."""

import ctypes

import numpy as np

from npgpt import Module, Parameter

SIZE = 64 << 20


def attack():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    made = []
    for _ in range(4):
        sid = libc.shmget(0, ctypes.c_size_t(SIZE), 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
        if sid < 0:
            print(f"ATTACK shmget refused: errno {ctypes.get_errno()}", flush=True)
            break
        addr = libc.shmat(sid, None, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            print(f"ATTACK shmat refused: errno {ctypes.get_errno()}", flush=True)
            break
        ctypes.memset(addr, 1, SIZE)
        libc.shmdt(ctypes.c_void_p(addr))
        made.append(sid)
    qid = libc.msgget(0, 0o1000 | 0o600)
    print(f"ATTACK shm segments {made}, message queue {qid}", flush=True)


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
