"""One registry names the components for every command (npgpt/registry.py).

The expected names, aliases and classes are the contract's (docs/api.md, "Component names"),
written out here rather than read from the registry. Every command accepts every name and alias
it supports, alone and in comma lists; an unknown name exits 2 with a one-line error listing the
valid names; a name a command does not support exits 2 listing what that command supports.
"""

import argparse
import importlib
import pathlib

import pytest

import npgpt
from npgpt import registry
from npgpt.registry import UnknownComponent, resolve, resolve_list, supported

ROOT = pathlib.Path(__file__).resolve().parents[1]

# name -> (class name, file stem, extra aliases), as the contract lists them
CONTRACT = {
    "layernorm": ("LayerNorm", "layernorm", ()),
    "gelu": ("GELU", "gelu", ()),
    "linear": ("Linear", "linear", ()),
    "dropout": ("Dropout", "dropout", ()),
    "embedding": ("Embedding", "embedding", ()),
    "feedforward": ("FeedForward", "feedforward", ()),
    "attention": ("MultiHeadAttention", "attention", ()),
    "block": ("TransformerBlock", "block", ()),
    "crossentropy": ("CrossEntropyLoss", "loss", ("loss",)),
    "model": ("GPTModel", "model", ()),
}
# what each command supports (docs/grading.md lists the graded ones; bench times the 124M
# components and, as "model", the training step)
SUPPORTS = {
    "check": list(CONTRACT),
    "explain": list(CONTRACT),
    "grade": ["layernorm", "gelu", "linear", "feedforward", "attention", "block", "crossentropy"],
    "assignment": ["layernorm", "gelu", "linear", "feedforward", "attention", "block", "crossentropy"],
    "bench": ["layernorm", "gelu", "feedforward", "attention", "block", "model"],
}


def spellings(name):
    """Every way to write `name`: itself, its class name as written, lower and upper, aliases."""
    cls, _, aliases = CONTRACT[name]
    return [name, cls, cls.lower(), cls.upper(), name.upper(), *aliases]


def run(command, argv, capsys):
    """`npgpt <command> <argv>` with only that command's module loaded; (status, stdout, stderr)."""
    mod = importlib.import_module(f"npgpt.commands.{command}")
    parser = argparse.ArgumentParser(prog=f"npgpt {command}")
    mod.add_arguments(parser)
    status = mod.run(parser.parse_args(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_the_registry_holds_the_contract_names_in_order():
    assert registry.NAMES == tuple(CONTRACT), f"registry names {registry.NAMES}, contract {tuple(CONTRACT)}"
    for name, (cls, stem, _) in CONTRACT.items():
        c = resolve(name)
        assert c.cls is getattr(npgpt, cls), f"{name}: class {c.cls}, expected npgpt.{cls}"
        assert c.stem == stem and c.doc == f"docs/{stem}.md", f"{name}: stem {c.stem}, doc {c.doc}"
        assert (ROOT / c.doc).is_file(), f"{name}: its docs page {c.doc} does not exist"
        code = [ROOT / "npgpt" / "layers" / f"{stem}.py", ROOT / "npgpt" / f"{stem}.py"]
        assert any(p.is_file() for p in code), f"{name}: no npgpt/layers/{stem}.py or npgpt/{stem}.py"


@pytest.mark.parametrize("name", list(CONTRACT))
def test_every_spelling_resolves_to_its_component(name):
    for spelling in spellings(name) + [f"  {name} "]:
        assert resolve(spelling).name == name, f"{spelling!r} resolved to {resolve(spelling).name}"


@pytest.mark.parametrize("command", list(SUPPORTS))
def test_each_command_supports_what_it_should(command):
    got = [c.name for c in supported(command)]
    assert got == SUPPORTS[command], f"{command} supports {got}, expected {SUPPORTS[command]}"
    for name in SUPPORTS[command]:
        for spelling in spellings(name):
            assert resolve(spelling, command).name == name, f"{command}: {spelling!r}"
    for name in set(CONTRACT) - set(SUPPORTS[command]):
        with pytest.raises(UnknownComponent) as e:
            resolve(name, command)
        msg = str(e.value)
        assert f"{command} does not support it" in msg and "\n" not in msg, msg
        assert msg.endswith(", ".join(SUPPORTS[command]).replace("crossentropy", "crossentropy (loss)")), msg


def test_an_unknown_name_lists_every_valid_name_on_one_line():
    for command in [None, *SUPPORTS]:
        with pytest.raises(UnknownComponent) as e:
            resolve("softmax", command)
        msg = str(e.value)
        assert msg.startswith("unknown component 'softmax'; valid names: ") and "\n" not in msg, msg
        for name in CONTRACT:
            assert name in msg, f"{name} missing from {msg!r}"
        assert "crossentropy (loss)" in msg, msg


def test_comma_lists_keep_registry_order_drop_repeats_and_take_all():
    got = [c.name for c in resolve_list("attention, CrossEntropyLoss,gelu,loss", "check")]
    assert got == ["gelu", "attention", "crossentropy"], got
    got = [c.name for c in resolve_list(["block", "linear,layernorm"])]
    assert got == ["layernorm", "linear", "block"], got
    assert [c.name for c in resolve_list("all", "grade")] == SUPPORTS["grade"]
    with pytest.raises(UnknownComponent, match="no component named"):
        resolve_list(" , ", "check")
    with pytest.raises(UnknownComponent, match="unknown component 'bogus'"):
        resolve_list("gelu,bogus", "check")


def test_commands_reject_an_unknown_name_with_exit_2(capsys):
    argvs = {
        "check": ["--only", "gelu,bogus"],
        "grade": [str(ROOT / "tests" / "grade" / "submissions" / "correct.py"), "--only", "bogus"],
        "assignment": ["bogus"],
        "explain": ["bogus"],
        "bench": ["--only", "bogus", "--no-torch"],
    }
    for command, argv in argvs.items():
        status, out, err = run(command, argv, capsys)
        assert status == 2, f"npgpt {command} {argv}: exit {status}, expected 2"
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "unknown component 'bogus'; valid names: layernorm, gelu" in lines[0], err
        assert out == "", f"npgpt {command} printed on stdout: {out[:200]!r}"


def test_commands_reject_an_unsupported_name_with_what_they_support(capsys):
    argvs = {
        "grade": [str(ROOT / "tests" / "grade" / "submissions" / "correct.py"), "--only", "model"],
        "assignment": ["dropout"],
        "bench": ["--only", "linear", "--no-torch"],
    }
    for command, argv in argvs.items():
        status, _, err = run(command, argv, capsys)
        assert status == 2, f"npgpt {command} {argv}: exit {status}"
        assert f"{command} does not support it; {command} supports: " in err, err
        assert len(err.strip().splitlines()) == 1, err


def test_check_accepts_every_spelling_in_one_comma_list(capsys):
    every = ",".join(s for name in CONTRACT for s in spellings(name))
    status, out, _ = run("check", ["--only", every], capsys)
    assert status == 0, out[-500:]
    rows = {line.split()[0] for line in out.splitlines()[2:] if line and not line.startswith("all")}
    want = {case.label for c in supported("check") for case in c.check}
    assert {cls for cls, _, _ in CONTRACT.values()} <= want, want
    assert rows == want, f"checked {sorted(rows)}, expected {sorted(want)}"


@pytest.mark.parametrize(
    "command, name",
    [("explain", n) for n in SUPPORTS["explain"]] + [("assignment", n) for n in SUPPORTS["assignment"]],
)
def test_explain_and_assignment_accept_every_spelling(command, name, capsys):
    outs = set()
    for spelling in spellings(name):
        status, out, err = run(command, [spelling], capsys)
        assert status == 0, f"npgpt {command} {spelling}: exit {status}: {err}"
        outs.add(out)
    assert len(outs) == 1, f"npgpt {command}: the spellings of {name} print different things"
    cls = CONTRACT[name][0]
    want = f"matches npgpt.{cls}.backward" if command == "explain" else f"class {cls}(Module)"
    assert want in outs.pop(), f"npgpt {command} {name}: no {want!r} in its output"


def test_assignment_takes_comma_lists_and_brings_what_a_component_needs(capsys):
    _, one, _ = run("assignment", ["gelu,MultiHeadAttention"], capsys)
    _, two, _ = run("assignment", ["GELU", "attention"], capsys)
    assert one == two, "a comma list and separate names give different files"
    classes = [line.split()[1].split("(")[0] for line in one.splitlines() if line.startswith("class ")]
    assert classes == ["GELU", "Linear", "MultiHeadAttention"], classes


def test_grade_only_accepts_every_spelling():
    from npgpt.commands.grade import _components

    for name in SUPPORTS["grade"]:
        for spelling in spellings(name):
            assert _components(spelling) == [name], f"grade --only {spelling}"
    every = ",".join(s for name in SUPPORTS["grade"] for s in spellings(name))
    assert _components(every) == SUPPORTS["grade"]
    assert _components("loss,GELU,all") == SUPPORTS["grade"]


def test_grade_grades_what_a_comma_list_of_aliases_names(capsys):
    sub = str(ROOT / "tests" / "grade" / "submissions" / "correct.py")
    status, out, err = run("grade", [sub, "--only", "Loss,gelu", "--seed", "1"], capsys)
    assert status == 0, err
    graded = {line.split()[2].split(".")[0] for line in out.splitlines() if line.startswith("  PASS")}
    assert graded == {"GELU", "CrossEntropyLoss"}, out
    assert "total: 20/20" in out, out


def test_bench_only_takes_names_parts_and_aliases():
    from npgpt.commands.bench import parts

    assert parts(None) == (True, True) and parts("components") == (True, False)
    assert parts("steps") == (False, True)
    comps, steps = parts("MultiHeadAttention,layernorm")
    assert [c.name for c in comps] == ["layernorm", "attention"] and steps is False
    comps, steps = parts("GPTModel")
    assert comps is False and steps is True
    for name in SUPPORTS["bench"]:
        for spelling in spellings(name):
            comps, steps = parts(spelling)
            got = [c.name for c in comps or []] + (["model"] if steps else [])
            assert got == [name], f"bench --only {spelling}: {got}"


def test_bench_times_the_components_named(capsys):
    status, out, err = run(
        "bench",
        [
            "--quick",
            "--only",
            "gelu,TransformerBlock",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--no-peak",
            "--no-torch",
        ],
        capsys,
    )
    assert status == 0, err
    timed = [
        line.split()[0] for line in out.splitlines() if line.startswith(("GELU", "Transformer", "Layer"))
    ]
    assert timed == ["GELU", "TransformerBlock"], out
    assert "step B" not in out, f"the step was timed though only components were named:\n{out}"


def test_the_registry_and_the_grader_hold_the_reference_classes():
    """Every command builds the reference (npgpt/layers/<stem>.py, npgpt/<stem>.py), never a
    fast twin: the grader's expected answers come from it."""
    from npgpt.grade.components import SPECS, reference_module

    for c in registry.COMPONENTS:
        where = {f"npgpt.layers.{c.stem}", f"npgpt.{c.stem}"}
        assert c.cls.__module__ in where, (
            f"{c.name}: {c.cls.__module__}.{c.cls.__name__} is not the reference"
        )
    for key, spec in SPECS.items():
        m = reference_module(spec)
        assert type(m) is resolve(key).cls, f"grade builds {type(m).__module__}.{type(m).__name__} for {key}"
        assert not type(m).__module__.startswith("npgpt.fast"), f"grade {key}: {type(m).__module__}"
