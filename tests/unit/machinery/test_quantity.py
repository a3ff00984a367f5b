"""kctl.machinery.quantity: Kubernetes quantities parsed exactly, bad ones refused with a reason."""

from fractions import Fraction

import pytest

from kctl.machinery.quantity import is_quantity, parse_quantity

GOOD = [
    ("500m", Fraction(1, 2)),
    ("0.5", Fraction(1, 2)),
    (".5", Fraction(1, 2)),
    ("1.", Fraction(1)),
    ("2", Fraction(2)),
    ("+2", Fraction(2)),
    ("-1", Fraction(-1)),
    ("128Mi", Fraction(128 * 1024**2)),
    ("1Gi", Fraction(1024**3)),
    ("1Ki", Fraction(1024)),
    ("1.5Gi", Fraction(3 * 1024**3, 2)),
    ("1Ei", Fraction(1024**6)),
    ("1k", Fraction(1000)),
    ("1M", Fraction(10**6)),
    ("1G", Fraction(10**9)),
    ("1T", Fraction(10**12)),
    ("1P", Fraction(10**15)),
    ("1E", Fraction(10**18)),
    ("100n", Fraction(1, 10**7)),
    ("5u", Fraction(1, 200000)),
    ("1e3", Fraction(1000)),
    ("1E3", Fraction(1000)),
    ("1e-3", Fraction(1, 1000)),
    ("2.5e+2", Fraction(250)),
    (3, Fraction(3)),
    (0.1, Fraction(1, 10)),
]


@pytest.mark.parametrize("text, expected", GOOD, ids=[str(g[0]) for g in GOOD])
def test_parses_valid_quantities(text, expected):
    """Every suffix kind (decimal SI, binary SI, exponent) and plain numbers give the exact value."""
    assert parse_quantity(text) == expected
    assert is_quantity(text)


BAD = [
    ("12Q", 'unknown suffix "Q"'),
    ("", "must not be empty"),
    ("1.2.3", 'unknown suffix ".3"'),
    ("Mi", "must start with a number"),
    ("1e", 'unknown suffix "e"'),
    ("1 Mi", 'unknown suffix " Mi"'),
    ("1mi", 'unknown suffix "mi"'),
    ("1e1000", "out of range"),
    (True, "string or a number"),
    (None, "string or a number"),
    (float("inf"), "finite"),
]


@pytest.mark.parametrize("text, reason", BAD, ids=[repr(b[0]) for b in BAD])
def test_refuses_malformed_quantities(text, reason):
    """A malformed quantity raises ValueError whose message says what is wrong."""
    with pytest.raises(ValueError, match=reason.replace(".", r"\.").replace("+", r"\+")):
        parse_quantity(text)
    assert not is_quantity(text)
