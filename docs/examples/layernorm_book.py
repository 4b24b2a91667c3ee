"""The book's ch. 4 LayerNorm example with npgpt: mean, variance and the normalized rows."""

import numpy as np

from npgpt import LayerNorm

# the output of Linear(5, 6) + ReLU at torch.manual_seed(123), as the book prints it
out = np.array(
    [[0.2260, 0.3470, 0.0000, 0.2216, 0.0000, 0.0000], [0.2133, 0.2394, 0.0000, 0.5198, 0.3297, 0.0000]]
)


def main():
    mean = out.mean(-1, keepdims=True)
    var_book = out.var(-1, ddof=1, keepdims=True)  # torch's x.var() divides by n - 1
    # the book's hand normalization has no eps; unbiased=True divides by n - 1 as x.var() does
    ln_book = LayerNorm(6, eps=1e-12, unbiased=True)
    ln_gpt2 = LayerNorm(6)  # the book's LayerNorm class and GPT-2: divide by n, eps = 1e-5
    norm_book = ln_book(out)
    norm_gpt2 = ln_gpt2(out)
    with np.printoptions(precision=4, suppress=True):
        print("mean:", mean.ravel())
        print("variance (n - 1):", var_book.ravel())
        print("variance (n):", out.var(-1))
        print("normalized, unbiased=True, eps=1e-12:")
        print(norm_book)
        print("normalized, LayerNorm(6) defaults:")
        print(norm_gpt2)
        print("mean after:", np.abs(norm_gpt2.mean(-1)).max() < 1e-12, " variance after:", norm_gpt2.var(-1))
    return {"mean": mean, "var_book": var_book, "norm_book": norm_book, "norm_gpt2": norm_gpt2}


if __name__ == "__main__":
    main()
