"""mkdocs hook: serve KaTeX from the site itself, so formulas render with no network.

KaTeX comes from its npm package (scripts/katex/package.json pins the version; `npm ci --prefix
scripts/katex` installs it into scripts/katex/node_modules/). At build time this hook adds
katex.min.js, katex.min.css and the fonts that CSS names to the site under assets/katex/, and
puts them in front of the page's own scripts;
docs/javascripts/katex.js then typesets what pymdownx.arithmatex left in the page.
`NPGPT_KATEX_DIST` may name another copy of KaTeX's dist/ folder.
"""

import os
import pathlib

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parents[1]
PREFIX = "assets/katex"


def _dist():
    dist = pathlib.Path(
        os.environ.get("NPGPT_KATEX_DIST") or ROOT / "scripts" / "katex" / "node_modules" / "katex" / "dist"
    )
    if not (dist / "katex.min.js").is_file():
        raise PluginError(
            f"KaTeX not found in {dist}: run `npm ci --prefix scripts/katex` in {ROOT} (its package.json pins it), "
            "or set NPGPT_KATEX_DIST to KaTeX's dist/ folder"
        )
    return dist


def on_config(config):
    _dist()
    config.extra_css.insert(0, f"{PREFIX}/katex.min.css")
    config.extra_javascript.insert(0, f"{PREFIX}/katex.min.js")
    return config


def on_files(files, config):
    dist = _dist()
    wanted = [dist / "katex.min.js", dist / "katex.min.css", *sorted((dist / "fonts").iterdir())]
    for path in wanted:
        rel = path.relative_to(dist).as_posix()
        files.append(File.generated(config, f"{PREFIX}/{rel}", abs_src_path=str(path)))
    return files
