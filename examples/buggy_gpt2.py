"""A GPT-2 training step written the way a port is written (flat functions, llm.c's names, one
fused qkv matrix), with a deliberate bug, to show `npgpt compare` finding it. docs/reference.md.

    npgpt reference --model tiny --batch 2 --seq-len 8 -o ref.safetensors
    python examples/buggy_gpt2.py ref.safetensors mine/            # writes mine/tensors.json + *.bin
    npgpt compare mine/ --reference ref.safetensors

It reads the weights and the inputs from the reference file (a safetensors reader in ten lines,
no npgpt), runs forward and backward, and writes its tensors under the reference's names as
raw little-endian .bin files with a tensors.json name map, as a C program would.

--bug chooses the mistake: gelu-no-3 (the default: GELU's derivative without the 3 of 3 * 0.044715
x^2), ln-no-mean, eps-outside, transposed, no-max-shift (needs a reference written with
--scale-weights), no-mask, scale-hs, or none.
"""

import argparse
import json
import math
import os

import numpy as np

BUGS = ("gelu-no-3", "ln-no-mean", "eps-outside", "transposed", "no-max-shift", "no-mask", "scale-hs", "none")
BUG = "gelu-no-3"


def load_safetensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    codes = {"F64": "<f8", "F32": "<f4", "I64": "<i8", "U8": "u1"}
    out = {}
    for name, e in header.items():
        if name != "__metadata__":
            b, end = e["data_offsets"]
            out[name] = np.frombuffer(data[b:end], codes[e["dtype"]]).reshape(e["shape"])
    return out


# ------------------------------------------------------------------------------ the layers
def layernorm_forward(inp, w, b, eps=1e-5):
    mean = inp.mean(-1, keepdims=True)
    xc = inp - mean
    var = (xc * xc).mean(-1, keepdims=True)
    if BUG == "eps-outside":
        rstd = 1.0 / (np.sqrt(var) + eps)
    else:
        rstd = 1.0 / np.sqrt(var + eps)
    norm = xc * rstd
    return norm * w + b, (norm, rstd)


def layernorm_backward(dout, cache, w):
    norm, rstd = cache
    dnorm = dout * w
    dinp = dnorm - norm * (dnorm * norm).mean(-1, keepdims=True)
    if BUG != "ln-no-mean":
        dinp = dinp - dnorm.mean(-1, keepdims=True)
    dinp = dinp * rstd
    return dinp, (dout * norm).sum((0, 1)), dout.sum((0, 1))


def matmul_forward(inp, w, b, transposed=False):
    return (inp @ w if transposed else inp @ w.T) + b


def matmul_backward(dout, inp, w, transposed=False):
    OC, C = dout.shape[-1], inp.shape[-1]
    dw = dout.reshape(-1, OC).T @ inp.reshape(-1, C)
    if transposed:
        return dout @ w.T, dw.T, dout.sum((0, 1))
    return dout @ w, dw, dout.sum((0, 1))


def gelu_forward(x):
    s = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + np.tanh(s * (x + 0.044715 * x * x * x)))


def gelu_backward(dout, x):
    s = math.sqrt(2.0 / math.pi)
    th = np.tanh(s * (x + 0.044715 * x * x * x))
    three = 1.0 if BUG == "gelu-no-3" else 3.0
    local = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * s * (1.0 + three * 0.044715 * x * x)
    return dout * local


def attention_forward(qkv, NH):
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // NH
    q, k, v = (qkv[..., i * C : (i + 1) * C].reshape(B, T, NH, hs).transpose(0, 2, 1, 3) for i in range(3))
    scale = 1.0 / hs if BUG == "scale-hs" else 1.0 / math.sqrt(hs)
    preatt = (q @ k.transpose(0, 1, 3, 2)) * scale
    if BUG != "no-mask":
        preatt = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, preatt)
    if BUG == "no-max-shift":
        e = np.exp(preatt)
    else:
        e = np.exp(preatt - preatt.max(-1, keepdims=True))
    att = e / e.sum(-1, keepdims=True)
    out = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
    return out, (q, k, v, att, scale)


def attention_backward(dout, cache):
    q, k, v, att, scale = cache
    B, NH, T, hs = q.shape
    dout = dout.reshape(B, T, NH, hs).transpose(0, 2, 1, 3)
    datt = dout @ v.transpose(0, 1, 3, 2)
    dv = att.transpose(0, 1, 3, 2) @ dout
    dpreatt = att * (datt - (datt * att).sum(-1, keepdims=True)) * scale
    dq, dk = dpreatt @ k, dpreatt.transpose(0, 1, 3, 2) @ q
    merge = lambda t: t.transpose(0, 2, 1, 3).reshape(B, T, NH * hs)  # noqa: E731
    return np.concatenate([merge(dq), merge(dk), merge(dv)], -1)


def crossentropy_forward_backward(logits, targets):
    B, T, V = logits.shape
    z = logits - logits.max(-1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    rows, cols = np.arange(B * T), targets.reshape(-1)
    p = probs.reshape(-1, V)
    loss = -np.log(p[rows, cols]).mean()
    dlogits = p.copy()
    dlogits[rows, cols] -= 1.0
    return loss, (dlogits / (B * T)).reshape(B, T, V)


# ------------------------------------------------------------------------------ the model
def gpt2_step(P, ids, targets, NH, L, dump):
    """One forward and backward; every tensor goes into `dump` under the reference's names."""
    B, T = ids.shape
    wte, wpe = P["tok_emb.weight"], P["pos_emb.weight"]
    x = wte[ids] + wpe[:T]
    dump["act/tok_emb"], dump["act/pos_emb"], dump["act/drop_emb"] = wte[ids], wpe[:T], x
    caches = []
    for layer in range(L):
        p = f"trf_blocks.{layer}."
        qkvw = np.concatenate([P[p + f"att.{n}.weight"] for n in ("W_query", "W_key", "W_value")])
        qkvb = np.concatenate(
            [P.get(p + f"att.{n}.bias", np.zeros(len(qkvw) // 3)) for n in ("W_query", "W_key", "W_value")]
        )
        C = x.shape[-1]
        ln1, ln1c = layernorm_forward(x, P[p + "norm1.scale"], P[p + "norm1.shift"])
        qkv = matmul_forward(ln1, qkvw, qkvb)
        atty, attc = attention_forward(qkv, NH)
        wo, bo = P[p + "att.out_proj.weight"], P[p + "att.out_proj.bias"]
        attproj = matmul_forward(atty, wo, bo, transposed=BUG == "transposed")
        x1 = x + attproj
        ln2, ln2c = layernorm_forward(x1, P[p + "norm2.scale"], P[p + "norm2.shift"])
        fch = matmul_forward(ln2, P[p + "ff.layers.0.weight"], P[p + "ff.layers.0.bias"])
        fch_gelu = gelu_forward(fch)
        fcproj = matmul_forward(fch_gelu, P[p + "ff.layers.2.weight"], P[p + "ff.layers.2.bias"])
        x2 = x1 + fcproj
        names = ("norm1", "att.W_query", "att.W_key", "att.W_value", "att.out_proj", "att")
        for n, a in zip(names, (ln1, qkv[..., :C], qkv[..., C : 2 * C], qkv[..., 2 * C :], attproj, attproj)):
            dump[f"act/{p}{n}"] = a
        for n, a in zip(
            ("norm2", "ff.layers.0", "ff.layers.1", "ff.layers.2", "ff"), (ln2, fch, fch_gelu, fcproj, fcproj)
        ):
            dump[f"act/{p}{n}"] = a
        dump[f"act/trf_blocks.{layer}"] = x2
        caches.append((x, ln1, ln1c, qkvw, qkv, atty, attc, x1, ln2, ln2c, fch, fch_gelu))
        x = x2
    lnf, lnfc = layernorm_forward(x, P["final_norm.scale"], P["final_norm.shift"])
    logits = lnf @ P["out_head.weight"].T
    loss, dlogits = crossentropy_forward_backward(logits, targets)
    dump["act/trf_blocks"], dump["act/final_norm"], dump["act/out_head"] = x, lnf, logits
    dump["logits"], dump["loss"] = logits, np.array(loss)

    # backward
    dump["dact/out_head"] = dlogits
    dump["grad/out_head.weight"] = dlogits.reshape(-1, logits.shape[-1]).T @ lnf.reshape(-1, lnf.shape[-1])
    dlnf = dlogits @ P["out_head.weight"]
    dump["dact/final_norm"] = dlnf
    dx, dump["grad/final_norm.scale"], dump["grad/final_norm.shift"] = layernorm_backward(
        dlnf, lnfc, P["final_norm.scale"]
    )
    dump["dact/trf_blocks"] = dx
    for layer in reversed(range(L)):
        p = f"trf_blocks.{layer}."
        x, ln1, ln1c, qkvw, qkv, atty, attc, x1, ln2, ln2c, fch, fch_gelu = caches[layer]
        C = x.shape[-1]
        dump[f"dact/{p[:-1]}"] = dx
        for n in ("ff", "ff.layers.2"):
            dump[f"dact/{p}{n}"] = dx
        dfch_gelu, dw, db = matmul_backward(dx, fch_gelu, P[p + "ff.layers.2.weight"])
        dump[f"grad/{p}ff.layers.2.weight"], dump[f"grad/{p}ff.layers.2.bias"] = dw, db
        dump[f"dact/{p}ff.layers.1"] = dfch_gelu
        dfch = gelu_backward(dfch_gelu, fch)
        dump[f"dact/{p}ff.layers.0"] = dfch
        dln2, dw, db = matmul_backward(dfch, ln2, P[p + "ff.layers.0.weight"])
        dump[f"grad/{p}ff.layers.0.weight"], dump[f"grad/{p}ff.layers.0.bias"] = dw, db
        dump[f"dact/{p}norm2"] = dln2
        dx1_branch, dump[f"grad/{p}norm2.scale"], dump[f"grad/{p}norm2.shift"] = layernorm_backward(
            dln2, ln2c, P[p + "norm2.scale"]
        )
        dx1 = dx + dx1_branch
        dump[f"dact/{p}att"], dump[f"dact/{p}att.out_proj"] = dx1, dx1
        datty, dw, db = matmul_backward(
            dx1, atty, P[p + "att.out_proj.weight"], transposed=BUG == "transposed"
        )
        dump[f"grad/{p}att.out_proj.weight"], dump[f"grad/{p}att.out_proj.bias"] = dw, db
        dqkv = attention_backward(datty, attc)
        for i, n in enumerate(("W_query", "W_key", "W_value")):
            dump[f"dact/{p}att.{n}"] = dqkv[..., i * C : (i + 1) * C]
        dln1, dqkvw, dqkvb = matmul_backward(dqkv, ln1, qkvw)
        for i, n in enumerate(("W_query", "W_key", "W_value")):
            dump[f"grad/{p}att.{n}.weight"] = dqkvw[i * C : (i + 1) * C]
            if p + f"att.{n}.bias" in P:
                dump[f"grad/{p}att.{n}.bias"] = dqkvb[i * C : (i + 1) * C]
        dump[f"dact/{p}norm1"] = dln1
        dx_branch, dump[f"grad/{p}norm1.scale"], dump[f"grad/{p}norm1.shift"] = layernorm_backward(
            dln1, ln1c, P[p + "norm1.scale"]
        )
        dx = dx1 + dx_branch
    dump["dact/drop_emb"], dump["dact/tok_emb"], dump["dact/pos_emb"] = dx, dx, dx.sum(0)
    dwte = np.zeros_like(wte)
    np.add.at(dwte, ids, dx)
    dwpe = np.zeros_like(wpe)
    dwpe[:T] = dx.sum(0)
    dump["grad/tok_emb.weight"], dump["grad/pos_emb.weight"] = dwte, dwpe


def write_folder(folder, dump, dtype):
    os.makedirs(folder, exist_ok=True)
    entries = []
    for i, (name, a) in enumerate(dump.items()):
        a = np.asarray(a, np.int64 if a.dtype.kind in "iu" else dtype, order="C")
        fname = f"{i:04d}.bin"
        a.astype(a.dtype.newbyteorder("<")).tofile(os.path.join(folder, fname))
        entries.append({"name": name, "file": fname, "dtype": a.dtype.name, "shape": list(a.shape)})
    with open(os.path.join(folder, "tensors.json"), "w") as f:
        json.dump({"tensors": entries}, f, indent=1)


def main(argv=None):
    global BUG
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reference", help="a .safetensors file from `npgpt reference`")
    ap.add_argument("out", help="folder to write tensors.json and the .bin files into")
    ap.add_argument("--bug", choices=BUGS, default=BUG)
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    args = ap.parse_args(argv)
    BUG = args.bug
    with open(os.path.splitext(args.reference)[0] + ".json") as f:
        cfg = json.load(f)["cfg"]
    ref = load_safetensors(args.reference)
    dtype = np.dtype(args.dtype)
    P = {k[len("param/") :]: v.astype(dtype) for k, v in ref.items() if k.startswith("param/")}
    ids, targets = ref["input/ids"], ref["input/targets"]
    dump = {"input/ids": ids, "input/targets": targets}
    dump.update({f"param/{k}": v for k, v in P.items()})
    with np.errstate(over="ignore", invalid="ignore"):
        gpt2_step(P, ids, targets, cfg["n_heads"], cfg["n_layers"], dump)
    write_folder(args.out, dump, dtype)
    print(f"wrote {len(dump)} tensors to {args.out} (bug: {BUG}, loss {float(dump['loss']):.6f})")


if __name__ == "__main__":
    main()
