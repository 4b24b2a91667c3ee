"""Pretrained GPT-2 weights from a Hugging Face folder into npgpt's GPTModel.

    folder/config.json        n_embd, n_head, n_layer, n_positions, vocab_size, ...
    folder/model.safetensors  read with safetensors' NumPy API (no torch, no pickle)
    folder/vocab.json, merges.txt   the byte-level BPE, read with the `tokenizers` library

Hugging Face's GPT-2 keeps its projections in Conv1D layers, whose weight is (in, out): the
transpose of a Linear's (out, in). Its attention has one fused `c_attn` (E, 3E) that splits
into W_query, W_key, W_value (with biases: qkv_bias=True). The output head has no weight of
its own: it is tied to the token embedding (the same Parameter, so gradients add up).
Both packages are in the `gpt2` extra: pip install "npgpt[gpt2]".
"""

import json
from pathlib import Path

import numpy as np

from .model import GPTModel


def _need(package):
    try:
        return __import__(package)
    except ImportError:
        raise ImportError(f"load_gpt2 needs the '{package}' package: pip install \"npgpt[gpt2]\"") from None


class GPT2Tokenizer:
    """GPT-2's byte-level BPE from vocab.json and merges.txt: encode(str) -> ids, decode(ids) -> str."""

    def __init__(self, folder):
        _need("tokenizers")
        from tokenizers import ByteLevelBPETokenizer

        folder = Path(folder)
        self.bpe = ByteLevelBPETokenizer.from_file(str(folder / "vocab.json"), str(folder / "merges.txt"))
        if self.bpe.token_to_id("<|endoftext|>") is not None:
            self.bpe.add_special_tokens(["<|endoftext|>"])
        self.eot = self.bpe.token_to_id("<|endoftext|>")

    @property
    def vocab_size(self):
        return self.bpe.get_vocab_size()

    def encode(self, text):
        return self.bpe.encode(text).ids

    def decode(self, ids):
        return self.bpe.decode([int(i) for i in ids], skip_special_tokens=False)


def gpt2_config(hf):
    """A Hugging Face GPT-2 config.json (dict) -> the GPTModel cfg."""
    act = hf.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh"):
        raise ValueError(f"load_gpt2: activation_function {act!r} is not GPT-2's tanh GELU (gelu_new)")
    return {
        "vocab_size": hf["vocab_size"],
        "context_length": hf.get("n_positions", hf.get("n_ctx", 1024)),
        "emb_dim": hf["n_embd"],
        "n_heads": hf["n_head"],
        "n_layers": hf["n_layer"],
        "drop_rate": hf.get("resid_pdrop", 0.1),
        "qkv_bias": True,
    }


def convert_state_dict(hf_sd, cfg):
    """Hugging Face tensors (with or without the `transformer.` prefix) -> npgpt state_dict keys."""
    sd = {k.removeprefix("transformer."): v for k, v in hf_sd.items()}
    E = cfg["emb_dim"]

    def take(key):
        if key not in sd:
            raise KeyError(f"load_gpt2: model.safetensors has no tensor {key!r}")
        return np.asarray(sd[key])

    out = {"tok_emb.weight": take("wte.weight"), "pos_emb.weight": take("wpe.weight")}
    for i in range(cfg["n_layers"]):
        h, b = f"h.{i}.", f"trf_blocks.{i}."
        out[b + "norm1.scale"], out[b + "norm1.shift"] = take(h + "ln_1.weight"), take(h + "ln_1.bias")
        out[b + "norm2.scale"], out[b + "norm2.shift"] = take(h + "ln_2.weight"), take(h + "ln_2.bias")
        w = take(h + "attn.c_attn.weight").T  # Conv1D (E, 3E) -> Linear (3E, E)
        bias = take(h + "attn.c_attn.bias")  # (3E,)
        for j, name in enumerate(("W_query", "W_key", "W_value")):
            out[f"{b}att.{name}.weight"] = w[j * E : (j + 1) * E]  # (E, E)
            out[f"{b}att.{name}.bias"] = bias[j * E : (j + 1) * E]  # (E,)
        out[b + "att.out_proj.weight"] = take(h + "attn.c_proj.weight").T  # (E, E)
        out[b + "att.out_proj.bias"] = take(h + "attn.c_proj.bias")
        out[b + "ff.layers.0.weight"] = take(h + "mlp.c_fc.weight").T  # (4E, E)
        out[b + "ff.layers.0.bias"] = take(h + "mlp.c_fc.bias")
        out[b + "ff.layers.2.weight"] = take(h + "mlp.c_proj.weight").T  # (E, 4E)
        out[b + "ff.layers.2.bias"] = take(h + "mlp.c_proj.bias")
    out["final_norm.scale"], out["final_norm.shift"] = take("ln_f.weight"), take("ln_f.bias")
    return out


def load_gpt2(folder, dtype=np.float32):
    """-> (GPTModel in eval mode, GPT2Tokenizer) from a Hugging Face GPT-2 folder."""
    folder = Path(folder)
    for name in ("config.json", "model.safetensors", "vocab.json", "merges.txt"):
        if not (folder / name).is_file():
            raise FileNotFoundError(
                f"load_gpt2: {folder} has no {name} (a Hugging Face GPT-2 folder has "
                "config.json, model.safetensors, vocab.json, merges.txt)"
            )
    from .errors import InputError

    try:  # a damaged folder is bad input (one line from the CLI), not a crash inside a parser
        hf = json.loads((folder / "config.json").read_text())
        cfg = gpt2_config(hf)
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
        raise InputError(f"load_gpt2: {folder / 'config.json'} is not a GPT-2 config.json ({e!s})") from None
    _need("safetensors")
    from safetensors.numpy import load_file

    try:
        tensors = load_file(str(folder / "model.safetensors"))
    except Exception as e:  # safetensors' own SafetensorError: a damaged or foreign file
        raise InputError(
            f"load_gpt2: {folder / 'model.safetensors'} cannot be read ({type(e).__name__}: {e})"
        ) from None
    try:
        model = GPTModel(cfg, rng=0)  # first: it checks the cfg's values, which convert_state_dict uses
        sd = convert_state_dict(tensors, cfg)
        model.out_head.weight = model.tok_emb.weight  # tied: one Parameter, shared
        model.astype(dtype)
        sd["out_head.weight"] = sd["tok_emb.weight"]
        model.load_state_dict({**sd, **_masks(model)})
    except KeyError as e:  # convert_state_dict: a tensor is missing
        raise InputError(f"{e.args[0]} ({folder})") from None
    except (RuntimeError, ValueError, TypeError) as e:  # mis-shaped tensors, a bad cfg value
        raise InputError(f"load_gpt2: {folder}: {' '.join(str(e).split())[:300]}") from None
    eps = float(hf.get("layer_norm_epsilon", 1e-5))
    for _, mod in model.named_modules():
        if hasattr(mod, "eps") and hasattr(mod, "scale"):
            mod.eps = eps
    return model.eval(), GPT2Tokenizer(folder)


def _masks(model):
    return {name: getattr(mod, attr) for name, mod, attr in model.named_buffers()}
