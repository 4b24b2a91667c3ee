"""Gradient checking a student's GELU, once right and once with the classic bug: the 3 of the
cubic term forgotten in du/dx (docs/gelu.md, eq. 4)."""

import math

import numpy as np

from npgpt import Module, gradcheck

C = math.sqrt(2.0 / math.pi)


class StudentGELU(Module):
    def __init__(self, forget_the_3=False):
        super().__init__()
        self.k = 1.0 if forget_the_3 else 3.0
        self.cache = None

    def forward(self, x):
        t = np.tanh(C * (x + 0.044715 * x * x * x))
        self.cache = (x, t)
        return 0.5 * x * (1.0 + t)

    def backward(self, dout):
        x, t = self.cache
        du_dx = C * (1.0 + self.k * 0.044715 * x * x)
        return dout * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx)


def main():
    x = np.random.default_rng(0).standard_normal((4, 8))
    good = gradcheck(StudentGELU(), x)
    bad = gradcheck(StudentGELU(forget_the_3=True), x)
    print("right:", "PASS" if good.passed else "FAIL", "| without the 3:", "PASS" if bad.passed else "FAIL")
    print(bad)
    return {"good": good, "bad": bad}


if __name__ == "__main__":
    main()
