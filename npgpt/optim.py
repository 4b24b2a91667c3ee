"""Optimizers with PyTorch's update rules, gradient clipping by global norm, and nanoGPT's
learning-rate schedule (linear warm-up, cosine decay to a floor).

    SGD:   g = grad + wd * p;  buf = g (first step) or momentum * buf + (1 - dampening) * g
           p -= lr * (g + momentum * buf if nesterov else buf)
    AdamW: p *= 1 - lr * wd   (decoupled weight decay, before the Adam update)
           m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
           p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

A parameter that appears twice (a tied weight) is updated once: the optimizers and
`clip_grad_norm` keep each Parameter object once, by identity.
"""

import math

import numpy as np

from .layers.embedding import Embedding
from .layers.layernorm import LayerNorm
from .layers.linear import Linear


def _unique(params):
    seen, out = set(), []
    for p in params:
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return out


def decay_groups(model, weight_decay):
    """Two param groups: the Linear weight matrices (decayed) and everything else (biases,
    LayerNorm scale/shift, embeddings; no decay). A tied parameter joins the group of its
    first name. Pass the result to AdamW / SGD."""
    decay, no_decay, seen = [], [], set()
    for _, mod in model.named_modules():
        for name, p in mod._parameters.items():
            if p is None or id(p) in seen:
                continue
            seen.add(id(p))
            if isinstance(mod, Linear) and name == "weight":
                decay.append(p)
            elif isinstance(mod, (Linear, LayerNorm, Embedding)) or p.data.ndim < 2:
                no_decay.append(p)
            else:  # an unknown module's matrix: decay it, as nanoGPT does every 2-D tensor
                decay.append(p)
    return [{"params": decay, "weight_decay": float(weight_decay)}, {"params": no_decay, "weight_decay": 0.0}]


class Optimizer:
    """Param groups (dicts with "params" and hyperparameters), per-parameter state, and the
    `zero_grad` / `state_dict` / `load_state_dict` that every optimizer shares."""

    defaults = {}

    def __init__(self, params, **hyper):
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups, seen = [], set()
        for g in groups:
            g = {**self.defaults, **hyper, **g}
            g["params"] = [p for p in _unique(g["params"]) if id(p) not in seen]
            seen.update(id(p) for p in g["params"])
            self._check(g)
            self.param_groups.append(g)
        self.state = {}  # id(param) -> dict of its state

    def _check(self, g):
        if not g["lr"] >= 0.0:
            raise ValueError(f"{type(self).__name__}: lr must be >= 0, got {g['lr']}")

    def params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self):
        for p in self.params():
            p.grad[...] = 0

    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                self._update(p, g, self.state.setdefault(id(p), {}))

    def state_dict(self):
        """{"state": {index: {name: array or number}}, "param_groups": [hyperparameters + indices]}."""
        index = {id(p): i for i, p in enumerate(self.params())}
        groups = []
        for g in self.param_groups:
            h = {k: v for k, v in g.items() if k != "params"}
            groups.append({**h, "params": [index[id(p)] for p in g["params"]]})
        state = {
            index[pid]: {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()}
            for pid, s in self.state.items()
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, sd):
        params = self.params()
        sizes = [len(g["params"]) for g in sd["param_groups"]]
        if sizes != [len(g["params"]) for g in self.param_groups]:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the state has groups of sizes {sizes}, "
                f"this optimizer {[len(g['params']) for g in self.param_groups]}"
            )
        for g, saved in zip(self.param_groups, sd["param_groups"], strict=True):
            g.update({k: (tuple(v) if isinstance(v, list) else v) for k, v in saved.items() if k != "params"})
        self.state = {}
        for i, s in sd["state"].items():
            p = params[int(i)]
            for k, v in s.items():
                if isinstance(v, np.ndarray) and v.shape != p.data.shape:
                    raise ValueError(
                        f"{type(self).__name__}.load_state_dict: state {k} of parameter {i} has shape "
                        f"{v.shape}, the parameter {p.data.shape}"
                    )
            self.state[id(p)] = {
                k: (np.array(v, dtype=p.data.dtype) if isinstance(v, np.ndarray) else v) for k, v in s.items()
            }


class SGD(Optimizer):
    """SGD(params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False), torch.optim.SGD."""

    defaults = {"momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False}

    def __init__(self, params, lr, **hyper):
        super().__init__(params, lr=lr, **hyper)

    def _update(self, p, g, state):
        grad = p.grad
        if g["weight_decay"] != 0.0:
            grad = grad + g["weight_decay"] * p.data
        mu = g["momentum"]
        if mu != 0.0:
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = grad.copy()
            else:
                buf = state["momentum_buffer"]
                buf *= mu
                buf += (1.0 - g["dampening"]) * grad
            buf = state["momentum_buffer"]
            grad = grad + mu * buf if g["nesterov"] else buf
        p.data -= g["lr"] * grad


class AdamW(Optimizer):
    """AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01), torch.optim.AdamW."""

    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}

    def _check(self, g):
        super()._check(g)
        b1, b2 = g["betas"]
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ValueError(f"AdamW: betas must be in [0, 1), got {g['betas']}")

    def _update(self, p, g, state):
        if not state:
            state.update(step=0, exp_avg=np.zeros_like(p.data), exp_avg_sq=np.zeros_like(p.data))
        lr, (b1, b2), eps = float(g["lr"]), g["betas"], float(g["eps"])
        state["step"] += 1
        t = state["step"]
        p.data *= 1.0 - lr * float(g["weight_decay"])  # decoupled weight decay
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m *= b1
        m += (1.0 - b1) * p.grad  # first moment
        v *= b2
        v += (1.0 - b2) * (p.grad * p.grad)  # second moment
        step_size = lr / (1.0 - b1**t)
        denom = np.sqrt(v) / math.sqrt(1.0 - b2**t) + eps  # (p's shape)
        p.data -= step_size * (m / denom)


def clip_grad_norm(params, max_norm):
    """Scale all gradients so their global L2 norm is at most `max_norm` (torch's
    clip_grad_norm_: coefficient max_norm / (norm + 1e-6), capped at 1). Returns the norm before."""
    params = _unique(params)
    total = math.sqrt(sum(float(np.vdot(p.grad, p.grad)) for p in params))
    coef = float(max_norm) / (total + 1e-6)
    if coef < 1.0:
        for p in params:
            p.grad *= coef
    return total


def cosine_lr(it, learning_rate, min_lr, warmup_iters, lr_decay_iters):
    """nanoGPT's get_lr: linear warm-up over `warmup_iters`, cosine decay to `min_lr` at
    `lr_decay_iters`, then `min_lr`."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / max(lr_decay_iters - warmup_iters, 1)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))  # 1 -> 0
    return min_lr + coeff * (learning_rate - min_lr)
