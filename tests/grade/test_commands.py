"""`npgpt grade` output formats, exit status, folders; `npgpt assignment` starter files."""

import csv
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

import npgpt
from npgpt.cli import main

HERE = os.path.join(os.path.dirname(__file__), "submissions")
GRADESCOPE_STATUSES = {"passed", "failed"}
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}


def test_gradescope_results_follow_the_specification(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert (
        main(
            [
                "grade",
                os.path.join(HERE, "gelu_no_sech2.py"),
                "--format",
                "gradescope",
                "--results",
                str(out),
                "--seed",
                "4",
            ]
        )
        == 0
    )
    data = json.loads(out.read_text())
    assert {"score", "execution_time", "output", "tests"} <= set(data)
    assert data["score"] == pytest.approx(sum(t["score"] for t in data["tests"])) == 4.5
    for t in data["tests"]:
        assert set(t) == {"name", "score", "max_score", "status", "output", "visibility"}, t
        assert t["status"] in GRADESCOPE_STATUSES and t["visibility"] in VISIBILITIES
        assert (t["status"] == "passed") == (t["score"] == t["max_score"])
    dx = next(t for t in data["tests"] if t["name"] == "GELU.backward: dx")
    assert "worst element at index" in dx["output"] and "diagnosis: it matches" in dx["output"]


def test_only_names_a_missing_component_which_scores_zero(capsys):
    assert main(["grade", os.path.join(HERE, "ce_not_divided.py"), "--only", "gelu", "--seed", "1"]) == 0
    text = capsys.readouterr().out
    assert "defines neither class GELU nor functions gelu_forward/gelu_backward" in text
    assert "total: 0/10" in text


def test_bad_arguments_exit_2(capsys):
    assert main(["grade", os.path.join(HERE, "correct.py"), "--only", "softmax"]) == 2
    assert "unknown component 'softmax'; valid names: layernorm," in capsys.readouterr().err


def test_folder_is_graded_in_parallel_into_a_csv(tmp_path, capsys):
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(os.path.join(HERE, "linear_overwrites_grad.py"), subs / "alice.py")
    (subs / "bob").mkdir()
    shutil.copy(os.path.join(HERE, "syntax_error.py.txt"), subs / "bob" / "submission.py")
    out = tmp_path / "out"
    assert (
        main(["grade", str(subs), "--jobs", "2", "--only", "linear", "--seed", "1", "--results", str(out)])
        == 0
    )
    rows = list(csv.DictReader(open(out / "grades.csv")))
    assert [r["submission"] for r in rows] == ["alice", "bob"]
    assert [float(r["score"]) for r in rows] == [9.5, 0.0]
    assert rows[0]["Linear.backward: accumulation (+=) into .grad"] == "0.0"
    assert rows[0]["Linear.forward: out"] == "2.0"
    assert sorted(os.listdir(out)) == ["alice.json", "alice.txt", "bob.json", "bob.txt", "grades.csv"]


@pytest.mark.parametrize(
    "name", ["layernorm", "gelu", "linear", "feedforward", "attention", "block", "crossentropy", "all"]
)
def test_starter_file_imports_and_grades_to_zero_without_crashing(tmp_path, capsys, name):
    path = tmp_path / f"{name}_starter.py"
    assert main(["assignment", name, "-o", str(path)]) == 0
    spec = importlib.util.spec_from_file_location("starter", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert issubclass(
        mod.LayerNorm if name == "layernorm" else getattr(mod, "Linear", mod.Module), npgpt.Module
    )
    result = tmp_path / "r.json"
    assert main(["grade", str(path), "--format", "json", "--results", str(result), "--seed", "1"]) == 0
    data = json.loads(result.read_text())
    assert data["score"] == 0 and data["max_score"] > 0
    first = data["components"][0]["tests"][0]["output"]
    assert "NotImplementedError" in first and "see `npgpt docs " in first, first
    capsys.readouterr()
    main(["grade", str(path), "--seed", "1"])
    text = capsys.readouterr().out
    page = {"crossentropy": "crossentropy", "all": "layernorm"}.get(name, name)
    assert f"derivation: npgpt docs {page}" in text, f"the report does not point at the page:\n{text}"


def test_starter_declares_the_contract_parameters(tmp_path, capsys):
    path = tmp_path / "all.py"
    main(["assignment", "all", "-o", str(path)])
    spec = importlib.util.spec_from_file_location("starter_all", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = {"emb_dim": 8, "context_length": 5, "n_heads": 2, "drop_rate": 0.0, "qkv_bias": False}
    ours = [n for n, _ in npgpt.TransformerBlock(cfg).named_parameters()]
    assert [n for n, _ in mod.TransformerBlock(cfg).named_parameters()] == ours
    assert main(["assignment", "all", "-o", str(path)]) == 2  # no silent overwrite


def test_grader_works_from_a_copy_of_the_package_elsewhere(tmp_path):
    """As when installed: the worker finds npgpt's files by the package's path, not the cwd."""
    site = tmp_path / "site"
    shutil.copytree(
        os.path.dirname(npgpt.__file__), site / "npgpt", ignore=shutil.ignore_patterns("__pycache__")
    )
    boot = "import sys; sys.path.insert(0, sys.argv.pop(1)); from npgpt.cli import main; sys.exit(main())"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            boot,
            str(site),
            "grade",
            os.path.join(HERE, "correct.py"),
            "--only",
            "gelu",
            "--seed",
            "1",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "total: 10/10" in proc.stdout, proc.stdout


def test_a_missing_submission_file_still_gives_a_valid_zero_report(tmp_path, capsys):
    results = tmp_path / "results.json"
    status = main(["grade", str(tmp_path / "absent.py"), "--format", "gradescope", "--results", str(results)])
    assert status == 0
    report = json.loads(results.read_text())
    assert report["score"] == 0 and report["tests"], report
    assert "cannot read the submission" in report["output"], report["output"]


def test_a_missing_file_is_a_one_line_usage_error(capsys):
    assert main(["grade", "/nonexistent.py"]) == 2
    err = capsys.readouterr().err
    assert err == "npgpt grade: /nonexistent.py: no such file\n", err


def test_an_unisolated_run_says_so_on_its_first_line_and_require_sandbox_refuses(capsys, tmp_path):
    sub = os.path.join(HERE, "correct.py")
    assert main(["grade", sub, "--only", "gelu", "--seed", "1", "--sandbox", "none"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("WARNING: this run is NOT ISOLATED (sandbox mode none)"), out[:200]
    assert "total: 10/10" in out
    assert main(["grade", sub, "--sandbox", "none", "--require-sandbox"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("npgpt grade: --require-sandbox: the submission runs as") and err.count("\n") == 1
    ), err
    res = tmp_path / "r.json"
    assert (
        main(["grade", sub, "--only", "gelu", "--sandbox", "none", "--format", "json", "--results", str(res)])
        == 0
    )
    assert json.loads(res.read_text())["sandbox"] == {
        "mode": "none",
        "isolated": False,
        "detail": json.loads(res.read_text())["sandbox"]["detail"],
        "memory": "RLIMIT_AS per process",
    }


def test_the_sandbox_self_test_passes_in_the_isolated_mode(capsys):
    from npgpt.grade import sandbox

    try:
        box = sandbox.choose("auto")
    except sandbox.SandboxError as e:
        pytest.skip(str(e))
    if not box.isolated:
        pytest.skip(f"no sandbox here: {box.detail}")
    assert main(["grade", "--self-test", "--require-sandbox"]) == 0
    out = capsys.readouterr().out
    for check in (
        "read reference: blocked",
        "network: blocked",
        "signal grader: blocked",
        "self-test: passed",
    ):
        assert check in out, out


def test_scores_add_up_exactly_to_the_total(tmp_path):
    from fractions import Fraction

    from npgpt.grade.grader import grade

    rubric = tmp_path / "r.json"
    rubric.write_text(json.dumps({"points": {"param_grads": 1, "numeric": 0.7}}))  # 1/12 per block grad
    from npgpt.grade.rubric import Rubric

    r = grade(os.path.join(HERE, "correct.py"), seed=2, rubric=Rubric.load(str(rubric)))
    exact = lambda v: Fraction(repr(v))  # noqa: E731  (the decimal the JSON shows)
    assert sum(exact(t.max_score) for t in r.tests) == exact(r.max_score), r.max_score
    assert sum(exact(t.score) for t in r.tests) == exact(r.score), r.score
    # by hand: forward 2, dx 2, param_grads 1, accumulate 0.5, numeric 0.7, 4 x 0.5 (dtype, edges);
    # GELU and CrossEntropyLoss: forward 3, dx 3, no parameters
    expected = {"gelu": Fraction(92, 10), "crossentropy": Fraction(92, 10)}
    for c in r.components:
        total = sum(exact(t.max_score) for t in c.tests)
        assert total == expected.get(c.key, Fraction(82, 10)), f"{c.cls}: max {total}"
        grads = [exact(t.max_score) for t in c.tests if t.kind == "param_grads"]
        assert not grads or sum(grads) == 1, f"{c.cls}: parameter gradients share {sum(grads)}, not 1"
        assert all((exact(t.max_score) * 10_000).denominator == 1 for t in c.tests), c.cls
    assert r.score == r.max_score == 59.4, (r.score, r.max_score)


def test_a_grader_killed_by_its_submission_costs_only_that_row(tmp_path, capsys):
    """Unsandboxed (--sandbox none) a submission can kill its grader; the folder run goes on."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    shutil.copy(os.path.join(HERE, "correct.py"), subs / "a_correct.py")
    (subs / "b_killer.py").write_text(
        "import os, signal\n\nos.kill(os.getppid(), signal.SIGKILL)  # its own grader only\n\n\n"
        "class GELU:\n    pass\n"
    )
    args = ["grade", str(subs), "--only", "gelu", "--seed", "1", "--sandbox", "none", "--results", str(out)]
    assert main(args + ["--jobs", "2"]) == 0
    with open(out / "grades.csv", newline="") as f:
        rows = {r["submission"]: r for r in csv.DictReader(f)}
    assert float(rows["a_correct"]["score"]) == 10.0, rows["a_correct"]
    assert rows["b_killer"]["score"] == "0" and rows["b_killer"]["error"], rows["b_killer"]
    # the killed grader could not remove its jail; the next grader sweeps it
    assert main(["grade", str(subs / "a_correct.py"), "--only", "gelu", "--sandbox", "none"]) == 0
    tmp = tempfile.gettempdir()
    stale = [
        d
        for d in os.listdir(tmp)
        if re.match(r"npgpt-jail-(\d+)-", d) and not os.path.exists(f"/proc/{d.split('-')[2]}")
    ]
    assert not stale, f"jails of dead graders left in {tmp}: {stale}"


def test_a_submission_that_is_a_symbolic_link_is_not_followed(tmp_path, capsys):
    """A link to a file the grader (root) may read would otherwise put that file in the sandbox."""
    link = tmp_path / "sub.py"
    link.symlink_to(os.path.join(HERE, "correct.py"))
    assert main(["grade", str(link), "--only", "gelu", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "cannot read the submission: it is a symbolic link" in out and "total: 0/10" in out, out
