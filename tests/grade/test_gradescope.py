"""The Gradescope autograder: the zip `npgpt grade --gradescope-zip` builds and the upload folder."""

import json
import os
import shutil
import stat
import zipfile

from npgpt.cli import main
from npgpt.grade.gradescope import pick

HERE = os.path.join(os.path.dirname(__file__), "submissions")


def test_the_zip_holds_the_scripts_and_the_package(tmp_path, capsys):
    out = tmp_path / "autograder.zip"
    assert main(["grade", "--gradescope-zip", str(out), "--only", "layernorm,gelu"]) == 0
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        setup = z.read("setup.sh").decode()
        run = z.read("run_autograder").decode()
        modes = {n: (z.getinfo(n).external_attr >> 16) & 0o777 for n in ("setup.sh", "run_autograder")}
    assert {
        "setup.sh",
        "run_autograder",
        "npgpt-src/npgpt/grade/sandbox.py",
        "npgpt-src/npgpt/grade/rubric.json",
    } <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert modes == {"setup.sh": 0o755, "run_autograder": 0o755}, modes
    assert "bubblewrap" in setup and "--self-test" in setup and "--require-sandbox" in setup
    assert "chmod -R go-rwx /opt/npgpt/grader /autograder/source" in setup
    assert "grade /autograder/submission --format gradescope" in run and "submission.py" not in run
    assert "--only layernorm,gelu" in run
    assert f"wrote {out}" in capsys.readouterr().out


def test_the_uploaded_file_is_found_whatever_its_name(tmp_path):
    up = tmp_path / "submission"
    up.mkdir()
    assert pick(str(up))[0] is None and "no .py file was uploaded" in pick(str(up))[1]
    shutil.copy(os.path.join(HERE, "ln_unbiased.py"), up / "layernorm.py")
    assert pick(str(up)) == (str(up / "layernorm.py"), "")
    (up / "helpers.py").write_text("X = 1\n")
    assert pick(str(up)) == (str(up / "layernorm.py"), "")  # the one that defines graded classes
    shutil.copy(os.path.join(HERE, "ln_unbiased.py"), up / "other.py")
    assert "several uploaded files" in pick(str(up))[1]
    shutil.copy(os.path.join(HERE, "correct.py"), up / "submission.py")
    assert pick(str(up)) == (str(up / "submission.py"), "")


def test_an_upload_folder_is_graded_and_a_missing_file_still_writes_results(tmp_path, capsys):
    up, res = tmp_path / "submission", tmp_path / "results" / "results.json"
    up.mkdir()
    shutil.copy(os.path.join(HERE, "correct.py"), up / "layernorm.py")
    args = ["grade", str(up), "--format", "gradescope", "--results", str(res), "--only", "layernorm,gelu"]
    assert main(args + ["--seed", "1"]) == 0
    data = json.loads(res.read_text())
    assert data["score"] == 20.0, data["output"][:500]
    assert data["extra_data"]["sandbox"]["mode"] in ("bwrap", "user", "none")
    os.remove(up / "layernorm.py")
    assert main(args) == 0
    data = json.loads(res.read_text())
    assert data["score"] == 0 and len(data["tests"]) == 18, data["output"]
    assert "no .py file was uploaded" in data["output"]
    assert all(t["max_score"] > 0 for t in data["tests"]) and sum(t["max_score"] for t in data["tests"]) == 20


def test_an_unreadable_file_scores_zero_with_a_reason_in_gradescope_mode(tmp_path):
    res = tmp_path / "results.json"
    assert main(["grade", str(tmp_path / "gone.py"), "--format", "gradescope", "--results", str(res)]) == 0
    data = json.loads(res.read_text())
    assert data["score"] == 0 and "cannot read the submission gone.py: no such file" in data["output"]


def test_setup_files_are_executable_on_unzip(tmp_path):
    out = tmp_path / "a.zip"
    assert main(["grade", "--gradescope-zip", str(out)]) == 0
    with zipfile.ZipFile(out) as z:
        z.extractall(tmp_path / "x")
        for n in ("setup.sh", "run_autograder"):
            os.chmod(tmp_path / "x" / n, (z.getinfo(n).external_attr >> 16) & 0o777)
    assert os.stat(tmp_path / "x" / "setup.sh").st_mode & stat.S_IXUSR


def test_a_refused_sandbox_still_leaves_a_zero_results_file(tmp_path, capsys):
    res = tmp_path / "results.json"
    sub = os.path.join(HERE, "correct.py")
    args = ["grade", sub, "--format", "gradescope", "--results", str(res), "--only", "gelu"]
    assert main(args + ["--sandbox", "none", "--require-sandbox"]) == 2
    assert "npgpt grade: --require-sandbox:" in capsys.readouterr().err
    data = json.loads(res.read_text())
    assert data["score"] == 0 and "sandbox does not work here; tell the instructor" in data["output"]
    assert data["tests"] and all(t["score"] == 0 for t in data["tests"])
