"""The docs' worked examples run here, and their numbers are checked against independent sources:
plain-Python hand calculations and the figures printed in the book. Each page's output block
must also be what its example prints, so the numbers on the pages cannot drift from the code.
The equation labels in the code's comments must exist on the matching docs page.
"""

import importlib.util
import math
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BOOK_ROWS = [[0.2260, 0.3470, 0.0, 0.2216, 0.0, 0.0], [0.2133, 0.2394, 0.0, 0.5198, 0.3297, 0.0]]


def run_example(name, capsys):
    path = DOCS / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"docs_example_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    capsys.readouterr()
    values = mod.main()
    return values, capsys.readouterr().out


def page_output(page, example):
    """The ```text block right after the page's `<!-- output: docs/examples/<example>.py -->`."""
    text = (DOCS / page).read_text()
    m = re.search(rf"<!-- output: docs/examples/{example}\.py -->\n```text\n(.*?)```", text, re.S)
    assert m, f"{page}: no output block for docs/examples/{example}.py"
    return m.group(1)


def close(got, want, tol, what):
    assert abs(got - want) <= tol, f"{what}: got {got!r}, expected {want!r} (tolerance {tol})"


def test_layernorm_book_example(capsys):
    v, out = run_example("layernorm_book", capsys)
    for r, row in enumerate(BOOK_ROWS):
        mean = sum(row) / 6  # by hand, no NumPy
        dev = [a - mean for a in row]
        var_unbiased = sum(d * d for d in dev) / 5
        var_biased = sum(d * d for d in dev) / 6
        close(float(v["mean"][r, 0]), mean, 1e-12, f"mean of row {r}")
        close(float(v["var_book"][r, 0]), var_unbiased, 1e-12, f"variance of row {r}")
        for j in range(6):
            close(
                float(v["norm_book"][r, j]),
                dev[j] / math.sqrt(var_unbiased + 1e-12),
                1e-9,
                f"norm_book[{r},{j}]",
            )
            want = dev[j] / math.sqrt(var_biased + 1e-5)
            close(float(v["norm_gpt2"][r, j]), want, 1e-9, f"norm_gpt2[{r},{j}]")
    # the book's printed figures (computed by PyTorch from unrounded inputs)
    for r, (m, s2) in enumerate([(0.1324, 0.0231), (0.2170, 0.0398)]):
        close(float(v["mean"][r, 0]), m, 5e-5, f"book mean row {r}")
        close(float(v["var_book"][r, 0]), s2, 5e-5, f"book variance row {r}")
    book_norm = [
        [0.6159, 1.4126, -0.8719, 0.5872, -0.8719, -0.8719],
        [-0.0189, 0.1121, -1.0876, 1.5173, 0.5647, -1.0876],
    ]
    for r in range(2):
        for j in range(6):
            close(float(v["norm_book"][r, j]), book_norm[r][j], 3e-4, f"book normalized[{r},{j}]")
    assert out == page_output("layernorm.md", "layernorm_book"), "docs/layernorm.md output block is stale"


def tanh_gelu(x):
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def test_gelu_example(capsys):
    v, out = run_example("gelu_values", capsys)
    for i, x in enumerate([-1.0, 0.0, 1.0]):
        close(float(v["y"][i]), tanh_gelu(x), 1e-12, f"GELU({x})")
        slope = (tanh_gelu(x + 1e-6) - tanh_gelu(x - 1e-6)) / 2e-6  # central difference
        close(float(v["dy"][i]), slope, 1e-8, f"GELU'({x})")
    close(float(v["y"][0]), -0.159, 1e-3, "GELU(-1), the book's -0.159")
    close(float(v["y"][2]), 0.841, 1e-3, "GELU(1), the book's 0.841")
    # the derivative's zero: where the central difference of plain-Python GELU changes sign
    lo, hi = -1.0, -0.5
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tanh_gelu(mid + 1e-7) < tanh_gelu(mid - 1e-7) else (lo, mid)
    close(float(v["x_min"]), lo, 1e-6, "zero of GELU'")
    close(float(v["x_min"]), -0.7525, 5e-5, "zero of GELU' (docs say -0.7525)")
    assert out == page_output("gelu.md", "gelu_values"), "docs/gelu.md output block is stale"


def test_feedforward_parameter_count(capsys):
    v, out = run_example("feedforward_params", capsys)
    assert v["n_ff"] == 768 * 3072 + 3072 + 3072 * 768 + 768 == 4_722_432, f"FeedForward count {v['n_ff']}"
    assert v["n_att"] == 3 * 768 * 768 + 768 * 768 + 768 == 2_360_064, f"attention count {v['n_att']}"
    assert v["out_shape"] == (2, 3, 768), f"FeedForward output shape {v['out_shape']}"
    assert out == page_output("feedforward.md", "feedforward_params"), (
        "docs/feedforward.md output block is stale"
    )


def test_whole_124m_model_parameter_count(capsys):
    v, out = run_example("model_params", capsys)
    V, L, E = 50257, 1024, 768
    block = (4 * E * E + E) + (E * 4 * E + 4 * E + 4 * E * E + E) + 2 * 2 * E  # att + ff + 2 norms
    by_hand = V * E + L * E + 12 * block + 2 * E + V * E
    assert v["total"] == by_hand == 163_009_536, (
        f"total {v['total']:,}, by hand {by_hand:,}, book 163,009,536"
    )
    assert v["total"] - v["head"] == 124_412_160, f"without the head {v['total'] - v['head']:,}"
    assert v["tied"] == 124_412_160, f"tied head counted {v['tied']:,}, the book's 124,412,160"
    assert out == page_output("model.md", "model_params"), "docs/model.md output block is stale"


def test_gradcheck_demo_catches_the_bug(capsys):
    v, out = run_example("gradcheck_demo", capsys)
    assert v["good"].passed, f"the correct GELU must pass:\n{v['good']}"
    assert not v["bad"].passed, f"the GELU without the 3 must fail:\n{v['bad']}"
    assert out == page_output("gradcheck.md", "gradcheck_demo"), "docs/gradcheck.md output block is stale"


LABELED = [
    "layernorm",
    "gelu",
    "linear",
    "dropout",
    "embedding",
    "feedforward",
    "attention",
    "block",
    "model",
]
RANGES = {
    "layernorm": 9,
    "gelu": 5,
    "linear": 4,
    "dropout": 2,
    "embedding": 2,
    "attention": 15,
    "block": 4,
    "feedforward": 6,
    "model": 6,
    "loss": 4,
}


def source_of(stem):
    return (ROOT / "npgpt" / (f"{stem}.py" if stem in ("loss", "model") else f"layers/{stem}.py")).read_text()


@pytest.mark.parametrize("stem", LABELED + ["loss"])
def test_code_equation_labels_exist_on_the_page(stem):
    code = source_of(stem)
    labels = {int(n) for n in re.findall(r"\beq\. (\d+)", code)}
    tags = [int(n) for n in re.findall(r"\\tag\{(\d+)\}", (DOCS / f"{stem}.md").read_text())]
    assert tags == list(range(1, len(tags) + 1)), (
        f"docs/{stem}.md numbers its equations {tags}, not 1, 2, ..."
    )
    assert len(tags) == RANGES[stem], (
        f"docs/{stem}.md has {len(tags)} equations, the code cites 1-{RANGES[stem]}"
    )
    missing = sorted(labels - set(tags))
    assert not missing, f"npgpt code for {stem} cites eq. {missing}, absent from docs/{stem}.md"
    assert f"docs/{stem}.md" in code, f"the {stem} module's docstring does not point to docs/{stem}.md"


@pytest.mark.parametrize("png", ["gelu_relu", "layernorm_effect", "attention_weights"])
def test_plots_are_committed_small_and_shown(png):
    path = DOCS / "img" / f"{png}.png"
    assert path.exists(), f"{path} is missing: run python scripts/make_plots.py"
    assert path.stat().st_size < 150 * 1024, f"{path} is {path.stat().st_size} bytes, over 150 KB"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    shown = [p.name for p in DOCS.glob("*.md") if f"img/{png}.png" in p.read_text()]
    assert shown, f"no docs page shows img/{png}.png"


def test_gelu_factor_3_figures_on_the_pages():
    """docs/gelu.md and docs/gradcheck.md state the size of the forgotten-3 bug; recompute it:
    the difference of the two du/dx, 0.5 x (1 - t^2) sqrt(2/pi) 2 * 0.044715 x^2, in plain Python."""
    c = math.sqrt(2 / math.pi)

    def missing(x):
        t = math.tanh(c * (x + 0.044715 * x**3))
        return abs(0.5 * x * (1 - t * t) * c * 2 * 0.044715 * x * x)

    xs = [i * 5e-5 for i in range(1, 120_000)]  # (0, 6)
    errs = [missing(x) for x in xs]
    peak = max(range(len(xs)), key=errs.__getitem__)
    close(missing(1.0), 1.9e-2, 5e-4, "error at |x| = 1")
    close(errs[peak], 3.0e-2, 5e-4, "peak error")
    close(xs[peak], 1.59, 5e-3, "where the error peaks")
    above = [x for x, e in zip(xs, errs) if e >= 1e-3]
    close(min(above), 0.31, 5e-3, "smallest |x| with error >= 1e-3")
    close(max(above), 3.52, 5e-3, "largest |x| with error >= 1e-3")
    gelu_page = (DOCS / "gelu.md").read_text()
    for figure in ("$1.9 \\times 10^{-2}$ at $|x| = 1$", "$3.0 \\times 10^{-2}$", "1.59", "0.31", "3.52"):
        assert figure in gelu_page, f"docs/gelu.md no longer states {figure}"
    # docs/gradcheck.md: the demo's worst element, x = dout = -2.325 (both drawn from seed 0)
    x = -2.3250307746388343
    close(missing(x), 1.76e-2, 5e-5, "missing term at x = -2.325")
    close(missing(x) * abs(x), 4.08e-2, 5e-5, "times dout at that element")
    assert "1.76 \\times 10^{-2}" in (DOCS / "gradcheck.md").read_text()
