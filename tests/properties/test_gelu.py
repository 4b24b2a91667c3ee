"""GELU (tanh form) properties: GELU(x) - GELU(-x) = x, the backward against finite differences,
the one sign change of the derivative (against a root computed here with `decimal`), and
float32 against float64.
"""

from decimal import Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npgpt import GELU, numerical_gradient
from tests.asserts import assert_below, assert_close, assert_true
from tests.strategies import arrays, dtypes, shapes, tiny, unit_roundoff


def derivative(x):
    """GELU'(x) from the module's backward with dout = 1."""
    g = GELU()
    g.forward(x)
    return g.backward(np.ones_like(x))


def decimal_root(digits=40):
    """The zero of GELU'(x) in [-1, -0.5] by bisection in `digits`-digit decimal arithmetic.

    pi from Machin's formula, tanh from exp: nothing here comes from npgpt or from float64.
    GELU'(x) = (1 + t) / 2 + x (1 - t^2) u'(x) / 2, t = tanh(u), u = sqrt(2/pi) (x + 0.044715 x^3).
    """
    with localcontext() as ctx:
        ctx.prec = digits

        def arctan_inv(n):  # arctan(1/n) by its series
            x = Decimal(1) / n
            total, term, k = x, x, 1
            while abs(term) > Decimal(10) ** -(digits + 2):
                term *= -x * x
                k += 2
                total += term / k
            return total

        pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))
        c, a = (2 / pi).sqrt(), Decimal("0.044715")

        def dgelu(x):
            e = (2 * c * (x + a * x * x * x)).exp()
            t = (e - 1) / (e + 1)
            return (1 + t) / 2 + x * (1 - t * t) * c * (1 + 3 * a * x * x) / 2

        lo, hi = Decimal(-1), Decimal("-0.5")  # dgelu(-1) < 0 < dgelu(-0.5)
        for _ in range(4 * digits):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if dgelu(mid) < 0 else (lo, mid)
        return float(lo)


ROOT = decimal_root()


@given(dtype=dtypes(), x=st.lists(st.floats(-20, 20, width=32), min_size=64, max_size=64))
def test_gelu_x_minus_gelu_minus_x_is_x(dtype, x):
    """0.5 x (1 + t) - 0.5 (-x) (1 - t) = x. The reference rounds 0.5 x (1 + t) and
    0.5 x (1 - t) separately, each to a few units of |x| (and of the smallest subnormal, which
    0.5 x rounds to)."""
    x = np.array(x, dtype)
    u, sub = unit_roundoff(dtype), float(np.finfo(dtype).smallest_subnormal)
    assert_close("GELU(x) - GELU(-x)", GELU().forward(x) - GELU().forward(-x), x, rtol=8 * u, atol=4 * sub)


@given(shape=shapes(max_dims=2, max_side=6), data=st.data())
def test_backward_matches_finite_differences(shape, data):
    x = data.draw(arrays(np.float64, shape, bound=6.0), label="x")
    dout = data.draw(arrays(np.float64, shape, bound=3.0), label="dout")
    g = GELU()
    g.forward(x)
    dx = g.backward(dout)
    eps = 1e-6
    numeric = numerical_gradient(lambda z: GELU().forward(z), x.copy(), dout, eps=eps)
    # central differences: truncation eps^2 |f'''| / 6 (|f'''| < 2 here) per coordinate, plus the
    # rounding of sum(f * dout) over eps; f = x (1 + t) / 2 is off by up to ~4u |x| (1 + t cancels)
    rounding = 8 * unit_roundoff(np.float64) * np.abs(x * dout).sum() / eps
    assert_close(
        "dx vs finite differences",
        dx,
        numeric,
        rtol=0,
        atol=rounding + eps * eps * np.abs(dout).max(initial=0.0) + tiny(np.float64),
    )


@given(dtype=dtypes(), x=st.lists(st.floats(-40, 40, width=32), min_size=1, max_size=50))
def test_derivative_changes_sign_once_at_the_root(dtype, x):
    """GELU' < 0 on (-5, root), > 0 on (root, inf); for x < -5 its tail rounds to 0 (never > 0)."""
    x = np.sort(np.array(x + [-4.9, ROOT - 0.01, ROOT + 0.01, 40.0], dtype))
    d = derivative(x)
    margin = 1e-5 if dtype == np.float32 else 1e-12  # where rounding decides the sign
    right, left, tail = x > ROOT + margin, (x < ROOT - margin) & (x > -5.0), x <= -5.0
    assert_true("GELU' right of the root", ~right | (d > 0), d, "GELU'(x) > 0")
    assert_true("GELU' left of the root", ~left | (d < 0), d, "GELU'(x) < 0")
    assert_true("GELU' in the far left tail", ~tail | (d <= 0), d, "GELU'(x) <= 0")
    signs = np.sign(d[np.abs(x - ROOT) > margin])
    signs = signs[signs != 0]
    assert np.count_nonzero(np.diff(signs)) == 1, (
        f"GELU' changes sign {np.count_nonzero(np.diff(signs))} times"
    )


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_bisection_on_the_backward_finds_the_decimal_root(dtype, tol):
    """The analytic derivative's zero, by bisection in `dtype`, matches the 40-digit root; both
    are near -0.7525 (-0.75246142207...)."""
    lo, hi = -1.0, -0.5
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if derivative(np.array([mid], dtype))[0] < 0:
            lo = mid
        else:
            hi = mid
    assert abs(lo - ROOT) <= tol, f"bisection root {lo!r}, decimal root {ROOT!r} (|diff| > {tol:g})"
    assert abs(ROOT + 0.7525) < 1e-4, f"decimal root {ROOT!r} is not near -0.7525"


@given(shape=shapes(max_dims=3, max_side=6), data=st.data())
def test_float32_agrees_with_float64_and_keeps_its_dtype(shape, data):
    x = data.draw(arrays(np.float32, shape, bound=20.0), label="x")
    dout = data.draw(arrays(np.float32, shape, bound=3.0), label="dout")
    g32, g64 = GELU(), GELU()
    out32, out64 = g32.forward(x), g64.forward(x.astype(np.float64))
    dx32, dx64 = g32.backward(dout), g64.backward(dout.astype(np.float64))
    assert out32.dtype == np.float32 and dx32.dtype == np.float32, f"dtypes {out32.dtype}, {dx32.dtype}"
    u = unit_roundoff(np.float32)
    # about 10 roundings on each path; t near -1 makes 1 + t lose digits, so bound by |x|, not |out|
    assert_below(
        "out float32 - float64", out32 - out64, 16 * u * np.abs(x.astype(np.float64)) + tiny(np.float32)
    )
    assert_below(
        "dx float32 - float64",
        dx32 - dx64,
        16 * u * np.abs(dout.astype(np.float64)) * (1.0 + np.abs(x) * np.abs(x)) + tiny(np.float32),
    )
