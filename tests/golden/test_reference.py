"""`npgpt reference` (npgpt/golden/dump.py, record.py): the names and order of the contract, the
manifest's checksums (recomputed here with hashlib), values that follow from the math of the
dumped tensors themselves, dropout masks that reproduce the step, the yardstick's bound for
rounded parameters, and one-line errors before anything large is allocated."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from npgpt import GPTModel
from npgpt.golden.tensorfile import read_safetensors, read_tensors

from .conftest import MICRO, make_reference, run


def _manifest(path):
    return json.loads(path.with_suffix(".json").read_text())


def test_names_follow_the_contract_in_forward_then_backward_order(ref64):
    m = _manifest(ref64)
    names = [t["name"] for t in m["tensors"]]
    model = GPTModel(MICRO)
    keys = [k for k, _ in model.named_parameters()]
    for k in keys:
        assert f"param/{k}" in names and f"grad/{k}" in names, f"param/grad {k} missing"
    for n in (
        "input/ids",
        "input/targets",
        "logits",
        "loss",
        "act/trf_blocks.1.drop_shortcut#1",
        "dact/trf_blocks.0.drop_shortcut#0",
        "act/trf_blocks.0.ff.layers.1",
        "dact/final_norm",
    ):
        assert n in names, f"{n} not in the dump"
    assert "act/trf_blocks.0.drop_shortcut" not in names, "a module called twice must carry #k"
    assert not any(n.startswith("mask/") for n in names), "masks dumped with dropout off"
    fwd = [t["name"] for t in m["tensors"] if t["phase"] == "forward"]
    bwd = [t["name"] for t in m["tensors"] if t["phase"] == "backward"]
    assert (
        fwd.index("act/trf_blocks.0.norm1")
        < fwd.index("act/trf_blocks.0.att")
        < fwd.index("act/trf_blocks.1.norm1")
    )
    assert fwd.index("logits") < fwd.index("loss") and fwd[-1] == "loss", "logits and loss end the forward"
    assert bwd[0] == "dact/out_head", f"backward starts at {bwd[0]}"
    assert bwd.index("dact/trf_blocks.1.norm1") < bwd.index("dact/trf_blocks.0.norm2"), (
        "backward runs layers in reverse"
    )
    assert bwd.index("dact/trf_blocks.0.drop_shortcut#1") < bwd.index("dact/trf_blocks.0.drop_shortcut#0")
    for ph in ("forward", "backward"):
        orders = [t["order"] for t in m["tensors"] if t["phase"] == ph]
        assert orders == list(range(len(orders))), f"{ph} order is not 0..n-1"


def test_manifest_checksums_are_sha256_of_little_endian_c_order_bytes(ref64, ref32):
    for path in (ref64, ref32):
        tensors, _ = read_safetensors(path)
        for t in _manifest(path)["tensors"]:
            a = tensors[t["name"]]
            raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
            assert hashlib.sha256(raw).hexdigest() == t["sha256"], f"{path.name}: sha256 of {t['name']}"
            assert list(a.shape) == t["shape"] and a.dtype.name == t["dtype"], f"{t['name']} shape/dtype"


def test_dumped_tensors_satisfy_the_math_between_them(ref64):
    """Each check uses only dumped tensors and the defining formula (not npgpt's code)."""
    t, _ = read_safetensors(ref64)
    ids, p = t["input/ids"], "trf_blocks.0."
    np.testing.assert_allclose(
        t["act/tok_emb"], t["param/tok_emb.weight"][ids], rtol=0, atol=0, err_msg="act/tok_emb"
    )
    x = t["act/trf_blocks.0.norm2"]
    h = x @ t[f"param/{p}ff.layers.0.weight"].T + t[f"param/{p}ff.layers.0.bias"]
    np.testing.assert_allclose(t[f"act/{p}ff.layers.0"], h, rtol=1e-12, err_msg="act ff.layers.0 = x W^T + b")
    g = t[f"act/{p}ff.layers.0"]
    gelu = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g * g * g)))
    np.testing.assert_allclose(t[f"act/{p}ff.layers.1"], gelu, rtol=1e-12, err_msg="act ff.layers.1 = GELU")
    z = t["logits"].reshape(-1, MICRO["vocab_size"])
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    loss = np.mean(lse - z[np.arange(len(z)), t["input/targets"].ravel()])
    np.testing.assert_allclose(t["loss"], loss, rtol=1e-13, err_msg="loss = mean cross-entropy of logits")
    dW = t["dact/out_head"].reshape(-1, z.shape[1]).T @ t["act/final_norm"].reshape(-1, MICRO["emb_dim"])
    np.testing.assert_allclose(
        t["grad/out_head.weight"], dW, rtol=1e-12, err_msg="grad/out_head.weight = dout^T x"
    )
    np.testing.assert_array_equal(
        t["dact/trf_blocks.0.drop_shortcut#1"], t["dact/trf_blocks.0"], err_msg="block output grad"
    )


def test_parameters_are_those_of_GPTModel_with_the_seed_and_norms_perturbed(ref64):
    t, _ = read_safetensors(ref64)
    model = GPTModel(MICRO, rng=7)
    for k, prm in model.named_parameters():
        if "norm" not in k:
            np.testing.assert_array_equal(t[f"param/{k}"], prm.data, err_msg=f"param/{k}")
        else:
            assert not np.array_equal(t[f"param/{k}"], prm.data), f"param/{k} not perturbed"


def test_yardstick_of_a_rounded_parameter_is_at_most_float32_unit_roundoff(ref64):
    for ent in _manifest(ref64)["tensors"]:
        if ent["name"].startswith("param/"):
            assert 0 < ent["f32_vs_f64"] <= 2.0**-24, f"{ent['name']}: f32_vs_f64 {ent['f32_vs_f64']}"
        elif ent["dtype"].startswith("float"):
            assert ent["f32_vs_f64"] > 0, f"{ent['name']}: a computed tensor has no float32 error"


def test_float32_dump_is_float32_and_close_to_the_float64_one(ref64, ref32):
    a, _ = read_safetensors(ref64)
    b, _ = read_safetensors(ref32)
    for ent in _manifest(ref32)["tensors"]:
        n = ent["name"]
        if ent["dtype"].startswith("float"):
            assert b[n].dtype == np.float32, f"{n} is {b[n].dtype}"
            err = np.linalg.norm((b[n] - a[n]).ravel()) / max(np.linalg.norm(a[n].ravel()), 1e-300)
            assert err <= ent["f32_vs_f64"] * (1 + 1e-6) + 1e-300, (
                f"{n}: {err} vs yardstick {ent['f32_vs_f64']}"
            )


def test_dropout_masks_reproduce_the_step(tmp_path):
    cfg = {**MICRO, "drop_rate": 0.25}
    path = make_reference(tmp_path, extra=["--keep-dropout"], cfg=cfg)
    t, _ = read_safetensors(path)
    masks = [n for n in t if n.startswith("mask/")]
    assert "mask/drop_emb" in masks and "mask/trf_blocks.1.drop_shortcut#1" in masks, masks
    assert "mask/trf_blocks.0.att.dropout" in masks, masks
    x = t["act/tok_emb"] + t["act/pos_emb"]
    np.testing.assert_allclose(
        t["act/drop_emb"], x * t["mask/drop_emb"] / 0.75, rtol=1e-15, err_msg="drop_emb"
    )
    for k in (0, 1):
        m = t[f"mask/trf_blocks.0.drop_shortcut#{k}"]
        assert m.dtype == np.uint8 and set(np.unique(m)) <= {0, 1}, f"mask #{k}: {m.dtype} {np.unique(m)}"
    src = t["act/trf_blocks.0.att"]
    np.testing.assert_allclose(
        t["act/trf_blocks.0.drop_shortcut#0"], src * t["mask/trf_blocks.0.drop_shortcut#0"] / 0.75, rtol=1e-15
    )
    assert _manifest(path)["dropout"] == 0.25


def test_dropout_is_off_by_default_even_when_the_config_has_it(tmp_path):
    path = make_reference(tmp_path, cfg={**MICRO, "drop_rate": 0.5})
    t, _ = read_safetensors(path)
    assert not any(n.startswith("mask/") for n in t), "masks without --keep-dropout"
    np.testing.assert_array_equal(t["act/drop_emb"], t["act/tok_emb"] + t["act/pos_emb"], err_msg="drop_emb")
    assert _manifest(path)["cfg"]["drop_rate"] == 0.0


def test_npz_output_holds_the_same_tensors(tmp_path, ref64, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(MICRO))
    argv = [
        "reference",
        "--config",
        cfg,
        "--seed",
        "7",
        "--batch",
        "2",
        "--seq-len",
        "5",
        "--perturb-norms",
        "0.1",
    ]
    status, out, err = run(capsys, *argv, "-o", tmp_path / "r.npz")
    assert status == 0, err
    a, _ = read_safetensors(ref64)
    b = read_tensors(tmp_path / "r.npz")
    assert list(a) == [t["name"] for t in _manifest(tmp_path / "r.npz")["tensors"]]
    for n in a:
        np.testing.assert_array_equal(b[n], a[n], err_msg=n)


def test_adamw_steps_are_dumped_and_stated(tmp_path):
    path = make_reference(tmp_path, extra=["--adamw-steps", "2"])
    m = _manifest(path)
    assert m["adamw"]["steps"] == 2 and m["adamw"]["lr"] == 1e-3 and m["adamw"]["weight_decay"] == 0.1
    t, _ = read_safetensors(path)
    after = [n for n in t if n.startswith("param_after/")]
    assert len(after) == len([n for n in t if n.startswith("param/")]), "one param_after per param"
    assert all(e["phase"] == "update" for e in m["tensors"] if e["name"].startswith("param_after/"))
    d = t["param_after/out_head.weight"] - t["param/out_head.weight"]
    # each Adam step moves a weight by about lr (exactly lr on the first, |m_hat / sqrt(v_hat)| = 1)
    assert 1e-3 < np.abs(d).max() < 3e-3, f"two Adam steps of lr 1e-3 moved a weight by {np.abs(d).max()}"


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--model", "gpt2-xl", "--max-memory", "4"], "needs about"),
        (["--model", "nope"], "is not one of"),
        (["--model", "tiny", "--seq-len", "99"], "--seq-len must be in"),
        (["--model", "tiny", "--batch", "0"], "--batch must be >= 1"),
        (["--model", "tiny", "--text", "hi"], "--text needs --gpt2"),
        (["--model", "tiny", "--scale-weights", "0"], "--scale-weights"),
        (["--config", "{missing}"], "--config"),
        (["--config", "{garbage}"], "not valid JSON"),
        (["--config", "{badcfg}"], "n_heads"),
        (["--model", "tiny", "--from", "{garbage}"], "--from"),
        (["--model", "tiny-bias", "--from", "{ref}"], "no tensor for"),
    ],
)
def test_bad_arguments_are_one_line_errors_exit_2(tmp_path, capsys, ref64, argv, words):
    (tmp_path / "garbage.json").write_text("{nope")
    (tmp_path / "badcfg.json").write_text(json.dumps({**MICRO, "n_heads": 3}))
    names = {
        "{missing}": tmp_path / "none.json",
        "{garbage}": tmp_path / "garbage.json",
        "{badcfg}": tmp_path / "badcfg.json",
        "{ref}": ref64,
    }
    argv = [names.get(a, a) for a in argv]
    status, out, err = run(capsys, "reference", *argv, "-o", tmp_path / "o.safetensors")
    assert status == 2, f"exit {status} for {argv}: {err}"
    assert len(err.strip().splitlines()) == 1 and words in err, f"stderr {err!r} lacks {words!r}"
    assert not (tmp_path / "o.safetensors").exists(), "a file was written for bad input"


GPT2_TINY = Path(__file__).resolve().parents[1] / "fixtures" / "gpt2-tiny"


def test_gpt2_folder_with_text_uses_its_weights_tokenizer_and_tied_head(tmp_path, capsys):
    pytest.importorskip("tokenizers")
    sn = pytest.importorskip("safetensors.numpy")
    from tokenizers import ByteLevelBPETokenizer

    text = "Every effort moves you forward, one token at a time."
    status, out, err = run(
        capsys, "reference", "--gpt2", GPT2_TINY, "--text", text, "-o", tmp_path / "g.safetensors"
    )
    assert status == 0, err
    t, _ = read_safetensors(tmp_path / "g.safetensors")
    bpe = ByteLevelBPETokenizer.from_file(str(GPT2_TINY / "vocab.json"), str(GPT2_TINY / "merges.txt"))
    tokens = bpe.encode(text).ids
    np.testing.assert_array_equal(t["input/ids"][0], tokens[:-1], err_msg="input/ids from the tokenizer")
    np.testing.assert_array_equal(t["input/targets"][0], tokens[1:], err_msg="input/targets: the next tokens")
    hf = sn.load_file(str(GPT2_TINY / "model.safetensors"))
    wte = hf.get("wte.weight", hf.get("transformer.wte.weight"))
    np.testing.assert_array_equal(t["param/tok_emb.weight"], wte.astype(np.float64), err_msg="tok_emb = wte")
    np.testing.assert_array_equal(t["param/out_head.weight"], t["param/tok_emb.weight"], err_msg="tied head")
    np.testing.assert_array_equal(
        t["grad/out_head.weight"], t["grad/tok_emb.weight"], err_msg="tied gradient"
    )
    m = _manifest(tmp_path / "g.safetensors")
    assert m["tied_out_head"] and m["cfg"]["qkv_bias"] and m["seq_len"] == len(tokens) - 1


def test_compare_replays_a_tied_gpt2_dump_for_its_diagnosis(tmp_path, capsys):
    pytest.importorskip("tokenizers")
    ref = tmp_path / "g.safetensors"
    status, _, err = run(
        capsys, "reference", "--gpt2", GPT2_TINY, "--batch", "2", "--seq-len", "6", "-o", ref
    )
    assert status == 0, err
    t = {k: np.array(v) for k, v in read_safetensors(ref)[0].items()}
    name = "act/trf_blocks.1.norm2"
    t[name] = -t[name]
    from npgpt.golden.tensorfile import write_safetensors

    write_safetensors(tmp_path / "t.safetensors", t)
    status, out, _ = run(
        capsys, "compare", tmp_path / "t.safetensors", "--reference", ref, "--format", "json"
    )
    rep = json.loads(out)
    assert status == 1 and rep["first_divergence"] == name, rep["first_divergence"]
    assert any("-1 (the sign is wrong)" in d for d in rep["diagnosis"]), rep["diagnosis"]


def test_recording_refuses_the_fast_path():
    from npgpt.fast import accelerate, reference
    from npgpt.golden.record import record_step

    model = accelerate(GPTModel(MICRO, rng=0), threads=1)
    ids = np.zeros((1, 3), np.int64)
    with pytest.raises(ValueError, match="reference modules"):
        record_step(model, ids, ids)
    rec = record_step(reference(model), ids, ids)
    assert "act/trf_blocks.0.norm1" in rec.tensors, "the switched-back model records"
