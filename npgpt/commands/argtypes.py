"""argparse types that check a value's range, so a bad flag is a one-line usage error (exit 2)
before anything runs: `type=at_least(1)`, `type=fraction(open_right=True)`, ..."""

import argparse
import math


def _number(kind, text):
    try:
        v = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not {'an integer' if kind is int else 'a number'}"
        ) from None
    if kind is float and not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return v


def at_least(low, kind=int):
    """An int (or `kind`) >= low."""

    def parse(text):
        v = _number(kind, text)
        if v < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {text}")
        return v

    parse.__name__ = f"{kind.__name__} >= {low}"
    return parse


def positive_float(text):
    """A finite float > 0."""
    v = _number(float, text)
    if v <= 0.0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return v


def fraction(text):
    """A float in [0, 1): a dropout rate or an Adam beta."""
    v = _number(float, text)
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return v
