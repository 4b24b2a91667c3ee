"""The 124M model's feed-forward network, 768 -> 3072 -> 768, and its parameter count."""

import numpy as np

from npgpt import GPT_CONFIG_124M, FeedForward, MultiHeadAttention


def main():
    ff = FeedForward(GPT_CONFIG_124M, rng=0)
    x = np.random.default_rng(0).standard_normal((2, 3, 768))  # (B, T, E)
    out = ff(x)
    for name, p in ff.named_parameters():
        print(f"{name:<16} {str(p.data.shape):<12} {p.data.size:>9,}")
    n_ff = sum(p.data.size for p in ff.parameters())
    print(f"{'FeedForward':<29} {n_ff:>9,}   input {x.shape} -> output {out.shape}")
    cfg = GPT_CONFIG_124M
    att = MultiHeadAttention(768, 768, cfg["context_length"], 0.0, cfg["n_heads"], rng=0)
    n_att = sum(p.data.size for p in att.parameters())
    print(f"{'MultiHeadAttention':<29} {n_att:>9,}")
    return {"n_ff": n_ff, "n_att": n_att, "out_shape": out.shape}


if __name__ == "__main__":
    main()
