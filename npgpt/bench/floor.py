"""The GEMM floor: the training step's matrix products alone, with reused output buffers,
and their FLOP count. What npgpt's step is measured against (docs/bench.md, "The floor").
"""

import numpy as np


def gemm_shapes(cfg, B, T):
    """The step's matrix products as (batch, m, k, n): C[batch, m, n] = A[batch, m, k] @ B[batch, k, n]."""
    E, V, nh, L = cfg["emb_dim"], cfg["vocab_size"], cfg["n_heads"], cfg["n_layers"]
    N, hs = B * T, E // nh
    block = []
    for fan_in, fan_out, count in ((E, E, 4), (E, 4 * E, 1), (4 * E, E, 1)):  # q, k, v, out; ff1; ff2
        # forward x @ W^T; backward dW = dout^T @ x and dx = dout @ W
        block += [(1, N, fan_in, fan_out), (1, fan_out, N, fan_in), (1, N, fan_out, fan_in)] * count
    # scores q k^T, ctx att v; backward datt, dv, dq, dk
    block += [
        (B * nh, T, hs, T),
        (B * nh, T, T, hs),
        (B * nh, T, hs, T),
        (B * nh, T, T, hs),
        (B * nh, T, T, hs),
        (B * nh, T, T, hs),
    ]
    head = [(1, N, E, V), (1, V, N, E), (1, N, V, E)]
    return block * L + head


def gemm_floor_fn(cfg, B, T, seed=0):
    """A callable running the step's products (gemm_shapes, in that order) with np.matmul.

    As in the model: each layer's weight is its own (out, in) array, used as W^T in forward;
    activations of one shape are shared, and outputs go to buffers allocated once per shape.
    `fn.shapes` lists the (batch, m, k, n) of the products it runs.
    """
    rng = np.random.default_rng(seed)
    E, V, nh, L = cfg["emb_dim"], cfg["vocab_size"], cfg["n_heads"], cfg["n_layers"]
    N, hs, f32 = B * T, E // nh, np.float32
    arrays = {}

    def act(*shape, out=False):  # one shared input array, or one output buffer, per shape
        key = (out, *shape)
        if key not in arrays:
            arrays[key] = np.empty(shape, f32) if out else rng.standard_normal(shape, f32)
        return arrays[key]

    def linear(fan_in, fan_out):  # forward x @ W^T; backward dW = dout^T @ x and dx = dout @ W
        W = rng.standard_normal((fan_out, fan_in), f32)
        dout, x = act(N, fan_out), act(N, fan_in)
        return [
            (x, W.T, act(N, fan_out, out=True)),
            (dout.T, x, act(fan_out, fan_in, out=True)),
            (dout, W, act(N, fan_in, out=True)),
        ]

    ops = []
    for _ in range(L):
        for fan_in, fan_out in ((E, E),) * 4 + ((E, 4 * E), (4 * E, E)):  # q, k, v, out; ff1; ff2
            ops += linear(fan_in, fan_out)
        # scores q k^T, ctx att v; backward datt, dv, dq, dk
        q, kt, att = act(B * nh, T, hs), act(B * nh, hs, T), act(B * nh, T, T)
        scores, ctx = act(B * nh, T, T, out=True), act(B * nh, T, hs, out=True)
        ops += [(q, kt, scores), (att, q, ctx), (q, kt, scores), (att.swapaxes(1, 2), q, ctx)]
        ops += [(att, q, ctx), (att.swapaxes(1, 2), q, ctx)]
    ops += linear(E, V)

    def fn():
        for a, w, c in ops:
            np.matmul(a, w, out=c)

    fn.shapes = [((a.shape[0] if a.ndim == 3 else 1),) + a.shape[-2:] + w.shape[-1:] for a, w, _ in ops]
    return fn


def gemm_flops(cfg, B, T):
    return sum(2 * b * m * k * n for b, m, k, n in gemm_shapes(cfg, B, T))
