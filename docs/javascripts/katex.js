// Typeset every formula that pymdownx.arithmatex (generic mode) left in the page: \( \) inline,
// \[ \] display. KaTeX itself is served from the site (scripts/mkdocs_katex.py copies it from
// the npm package at build time), so the pages need no network. A formula KaTeX cannot parse
// becomes a red .katex-error span (throwOnError: false), which tests/test_docs_site.py looks for.
function renderMath(root) {
  for (const el of root.querySelectorAll(".arithmatex")) {
    if (el.querySelector(".katex")) continue; // already typeset
    const tex = el.textContent.trim();
    const display = tex.startsWith("\\[");
    katex.render(tex.slice(2, -2), el, { displayMode: display, throwOnError: false });
  }
}

document$.subscribe(() => renderMath(document.body));
