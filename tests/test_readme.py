"""The README's Python examples run as written (so they cannot drift from the code)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_blocks_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "README.md has no ```python example"
    for i, code in enumerate(blocks):
        exec(compile(code, f"README.md python block {i}", "exec"), {})
    out = capsys.readouterr().out
    assert "gradcheck LayerNorm" in out and "overall: PASS" in out, out


def test_readme_file_table_names_files_that_exist():
    """The "where things are" table: every repository path it names is there (files move)."""
    root = README.parent
    paths = re.findall(r"^\| `([^`]+)`(?:, `([^`]+)`)? \|", README.read_text(encoding="utf-8"), flags=re.M)
    named = [p for pair in paths for p in pair if p]
    assert len(named) >= 10, f"README.md file table not found (parsed {named})"
    missing = [p for p in named if not (root / p).exists()]
    assert not missing, f"README.md names paths that do not exist: {missing}"
