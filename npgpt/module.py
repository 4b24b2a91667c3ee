"""Parameter, Module and Sequential: the forward/backward protocol of docs/api.md.

`Parameter` is micrograd's `Value` for arrays: `.data` and `.grad`, and every backward adds
into `.grad` (`+=`), so shared weights and gradient accumulation just work.
`Module` registers the Parameters, Modules and buffers assigned to it, in assignment order,
as PyTorch does, so `state_dict()` keys read like the book's (`trf_blocks.0.att.W_query.weight`).
"""

import itertools
from collections import OrderedDict

import numpy as np

FLOAT_DTYPES = (np.float32, np.float64)


class Parameter:
    """A trainable array: `.data` and `.grad` (same shape and dtype, zeros until a backward)."""

    def __init__(self, data):
        data = np.asarray(data)
        if data.dtype not in FLOAT_DTYPES:
            data = data.astype(np.float64)
        self.data = data
        self.grad = np.zeros_like(data)

    def __repr__(self):
        return f"Parameter(shape={self.data.shape}, dtype={self.data.dtype})"


_hook_ids = itertools.count()


class HookHandle:
    """What register_*_hook returns: .remove() unregisters the hook (a second call does nothing)."""

    def __init__(self, module, kind, key):
        self.module, self.kind, self.key = module, kind, key

    def remove(self):
        self.module._remove_hook(self.kind, self.key)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class Module:
    """Base class: subclasses call `super().__init__()` first, then assign their parts."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        for registry in (self._parameters, self._modules, self._buffers):
            registry.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def register_buffer(self, name, array):
        """Keep `array` in `state_dict()` (not a parameter: no gradient), like PyTorch's."""
        object.__setattr__(self, name, array)
        self._buffers[name] = array

    # ---- the protocol -------------------------------------------------------------------
    def forward(self, *inputs):
        raise NotImplementedError(f"{type(self).__name__}.forward is not implemented")

    def backward(self, dout):
        raise NotImplementedError(f"{type(self).__name__}.backward is not implemented")

    def __call__(self, *inputs, **kwargs):
        return self.forward(*inputs, **kwargs)

    # ---- hooks (PyTorch's register_forward_hook, register_full_backward_hook) ------------
    # Parents call `child.forward(x)` directly, so a hook cannot live in __call__: registering
    # the first hook puts a wrapper in the instance's `forward` (or `backward`) attribute, and
    # removing the last one deletes it. A module without hooks runs its class's method as is.
    def register_forward_hook(self, hook):
        """hook(module, inputs, output) runs after every forward; returning a value replaces
        the output. -> a handle whose .remove() unregisters it."""
        return self._add_hook("forward", hook)

    def register_full_backward_pre_hook(self, hook):
        """hook(module, grad_output) runs before every backward, with grad_output = (dout,)."""
        return self._add_hook("backward_pre", hook)

    def register_full_backward_hook(self, hook):
        """hook(module, grad_input, grad_output) runs after every backward, with
        grad_input = (dx,) (what backward returned) and grad_output = (dout,)."""
        return self._add_hook("backward", hook)

    def _add_hook(self, kind, hook):
        hooks = self.__dict__.setdefault("_hooks", {"forward": {}, "backward_pre": {}, "backward": {}})
        key = next(_hook_ids)
        hooks[kind][key] = hook
        if kind == "forward":
            object.__setattr__(self, "forward", self._hooked_forward)
        else:
            object.__setattr__(self, "backward", self._hooked_backward)
        return HookHandle(self, kind, key)

    def _remove_hook(self, kind, key):
        hooks = self.__dict__.get("_hooks")
        if hooks is None or hooks[kind].pop(key, None) is None:
            return
        if kind == "forward" and not hooks["forward"]:
            self.__dict__.pop("forward", None)
        if kind != "forward" and not hooks["backward_pre"] and not hooks["backward"]:
            self.__dict__.pop("backward", None)

    def _hooked_forward(self, *inputs, **kwargs):
        out = type(self).forward(self, *inputs, **kwargs)
        for hook in list(self._hooks["forward"].values()):
            res = hook(self, inputs, out)
            out = out if res is None else res
        return out

    def _hooked_backward(self, dout, *args, **kwargs):
        for hook in list(self._hooks["backward_pre"].values()):
            hook(self, (dout,))
        dx = type(self).backward(self, dout, *args, **kwargs)
        for hook in list(self._hooks["backward"].values()):
            res = hook(self, (dx,), (dout,))
            dx = dx if res is None else res[0]
        return dx

    # ---- traversal ----------------------------------------------------------------------
    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, prefix="", remove_duplicate=True):
        """(name, Parameter) pairs; a Parameter shared by two modules (a tied output head)
        is listed once unless remove_duplicate=False, as in PyTorch."""
        seen = set()
        for mod_name, mod in self.named_modules(prefix):
            for name, p in mod._parameters.items():
                if remove_duplicate and id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mod_name}.{name}" if mod_name else name), p

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def named_buffers(self, prefix=""):
        for mod_name, mod in self.named_modules(prefix):
            for name in mod._buffers:
                yield (f"{mod_name}.{name}" if mod_name else name), mod, name

    def zero_grad(self):
        for p in self.parameters():
            p.grad[...] = 0

    def train(self, mode=True):
        for _, mod in self.named_modules():
            object.__setattr__(mod, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    @property
    def dtype(self):
        """The dtype computation runs in: that of the parameters (float64 when there are none)."""
        for p in self.parameters():
            return p.data.dtype
        return np.dtype(np.float64)

    def astype(self, dtype):
        """Cast parameters and gradients in place (buffers keep their dtype); return self."""
        dtype = np.dtype(dtype)
        if dtype not in FLOAT_DTYPES:
            raise TypeError(f"{type(self).__name__}.astype: dtype must be float32 or float64, got {dtype}")
        for p in self.parameters():
            p.data = p.data.astype(dtype)
            p.grad = p.grad.astype(dtype)
        return self

    # ---- state dicts ----------------------------------------------------------------------
    def state_dict(self):
        """Name -> copy of each parameter's data and each buffer, in registration order."""
        sd = OrderedDict()
        for mod_name, mod in self.named_modules():  # PyTorch's order: own tensors, then children's
            pre = f"{mod_name}." if mod_name else ""
            for name, p in mod._parameters.items():
                sd[pre + name] = p.data.copy()
            for name in mod._buffers:
                sd[pre + name] = np.array(getattr(mod, name), copy=True)
        return sd

    def load_state_dict(self, state_dict, strict=True):
        """Copy arrays into parameters and buffers; clear errors for missing/unexpected/mis-shaped keys."""
        where = f"{type(self).__name__}.load_state_dict"
        if not hasattr(state_dict, "items") or not hasattr(state_dict, "__contains__"):
            raise TypeError(
                f"{where}: state_dict must be a dict of name -> array, got {type(state_dict).__name__}"
            )
        own = dict(self.named_parameters(remove_duplicate=False))
        buffers = {name: (mod, attr) for name, mod, attr in self.named_buffers()}
        missing = [k for k in list(own) + list(buffers) if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own and k not in buffers]
        wrong, mistyped = [], []
        for k, v in state_dict.items():
            target = own[k].data if k in own else getattr(*buffers[k]) if k in buffers else None
            if target is None:
                continue
            kind = np.asarray(v).dtype.kind
            if kind not in "fiub" if target.dtype.kind == "b" else kind not in "fiu":
                mistyped.append(f"{k} has dtype {np.asarray(v).dtype}, expected numbers ({target.dtype})")
            elif np.shape(v) != target.shape:
                wrong.append(f"{k} has shape {np.shape(v)}, expected {target.shape}")
        problems = []
        if strict and missing:
            problems.append("missing keys: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(unexpected))
        if wrong:
            problems.append("mis-shaped keys: " + "; ".join(wrong))
        if mistyped:
            problems.append("keys that are not numbers: " + "; ".join(mistyped))
        if problems:
            raise RuntimeError(f"{where}: " + "; ".join(problems))
        for k, v in state_dict.items():
            if k in own:
                p = own[k]
                p.data = np.array(v, dtype=p.data.dtype, copy=True)
            elif k in buffers:
                mod, attr = buffers[k]
                mod.register_buffer(attr, np.array(v, dtype=getattr(mod, attr).dtype, copy=True))
        return self

    def __repr__(self):
        lines = [f"{type(self).__name__}("]
        for name, child in self._modules.items():
            lines += ["  " + line for line in f"({name}): {child!r}".splitlines()]
        return "\n".join(lines) + ")" if len(lines) > 1 else f"{type(self).__name__}()"


class Sequential(Module):
    """Modules applied in order; children named "0", "1", ...; backward runs them in reverse."""

    def __init__(self, *modules):
        super().__init__()
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def forward(self, x):
        for m in self._modules.values():
            x = m.forward(x)
        return x

    def backward(self, dout):
        for m in reversed(self._modules.values()):
            dout = m.backward(dout)
        return dout
