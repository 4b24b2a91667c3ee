"""`npgpt docs [PAGE]`: a derivation page of the docs, printed in the terminal.

The pages are the docs/*.md of the repository, installed with the package (setup.cfg's
data_files puts them in <prefix>/share/npgpt/docs; a checkout reads docs/ itself), so a student
who installed npgpt with pip has them too. Formulas are turned into Unicode text by pylatexenc
(the `docs-text` extra); without it they are shown as LaTeX with the markup for names removed.
PAGE is a component's name in the registry (npgpt/registry.py: `layernorm`, `attention`,
`crossentropy` alias `loss`, ..., or a class name such as `MultiHeadAttention`) or a page stem
(`gradcheck`, `grading`); without one, the pages are listed.
"""

import os
import pathlib
import re
import sys
import sysconfig
import textwrap

HELP = "print a derivation page of the docs (e.g. `npgpt docs layernorm`) in the terminal"
SITE = None  # the published docs site, if there is one; the pages come with the package anyway

CHECKOUT = pathlib.Path(__file__).resolve().parents[2]  # a source tree, if npgpt runs from one
OTHER = ("index", "gradcheck", "train", "grading", "bench", "api", "reference")  # not components


def add_arguments(parser):
    parser.add_argument("page", nargs="?", default=None, help="component or page, e.g. layernorm")
    parser.add_argument("--tex", action="store_true", help="show formulas as LaTeX, not Unicode")
    parser.add_argument("--path", action="store_true", help="print the page's file path only")


def component_name(name):
    """The registry's name of a component (`MultiHeadAttention` -> `attention`), else `name`."""
    from ..registry import UnknownComponent, resolve

    try:
        return resolve(name).name
    except UnknownComponent:
        return name


def page_dirs():
    """Where the pages may be, in order: a checkout's docs/, then the installed copies."""
    dirs = [CHECKOUT / "docs"] if (CHECKOUT / "mkdocs.yml").is_file() else []
    schemes = [None] + ([f"{os.name}_user"] if f"{os.name}_user" in sysconfig.get_scheme_names() else [])
    for scheme in schemes:
        data = sysconfig.get_path("data", scheme) if scheme else sysconfig.get_path("data")
        dirs.append(pathlib.Path(data) / "share" / "npgpt" / "docs")
    return dirs


def find_page(name):
    """The path of page `name` (a registry name, alias or class name, or a page stem)."""
    from ..registry import UnknownComponent, resolve

    if name.lower() in OTHER:
        stem = name.lower()
    else:
        try:
            stem = resolve(name).stem  # the page has the stem of the component's files
        except UnknownComponent as err:
            raise ValueError(f"{err}; other pages: {', '.join(OTHER)}") from None
    for d in page_dirs():
        if (d / f"{stem}.md").is_file():
            return d / f"{stem}.md"
    where = ", ".join(str(d) for d in page_dirs())
    raise ValueError(f"page {stem}.md is not installed (looked in {where}); reinstall npgpt")


# ---- markdown + LaTeX -> terminal text -------------------------------------------------------
def _latex_to_text():
    try:
        from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db
    except ImportError:
        return None

    def frac(node, l2tobj):  # a/b, with parentheses around a numerator or denominator of several terms
        parts = [l2tobj.nodelist_to_text([a]).strip() for a in node.nodeargd.argnlist[-2:]]
        parts = [f"({t})" if re.search(r"[\s+\-]", t) else t for t in parts]
        return "/".join(parts) + " "

    db = get_default_latex_context_db().filter_context(keep_categories=None)
    db.add_context_category(
        "npgpt",
        prepend=True,
        macros=[
            MacroTextSpec("underbrace", simplify_repl="%s"),
            MacroTextSpec("tag", simplify_repl=""),
            MacroTextSpec("frac", simplify_repl=frac),
            MacroTextSpec("tfrac", simplify_repl=frac),
            MacroTextSpec("sum", simplify_repl=" ∑"),
        ],
    )
    return LatexNodes2Text(math_mode="text", latex_context=db, strict_latex_spaces=True).latex_to_text


def _braced(tex, i):
    """(content, end) of the {...} group that starts at tex[i] == "{", braces balanced."""
    depth = 0
    for j in range(i, len(tex)):
        depth += {"{": 1, "}": -1}.get(tex[j], 0)
        if depth == 0:
            return tex[i + 1 : j], j + 1
    return tex[i + 1 :], len(tex)


def _underbraces(tex):
    """\\underbrace{A}_{B} -> A (B): the label after the term it names."""
    while (i := tex.find("\\underbrace{")) >= 0:
        body, j = _braced(tex, i + len("\\underbrace"))
        label = ""
        if tex.startswith("_{", j):
            label, j = _braced(tex, j + 1)
        tex = tex[:i] + "{" + body + "}" + (f" \\ ({label})" if label else "") + tex[j:]
    return tex


def math_to_text(tex, convert):
    """One formula as terminal text: names in \\mathtt lose the markup, then `convert`."""
    tex = _underbraces(tex)
    tex = re.sub(r"\\(?:mathtt|texttt|mathrm|text)\{([^{}]*)\}", r"{\1}", tex)
    tex = re.sub(r"\\(?:mathtt|texttt|mathrm|text)\{([^{}]*)\}", r"{\1}", tex)
    if convert is None:
        return tex.strip()
    out = convert(tex)
    return re.sub(r"[ \t]+", " ", out).strip()


def render(text, tex=False, docs_dir=None):
    """The page's markdown as terminal text."""
    convert = None if tex else _latex_to_text()
    lines = []

    def display(m):
        body = m.group(1)
        tag = re.search(r"\\tag\{([^}]*)\}", body)
        body = re.sub(r"\\tag\{[^}]*\}", "", body)
        rows = re.split(r"\\\\\s*\n?", body) if "aligned" in body or "cases" in body else [body]
        out = []
        for row in rows:
            t = math_to_text(row.replace("&", ""), convert)
            t = re.sub(r"\\?begin\{?\w*\}?|\\?end\{?\w*\}?", "", t) if convert is None else t
            out += [x.strip() for x in t.splitlines() if x.strip()]
        if tag:
            out[-1] = f"{out[-1]}    ({tag.group(1)})" if out else f"({tag.group(1)})"
        return "\n" + "\n".join("    " + x for x in out) + "\n"

    text = re.sub(r"<!--.*?-->\n?", "", text, flags=re.S)
    text = re.sub(r"\$\$(.*?)\$\$", display, text, flags=re.S)
    text = re.sub(r"(?<![\\$])\$([^$]+?)\$", lambda m: math_to_text(m.group(1), convert), text)

    def snippet(m):
        path = pathlib.Path(m.group(1))
        src = (docs_dir / path.relative_to("docs")) if docs_dir and path.parts[0] == "docs" else None
        if src is not None and src.is_file():
            return src.read_text().rstrip("\n")
        return f"# see {path}"

    text = re.sub(r'--8<-- "([^"]+)"', snippet, text)
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"[figure: \1]", text)
    text = re.sub(r"\[([^\]]+)\]\(([\w-]+)\.md(#[\w-]*)?\)", r"\1 (npgpt docs \2)", text)
    text = re.sub(r"\[([^\]]+)\]\((https?://[^)]+)\)", r"\1 <\2>", text)
    text = re.sub(r"```\{[^}]*\}|```\w*", "", text)
    text = text.replace("**", "")
    for line in text.splitlines():
        lines.append(line.rstrip())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def run(args):
    if args.page is None:
        from ..registry import COMPONENTS

        print("pages (npgpt docs NAME):")
        for c in COMPONENTS:
            print(f"  {c.name:<13} {c.stem}.md" + (f"  (also: {', '.join(c.aliases)})" if c.aliases else ""))
        for stem in OTHER:
            print(f"  {stem:<13} {stem}.md")
        if SITE:
            print(f"online: {SITE}")
        return 0
    try:
        path = find_page(args.page)
    except ValueError as err:
        print(f"npgpt docs: {err}", file=sys.stderr)
        return 2
    if args.path:
        print(path)
        return 0
    out = render(path.read_text(encoding="utf-8"), tex=args.tex, docs_dir=path.parent)
    if not args.tex and _latex_to_text() is None:
        out = "(formulas shown as LaTeX: pip install 'npgpt[docs-text]' for Unicode)\n\n" + out
    try:
        sys.stdout.write(out)
    except UnicodeEncodeError:  # a terminal that cannot show the symbols: say it in ASCII
        sys.stdout.write(textwrap.dedent(out).encode("ascii", "replace").decode())
    return 0
