"""Make the figures of the docs pages: docs/img/{gelu_relu,layernorm_effect,attention_weights}.png.

Needs the `plots` extra (matplotlib): python -m pip install ".[plots]" && python scripts/make_plots.py
The data come from npgpt itself (GELU's forward and backward, LayerNorm's forward, and the
attention weights that `npgpt explain attention` computes), so the figures show the code.
"""

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from npgpt import GELU, LayerNorm  # noqa: E402
from npgpt.explain import explain_attention  # noqa: E402


def gelu_zero(lo=-1.0, hi=-0.5):
    """Where GELU'(x) = 0 (GELU's minimum), by bisection on the module's backward."""
    g = GELU()
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        g.forward(np.array([mid]))
        lo, hi = (mid, hi) if g.backward(np.ones(1))[0] < 0 else (lo, mid)
    return 0.5 * (lo + hi)


def plot_gelu_relu(plt, path):
    x = np.linspace(-3, 3, 601)  # (601,)
    g = GELU()
    y = g.forward(x)
    dy = g.backward(np.ones_like(x))
    x0 = gelu_zero()
    y0 = float(g.forward(np.array([x0]))[0])
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    axes[0].plot(x, y, label="GELU")
    axes[0].plot(x, np.maximum(x, 0), "--", label="ReLU")
    axes[0].plot([x0], [y0], "o", color="C3")
    axes[0].annotate(f"minimum ({x0:.4f}, {y0:.4f})", (x0, y0), (-2.9, 1.0), arrowprops={"arrowstyle": "->"})
    axes[0].set_title("function")
    axes[1].plot(x, dy, label="GELU'")
    axes[1].plot(x, (x > 0).astype(float), "--", label="ReLU'")
    axes[1].plot([x0], [0.0], "o", color="C3")
    axes[1].annotate(f"GELU'(x) = 0 at x = {x0:.4f}", (x0, 0.0), (-2.9, 0.6), arrowprops={"arrowstyle": "->"})
    axes[1].set_title("derivative")
    for ax in axes:
        ax.axhline(0, color="0.6", lw=0.8)
        ax.axvline(0, color="0.6", lw=0.8)
        ax.set_xlabel("x")
        ax.legend(loc="upper left" if ax is axes[1] else "lower right")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_layernorm(plt, path, seed=0):
    rng = np.random.default_rng(seed)
    C = 768
    offsets = np.array([-3.0, 0.5, 4.0])[:, None]  # three rows, different offsets and spreads
    spreads = np.array([0.5, 2.0, 1.0])[:, None]
    x = offsets + spreads * rng.standard_normal((3, C))  # (3, C)
    out = LayerNorm(C).forward(x)  # (3, C)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
    bins = np.linspace(-8, 10, 73)
    for i in range(3):
        lab = f"row {i}: mean {x[i].mean():+.2f}, std {x[i].std():.2f}"
        axes[0].hist(x[i], bins=bins, alpha=0.55, label=lab)
        axes[1].hist(
            out[i],
            bins=np.linspace(-4, 4, 49),
            alpha=0.55,
            label=f"row {i}: mean {round(out[i].mean(), 2) + 0.0:+.2f}, std {out[i].std():.2f}",
        )
    axes[0].set_title(f"before LayerNorm ({C} features per row)")
    axes[1].set_title("after LayerNorm (scale 1, shift 0)")
    for ax in axes:
        ax.legend(fontsize=7, loc="upper left")
        ax.set_xlabel("activation")
    axes[0].set_ylabel("count")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_attention(plt, path, seed=0):
    rng = np.random.default_rng(seed)
    x = 2.0 * rng.standard_normal((1, 8, 16))  # (B, T, d_in): one sequence of 8 tokens
    e = explain_attention(x=x, seed=seed, d_out=16, num_heads=4)
    att = e.step("att")[0]  # (nh, T, T)
    fig, axes = plt.subplots(1, att.shape[0], figsize=(10, 2.9))
    for h, ax in enumerate(axes):
        im = ax.imshow(att[h], cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(f"head {h}")
        ax.set_xlabel("key position s")
        ax.set_xticks(range(att.shape[-1]))
        ax.set_yticks(range(att.shape[-1]))
        ax.tick_params(labelsize=6)
    axes[0].set_ylabel("query position t")
    fig.colorbar(im, ax=list(axes), shrink=0.8, label="att[t, s]")
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"), help="output folder")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, fn in (
        ("gelu_relu", plot_gelu_relu),
        ("layernorm_effect", plot_layernorm),
        ("attention_weights", plot_attention),
    ):
        path = out / f"{name}.png"
        fn(plt, path)
        print(f"{path} ({path.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
