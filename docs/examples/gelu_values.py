"""GELU at -1, 0 and 1, its derivative there, and where GELU dips lowest (GELU'(x) = 0)."""

import numpy as np

from npgpt import GELU


def main():
    gelu = GELU()
    x = np.array([-1.0, 0.0, 1.0])
    y = gelu(x)
    dy = gelu.backward(np.ones_like(x))  # with dout = 1, dx is GELU'(x)
    # bisection on GELU'(x) over [-1, -0.5], where it changes sign, using the module's backward
    lo, hi = -1.0, -0.5
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        gelu(np.array([mid]))
        lo, hi = (mid, hi) if gelu.backward(np.ones(1))[0] < 0 else (lo, mid)
    x_min = 0.5 * (lo + hi)
    y_min = gelu(np.array([x_min]))[0]
    with np.printoptions(precision=4, suppress=True):
        print("GELU(x) at x = [-1, 0, 1]: ", y)
        print("GELU'(x) at x = [-1, 0, 1]:", dy)
        print(f"GELU'(x) = 0 at x = {x_min:.4f}, where GELU(x) = {y_min:.4f} (its minimum)")
    return {"x": x, "y": y, "dy": dy, "x_min": x_min, "y_min": y_min}


if __name__ == "__main__":
    main()
