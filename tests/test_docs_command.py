"""`npgpt docs PAGE`: the derivation pages in the terminal, read from where a pip install puts
them (setup.cfg's data_files), formulas as Unicode (pylatexenc) or, without it, as LaTeX."""

import argparse
import configparser
import glob
import pathlib
import re
import shutil
import sysconfig

import pytest

from npgpt.commands import docs as docs_cmd

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main(argv):
    parser = argparse.ArgumentParser(prog="npgpt docs")
    docs_cmd.add_arguments(parser)
    return docs_cmd.run(parser.parse_args(argv))


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The pages laid out as setup.cfg's data_files installs them under a prefix, and no checkout."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    for target, patterns in cfg["options.data_files"].items():
        dest = tmp_path / target
        dest.mkdir(parents=True, exist_ok=True)
        for pattern in patterns.split():
            for src in glob.glob(str(ROOT / pattern)):
                shutil.copy(src, dest)
    monkeypatch.setattr(docs_cmd, "CHECKOUT", tmp_path / "no-checkout")
    real = sysconfig.get_path
    monkeypatch.setattr(
        sysconfig, "get_path", lambda name, *a: str(tmp_path) if name == "data" else real(name, *a)
    )
    return tmp_path / "share" / "npgpt" / "docs"


def test_layernorm_page_from_the_installed_data_files(installed, capsys):
    assert main(["layernorm", "--path"]) == 0
    assert capsys.readouterr().out.strip() == str(installed / "layernorm.md"), "not read from the install"
    pytest.importorskip("pylatexenc", reason="the docs-text extra turns LaTeX into Unicode")
    assert main(["layernorm"]) == 0
    out = capsys.readouterr().out
    tags = re.findall(r"\\tag\{(\d+)\}", (ROOT / "docs" / "layernorm.md").read_text())
    for n in tags:
        assert f"({n})" in out, f"equation ({n}) is not shown in `npgpt docs layernorm`"
    for tex in ("$$", "\\frac", "\\mathtt", "\\sum", "\\tag"):
        assert tex not in out, f"raw LaTeX {tex!r} left in `npgpt docs layernorm`"
    assert "∑" in out and "rstd" in out, out[:500]


def test_every_page_is_installed(installed):
    stems = {p.stem for p in (ROOT / "docs").glob("*.md")}
    got = {p.stem for p in installed.glob("*.md")}
    assert stems == got, f"pages not installed by setup.cfg's data_files: {sorted(stems - got)}"
    from npgpt.registry import COMPONENTS

    for c in COMPONENTS:
        assert docs_cmd.find_page(c.name).parent == installed, c.name


@pytest.mark.parametrize(
    "name, stem",
    [("MultiHeadAttention", "attention"), ("loss", "loss"), ("crossentropy", "loss"), ("GPTModel", "model")],
)
def test_class_names_and_aliases(name, stem):
    assert docs_cmd.find_page(name).stem == stem, name


def test_unknown_page_is_a_one_line_error(capsys):
    assert main(["bogus"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bogus" in err and "layernorm" in err, err


def test_without_pylatexenc_formulas_stay_latex(monkeypatch, capsys):
    monkeypatch.setattr(docs_cmd, "_latex_to_text", lambda: None)
    assert main(["gelu"]) == 0
    out = capsys.readouterr().out
    assert "pip install 'npgpt[docs-text]'" in out and "\\tanh" in out, out[:400]
    assert "$$" not in out and "(5)" in out, "display formulas must still be set apart and numbered"


def test_every_page_renders_without_raw_markup():
    pytest.importorskip("pylatexenc")
    for page in sorted((ROOT / "docs").glob("*.md")):
        out = docs_cmd.render(page.read_text(), docs_dir=page.parent)
        left = [s for s in ("$$", "\\tag", "--8<--", "<!--") if s in out]
        assert not left, f"npgpt docs {page.stem}: {left} left in the text"
