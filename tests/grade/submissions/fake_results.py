"""Tries to fool the grader: prints a perfect Gradescope result, writes results.json files,
and returns zeros. It must score 0 for LayerNorm, and none of its files may appear."""

import json
import os

import numpy as np

from npgpt import Module, Parameter

FAKE = {
    "score": 1000.0,
    "tests": [{"name": "LayerNorm.forward: out", "score": 1000, "max_score": 2, "status": "passed"}],
}
print(json.dumps(FAKE))
print("PASS LayerNorm.forward: out  total: 70/70")
for path in ("results.json", "../results.json", os.environ.get("NPGPT_FAKE_TARGET", "/nonexistent/x")):
    try:
        with open(path, "w") as f:
            f.write(json.dumps(FAKE))
    except OSError as e:
        print(f"could not write {path}: {type(e).__name__}")


class LayerNorm(Module):
    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.scale = Parameter(np.ones(emb_dim))
        self.shift = Parameter(np.zeros(emb_dim))

    def forward(self, x):
        return np.zeros_like(x)

    def backward(self, dout):
        return np.zeros_like(dout)
