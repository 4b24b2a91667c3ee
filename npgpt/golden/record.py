"""Record one training step of the reference GPTModel through Module hooks: no second copy of
the math, only copies of what the reference modules return and receive.

    forward hook        act/<module path>   the module's output (a copy, taken when it returns)
                        mask/<module path>  a Dropout's keep-mask (uint8, 1 = kept), when it drew one
    backward pre-hook   dact/<module path>  the dout its backward receives
    after the backward  grad/<state_dict key>, placed where its module's backward finished

A module called more than once in a step (the block's drop_shortcut) gets `#0`, `#1`, ... in
forward call order; a backward call is matched to its forward call by the module's cache
object (the block hands each Dropout call's cache back before its backward), else last-in
first-out. `keep_calls=True` also keeps each call's inputs and dx, for compare's diagnoses.
"""

from collections import OrderedDict

import numpy as np

from ..layers.dropout import Dropout
from ..loss import CrossEntropyLoss


class Call:
    """One call of one module: its forward inputs and output, its backward dout and dx."""

    __slots__ = ("path", "k", "module", "inputs", "out", "dout", "dx", "cache")

    def __init__(self, path, k, module, inputs, out, cache):
        self.path, self.k, self.module, self.inputs, self.out = path, k, module, inputs, out
        self.cache, self.dout, self.dx = cache, None, None


class Recording:
    """The tensors of one step: `tensors` (name -> array, in forward-then-backward order),
    `phase` (name -> "forward" | "backward"), and with keep_calls, `calls` (tag -> Call) and
    `timeline` (("pre" | "post", tag) as each backward begins and ends)."""

    def __init__(self):
        self.tensors, self.phase, self.calls, self.timeline = OrderedDict(), {}, {}, []


def _copy(a):
    return np.array(a, copy=True)


def record_step(model, ids, targets, keep_calls=False):
    """Run forward, loss, backward on `model` (gradients zeroed first) -> Recording.

    Parameter and gradient entries are the model's own arrays (not copies): copy them before
    changing the model (copy_params_and_grads)."""
    for path, mod in model.named_modules():  # the golden numbers are the reference's, never the fast path's
        if type(mod).__module__.startswith("npgpt.fast"):
            raise ValueError(
                f"record_step: {path or 'the model'} is {type(mod).__name__} from {type(mod).__module__}; "
                "golden dumps run on the reference modules (npgpt.fast.reference(model) switches back)"
            )
    model.zero_grad()
    events = []  # (phase, kind, path, k, array) in the order they happen
    counts, back_counts, calls, timeline = {}, {}, {}, []
    handles = []
    owners = {}  # id(Parameter) -> (state_dict keys)
    for mod_path, mod in model.named_modules():
        for pname, p in mod._parameters.items():
            if p is not None:
                owners.setdefault(id(p), []).append(f"{mod_path}.{pname}" if mod_path else pname)

    def fwd_hook(path):
        def hook(mod, inputs, out):
            k = counts.get(path, 0)
            counts[path] = k + 1
            cache = getattr(mod, "cache", None)
            if isinstance(mod, Dropout) and cache is not None and cache.mask is not None:
                events.append(("forward", "mask", path, k, cache.mask.astype(np.uint8)))
            events.append(("forward", "act", path, k, _copy(out)))
            kept = tuple(_copy(a) if isinstance(a, np.ndarray) else a for a in inputs) if keep_calls else None
            calls[(path, k)] = Call(path, k, mod, kept, None, cache)

        return hook

    def pre_hook(path):
        def hook(mod, grad_output):
            n = counts.get(path, 0)
            cache = getattr(mod, "cache", None)
            k = next(
                (c.k for (p, _), c in calls.items() if p == path and c.cache is cache and cache is not None),
                None,
            )
            if k is None:  # no cache to match: the last forward call is the first backward
                k = n - 1 - back_counts.get(path, 0)
            back_counts[path] = back_counts.get(path, 0) + 1
            dout = _copy(grad_output[0])
            events.append(("backward", "dact", path, k, dout))
            if keep_calls:
                calls[(path, k)].dout = dout
                timeline.append(("pre", path, k))
            mod.__dict__.setdefault("_golden_k", []).append(k)

        return hook

    def post_hook(path):
        def hook(mod, grad_input, grad_output):
            k = mod.__dict__["_golden_k"].pop()
            if keep_calls:
                calls[(path, k)].dx = _copy(grad_input[0])  # a caller may add into it in place
                timeline.append(("post", path, k))
            for p in mod._parameters.values():
                if p is not None:
                    events.append(("backward", "grad", None, id(p), None))

        return hook

    for path, mod in model.named_modules():
        if path == "":
            continue  # the model itself: its output is `logits`, its dout the loss's gradient
        handles.append(mod.register_forward_hook(fwd_hook(path)))
        handles.append(mod.register_full_backward_pre_hook(pre_hook(path)))
        handles.append(mod.register_full_backward_hook(post_hook(path)))
    loss_fn = CrossEntropyLoss()
    try:
        logits = model.forward(ids)
        loss = loss_fn.forward(logits, targets)
        model.backward(loss_fn.backward(1.0))
    finally:
        for h in handles:
            h.remove()
        for _, mod in model.named_modules():
            mod.__dict__.pop("_golden_k", None)

    rec = Recording()
    dtype = model.dtype
    rec.tensors["input/ids"] = np.asarray(ids, np.int64)
    rec.tensors["input/targets"] = np.asarray(targets, np.int64)
    params = dict(model.named_parameters(remove_duplicate=False))
    for key, p in params.items():
        rec.tensors[f"param/{key}"] = p.data
    for name in rec.tensors:
        rec.phase[name] = "forward"

    def tag(path, k):
        return f"{path}#{k}" if counts.get(path, 0) > 1 else path

    # a tied parameter's gradient is final when the last of its modules' backward is done
    last = {}
    for i, (_, kind, _, key, _) in enumerate(events):
        if kind == "grad":
            last[key] = i
    by_id = {id(p): p for p in params.values()}
    for i, (phase, kind, path, k, arr) in enumerate(events):
        if kind == "grad":
            if last[k] == i:
                for key in owners[k]:
                    rec.tensors[f"grad/{key}"] = by_id[k].grad
                    rec.phase[f"grad/{key}"] = "backward"
            continue
        name = f"{kind}/{tag(path, k)}"
        rec.tensors[name], rec.phase[name] = arr, phase
        if kind == "act" and keep_calls:
            c = calls[(path, k)]
            c.out = arr
            rec.calls[tag(path, k)] = c
    # logits and loss come after every activation, at the end of the forward
    fwd = [n for n in rec.tensors if rec.phase[n] == "forward"]
    bwd = [n for n in rec.tensors if rec.phase[n] == "backward"]
    ordered = OrderedDict((n, rec.tensors[n]) for n in fwd)
    ordered["logits"] = logits
    ordered["loss"] = np.asarray(loss, dtype)
    rec.phase["logits"] = rec.phase["loss"] = "forward"
    for n in bwd:
        ordered[n] = rec.tensors[n]
    rec.tensors = ordered
    if keep_calls:
        for c in rec.calls.values():
            c.cache = None
        rec.timeline = [(when, tag(path, k)) for when, path, k in timeline]
    return rec


def copy_params_and_grads(rec):
    """Make the recording's param/ and grad/ entries copies (before an optimizer changes them)."""
    for name, a in rec.tensors.items():
        if name.startswith(("param/", "grad/")):
            rec.tensors[name] = a.copy()
