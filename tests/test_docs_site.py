"""The built docs site, opened in a real headless browser (Debian's chromium) with the network
off: every formula on every page typesets without a KaTeX error, no page asks anything of a
host other than the local server, and every image on a page loads.

The site is built with `mkdocs build --strict` into a temporary folder and served on
127.0.0.1. Chromium runs with a proxy to a closed local port and a resolver that finds no host
but 127.0.0.1, so nothing can leave the machine; its NetLog records every request a page made
(initiated from the page's origin), which is how a request to a CDN would be caught: the
`canary` test plants one and checks that it is reported.

Runs in CI (.ci/run installs chromium and KaTeX); on a machine without chromium, mkdocs or
KaTeX's npm package it is skipped, saying which is missing. In CI a missing one fails.
"""

import functools
import http.server
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
KATEX = pathlib.Path(
    os.environ.get("NPGPT_KATEX_DIST") or ROOT / "scripts" / "katex" / "node_modules" / "katex" / "dist"
)
# the browser's own background services (updates, accounts) are switched off where a flag can
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-features=AutofillServerCommunication,Translate,OptimizationHints,MediaRouter,SpellCheck",
    "--proxy-server=127.0.0.1:9",  # the discard port, closed: any proxied request fails
    "--proxy-bypass-list=127.0.0.1",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--virtual-time-budget=5000",
]


def _require(what, ok, how):
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing in CI: {how}")
    pytest.skip(f"{what} is not installed here ({how}); CI runs this test")


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_request(self, code="-", size="-"):
        self.server.served.append((self.path.split("?")[0], int(code)))

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site():
    _require("chromium", CHROMIUM, "apt-get install -y chromium")
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        _require("mkdocs", False, 'pip install ".[docs]"')
    _require("KaTeX", (KATEX / "katex.min.js").is_file(), "npm ci --prefix scripts/katex")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="npgpt-site-"))
    out = tmp / "site"
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stderr[-3000:]}"
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(out))
    )
    server.served = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield out, server, tmp
    server.shutdown()
    server.server_close()
    shutil.rmtree(tmp, ignore_errors=True)


def _open(site, path):
    """(DOM after scripts ran, URLs the page requested, {path: status} the server answered)."""
    out, server, tmp = site
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    netlog = tmp / (re.sub(r"\W", "_", path) + ".netlog.json")
    del server.served[:]
    run = subprocess.run(
        [
            CHROMIUM,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp / 'profile'}",
            f"--log-net-log={netlog}",
            "--dump-dom",
            f"{origin}/{path}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and run.stdout, f"chromium failed on {path}: {run.stderr[-2000:]}"
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    requested = set()
    for event in log["events"]:
        p = event.get("params") or {}
        if event["type"] != start or "url" not in p:
            continue
        # the page's requests carry its site: as initiator (subresources) or as the network
        # isolation key (the page itself); the browser's own services carry neither
        if p.get("initiator") == origin or str(p.get("network_isolation_key", "")).startswith(
            "http://127.0.0.1"
        ):
            requested.add(p["url"])
    return run.stdout, requested, origin, dict(server.served)


def _pages(out):
    return sorted(p.relative_to(out).parent.as_posix() + "/" for p in out.rglob("index.html"))


def test_every_page_typesets_its_math_offline_and_loads_its_images(site):
    out = site[0]
    pages = _pages(out)
    assert len(pages) >= 15, f"only {len(pages)} pages built: {pages}"
    total, problems = 0, []
    for page in pages:
        dom, requested, origin, served = _open(site, "" if page == "./" else page)
        formulas = len(re.findall(r'class="arithmatex"', dom))
        typeset = len(re.findall(r'class="katex"', dom))
        errors = re.findall(r'class="katex-error"[^>]*title="([^"]*)"', dom)
        total += formulas
        if typeset != formulas or errors:
            problems.append(f"{page}: {typeset} of {formulas} formulas typeset; errors: {errors[:3]}")
        outside = sorted(u for u in requested if not u.startswith(origin) and not u.startswith("data:"))
        if outside:
            problems.append(f"{page}: requests outside the site: {outside[:5]}")
        for src in re.findall(r'<img[^>]*\ssrc="([^"]+)"', dom):
            path = "/" + os.path.normpath(os.path.join(page, src)).lstrip("./")
            if served.get(path) != 200:
                problems.append(f"{page}: image {src} ({path}) not loaded: {served.get(path)}")
    assert not problems, "\n".join(problems)
    assert total > 200, f"only {total} formulas on the whole site: is arithmatex still on?"


def test_the_check_catches_an_external_request_and_a_bad_formula(site):
    out = site[0]
    page = (out / "gelu" / "index.html").read_text()
    page = page.replace(
        "</body>",
        '<img src="https://cdn.invalid/x.png"><span class="arithmatex">\\(\\frac{1}{\\)</span></body>',
    )
    (out / "gelu" / "canary.html").write_text(page)  # beside gelu/index.html: same relative links
    dom, requested, origin, _ = _open(site, "gelu/canary.html")
    outside = [u for u in requested if not u.startswith(origin)]
    assert "https://cdn.invalid/x.png" in outside, f"the planted request went unseen: {sorted(requested)}"
    assert 'class="katex-error"' in dom, "a formula KaTeX cannot parse left no .katex-error node"
