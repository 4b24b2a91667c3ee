"""The docs match the code: every code line quoted in docs/ exists in the file it names, every
repository path the docs and the module docstrings name exists, and no docstring points outside
the repository.

How a page quotes code (docs/index.md, "How to read a page", says it in short):
- a fenced block with a title naming the file, ```` ```{ .python title="npgpt/layers/gelu.py" } ````:
  each of its lines, stripped, is a line of that file, in the file's order (a line `...` skips
  any number of lines); a block whose body is a `--8<--` include is the file itself;
- inline, "the line `CODE` of `npgpt/x.py`": a code span right after the word "line" (or
  "lines", for several spans) is a stripped line of a file named in the same paragraph.
A code span that reads like a quoted line (an assignment with a trailing `# comment`) must be
written in the inline form, so a quote cannot drop its file.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
TOP = ("npgpt", "docs", "tests", "benchmarks", "scripts", "examples")  # the repository's folders

FENCE = re.compile(r"^```(\{[^}\n]*\}|[^\n]*)\n(.*?)^```", re.M | re.S)
TITLE = re.compile(r'title="([^"]+)"')
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
QUOTE_LEAD = re.compile(r"\blines?\s*$", re.I)
LOOKS_QUOTED = re.compile(r"^[A-Za-z_][\w.\[\], ]*\s[-+*/]?=\s.+\s#\s")
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(TOP) + r")/[\w./-]*)")


def file_lines(rel):
    return [line.strip() for line in (ROOT / rel).read_text().splitlines()]


def in_order(quoted, lines):
    """The first quoted line not found in `lines` at or after the previous one's position, or None."""
    at = 0
    for q in quoted:
        if q == "...":
            continue
        try:
            at = lines.index(q, at) + 1
        except ValueError:
            return q
    return None


def fenced_quotes(text):
    """(file, [stripped lines]) for each titled fenced block that is not an include."""
    for m in FENCE.finditer(text):
        title = TITLE.search(m.group(1))
        body = [line.strip() for line in m.group(2).splitlines() if line.strip()]
        if title and not any(line.startswith("--8<--") for line in body):
            yield title.group(1), body


def paragraphs(text):
    """The page's prose paragraphs, fenced blocks removed."""
    return re.split(r"\n\s*\n", FENCE.sub("", text))


def inline_quotes(par):
    """The code spans of a paragraph that are quotes: right after "line"/"lines", or continuing
    a list of them ("lines `a` and `b`")."""
    quotes, after_lead = [], False
    pos = 0
    for m in SPAN.finditer(par):
        between = par[pos : m.start()]
        if QUOTE_LEAD.search(par[: m.start()]) or (after_lead and re.fullmatch(r",?\s*(and\s*)?", between)):
            quotes.append(m.group(1))
            after_lead = True
        else:
            after_lead = False
        pos = m.end()
    return quotes


def named_files(par):
    return [p for p in PATH.findall(par) if (ROOT / p).is_file()]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_fenced_quotes_are_in_the_file_they_name(page):
    for rel, body in fenced_quotes(page.read_text()):
        assert (ROOT / rel).is_file(), f"{page.name}: a block quotes {rel}, which does not exist"
        missing = in_order(body, file_lines(rel))
        assert missing is None, (
            f"{page.name}: the block titled {rel} quotes {missing!r}, not in that file (in order)"
        )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_inline_quotes_are_lines_of_a_file_the_paragraph_names(page):
    for par in paragraphs(page.read_text()):
        quotes = inline_quotes(par)
        if not quotes:
            continue
        files = named_files(par)
        assert files, f"{page.name}: quotes {quotes[0]!r} in a paragraph that names no file of the repository"
        for q in quotes:
            assert any(q.strip() in file_lines(f) for f in files), (
                f"{page.name}: the quoted line {q!r} is in none of {', '.join(files)}"
            )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_what_reads_like_a_quoted_line_is_written_as_a_quote(page):
    for par in paragraphs(page.read_text()):
        quotes = inline_quotes(par)
        for m in SPAN.finditer(par):
            span = m.group(1)
            if LOOKS_QUOTED.match(span):
                assert span in quotes, (
                    f"{page.name}: {span!r} reads like a line of code but does not say which file "
                    "it is from: write 'the line `...` of `npgpt/...py`'"
                )


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda p: p.name)
def test_paths_the_docs_name_exist(page):
    text = page.read_text()
    for span in SPAN.findall(text) + [t for _, t in re.findall(r"\[([^\]]*)\]\(([^)]+)\)", text)]:
        for path in PATH.findall(span):
            if re.search(r"[<>*{]", path):
                continue  # a pattern such as docs/<stem>.md
            assert (ROOT / path.rstrip(".")).exists(), f"{page.name} names {path}, which does not exist"


def docstrings():
    for p in sorted((ROOT / "npgpt").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(p.read_text()))
        if doc:
            yield p.relative_to(ROOT), doc


@pytest.mark.parametrize(
    "module, doc", list(docstrings()), ids=lambda v: str(v) if isinstance(v, pathlib.Path) else ""
)
def test_module_docstrings_point_at_files_in_the_repository(module, doc):
    assert "../" not in doc, f"{module}: its docstring points outside the repository: {doc[:300]!r}"
    for path in PATH.findall(doc):
        if re.search(r"[<>*{]", path):
            continue
        assert (ROOT / path.rstrip(".")).exists(), (
            f"{module}: its docstring names {path}, which does not exist"
        )
    for name in re.findall(r"(?<![\w/.-])([\w-]+\.md)\b", doc):
        assert (ROOT / name).is_file(), (
            f"{module}: its docstring names {name}, not a file at the repository's top"
        )


def test_the_quote_finders_catch_what_they_must():
    """The convention's parsers on small made-up pages: a quote is found and checked, a stray
    quote-like span is caught, a missing file is reported (so the page tests cannot pass empty)."""
    page = "the line `x = 1  # one` of `npgpt/a.py`, and lines `a`, `b` and `c`.\n\ntext `d = 2  # two`"
    pars = paragraphs(page)
    assert inline_quotes(pars[0]) == ["x = 1  # one", "a", "b", "c"], inline_quotes(pars[0])
    assert inline_quotes(pars[1]) == [] and LOOKS_QUOTED.match("d = 2  # two")
    block = '```{ .python title="npgpt/layers/linear.py" }\nimport numpy as np\n...\nreturn dx\n```\n'
    assert list(fenced_quotes(block)) == [
        ("npgpt/layers/linear.py", ["import numpy as np", "...", "return dx"])
    ]
    assert in_order(["b", "a"], ["a", "b"]) == "a" and in_order(["a", "...", "b"], ["a", "x", "b"]) is None
    assert (
        list(fenced_quotes('```{ .python title="docs/examples/x.py" }\n--8<-- "docs/examples/x.py"\n```\n'))
        == []
    )


def api_section(title):
    text = (ROOT / "docs" / "api.md").read_text()
    m = re.search(rf"^## {title}\n(.*?)(?=^## )", text, re.M | re.S)
    assert m, f"docs/api.md has no section '## {title}'"
    return m.group(1)


def test_the_api_page_gives_each_constructor_as_the_code_defines_it():
    import inspect

    import npgpt

    rows = re.findall(r"^\| `(\w+)` \| `([^`]+)`", api_section("Names, constructors and parameters"), re.M)
    assert len(rows) == 11, f"the constructor table of docs/api.md has {len(rows)} rows, expected 11"
    for name, shown in rows:
        cls = getattr(npgpt, name)
        actual = f"{name}{inspect.signature(cls)}".replace("1e-05", "1e-5")
        assert shown == actual, f"docs/api.md shows {shown}, the code defines {actual}"


def test_the_api_page_lists_every_component_name():
    from npgpt.registry import COMPONENTS

    section = api_section("Component names")
    for c in COMPONENTS:
        for name in (c.name, *c.aliases):
            assert f"`{name}`" in section, f"docs/api.md, Component names: `{name}` is missing"
