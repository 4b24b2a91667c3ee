"""`npgpt explain embedding`: docs/embedding.md, gate g1 per position and the scatter-add (eq. 1-2),
checked against the reference module's output and gradient."""

import numpy as np

from .steps import Explanation, Step, _diff, _dout, _round_params


def explain_embedding(x=None, seed=0, dout=None, num_embeddings=4, embedding_dim=3):
    from ..layers.embedding import Embedding

    rng = np.random.default_rng(seed)
    idx = np.asarray([[1, 3, 1, 0]] if x is None else x)
    if idx.dtype.kind not in "iu" or idx.size == 0 or idx.min() < 0:
        raise ValueError(f"explain embedding: the input must be non-negative integer ids, got {idx!r}")
    if idx.max() >= 1000:  # the whole table is printed: one row per id up to the largest
        raise ValueError(f"explain embedding: ids must be < 1000 (the table is printed), got {idx.max()}")
    num_embeddings = max(num_embeddings, int(idx.max()) + 1)
    emb = _round_params(Embedding(num_embeddings, embedding_dim, rng=rng))
    W = emb.weight.data
    onehot = (idx[..., None] == np.arange(num_embeddings)).astype(np.float64)  # (..., num)
    out = onehot @ W  # (..., dim): a row lookup written as a product
    e = Explanation("embedding", repr(emb), "docs/embedding.md")
    e.forward = [
        Step("idx", idx, "", "token ids"),
        Step("weight", W, "", "the table (num, dim)"),
        Step("out", out, "eq. 1", "weight[idx]: one row per id"),
    ]
    dout = _dout(rng, dout, out.shape, "embedding")
    dW = np.zeros_like(W)  # (num, dim)
    for p, v in enumerate(idx.reshape(-1)):  # g1, position by position: row v gets dout[p]
        dW[v] += dout.reshape(-1, embedding_dim)[p]
    e.backward = [
        Step("dout", dout, "", f"upstream gradient (seed {seed})"),
        Step("dweight", dW, "g1", "scatter-add: row v sums dout where idx == v (eq. 2)"),
    ]
    e.checks.append(
        (
            "eq. 2 = the scatter-add",
            _diff((onehot.reshape(-1, num_embeddings).T @ dout.reshape(-1, embedding_dim), dW)),
        )
    )
    e.checks.append(("npgpt.Embedding.forward", _diff((emb.forward(idx), out))))
    emb.backward(dout)
    e.checks.append(("npgpt.Embedding.backward", _diff((emb.weight.grad, dW))))
    return e
