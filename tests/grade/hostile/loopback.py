"""Connects over TCP and sends UDP datagrams to the test's listeners on 127.0.0.1 and to every
port listening there that /proc/net/tcp and /proc/net/udp list (loopback only). Contained: no network namespace access in
bwrap (its own empty one), no sockets at all in user mode (seccomp)."""

import socket

import numpy as np

from npgpt import Module, Parameter

GRADER_PORTS = {"tcp": [], "udp": []}  # the test writes its listeners' ports here


def ports(path, state):
    found = set()
    try:
        with open(path) as f:
            for line in list(f)[1:]:
                local, st = line.split()[1], line.split()[3]
                ip, port = local.split(":")
                if ip == "0100007F" and st == state:
                    found.add(int(port, 16))
    except OSError:
        pass
    return sorted(found)


def attack():
    tcp = sorted(set(ports("/proc/net/tcp", "0A") + GRADER_PORTS["tcp"]))
    udp = sorted(set(ports("/proc/net/udp", "07") + GRADER_PORTS["udp"]))
    print("ATTACK listening on loopback: tcp", tcp, "udp", udp)
    for p in tcp:
        try:
            with socket.create_connection(("127.0.0.1", p), timeout=0.5) as s:
                s.sendall(b"npgpt-hostile")
            print("ATTACK tcp connected to", p)
        except OSError as e:
            print("ATTACK tcp", p, type(e).__name__)
    for p in udp:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(b"npgpt-hostile", ("127.0.0.1", p))
            print("ATTACK udp sent to", p)
        except OSError as e:
            print("ATTACK udp", p, type(e).__name__)


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
