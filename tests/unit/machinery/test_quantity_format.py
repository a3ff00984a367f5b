"""Quantities written back in apimachinery's canonical form, keeping the format they were written in."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kctl.machinery.quantity_format import canonical, format_of, format_quantity


@pytest.mark.parametrize("raw, expected", [
    ("500m", "500m"), ("0.5", "500m"), ("2000m", "2"), ("1", "1"), ("1000", "1k"), ("1500", "1500"),
    ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), ("512Mi", "512Mi"), ("1G", "1G"), ("1e3", "1e3"), ("0", "0"),
    ("0.1n", "1n"), (2, "2"), (0.1, "100m"), ("-1", "-1"),
], ids=lambda v: str(v))
def test_canonical_forms(raw, expected):
    """Each written quantity reads back as Kubernetes' Quantity.String() prints it."""
    assert canonical(raw) == expected


@pytest.mark.parametrize("value, fmt, expected", [
    (Fraction(3, 2), "DecimalSI", "1500m"), (Fraction(1024**3), "BinarySI", "1Gi"), (Fraction(100), "BinarySI", "100"),
    (Fraction(1, 2), "BinarySI", "500m"), (Fraction(3000), "DecimalExponent", "3e3"), (Fraction(10**21), "DecimalSI",
                                                                                       "1000E"),
], ids=["decimal", "binary", "binary-small", "binary-fraction", "exponent", "beyond-exa"])
def test_sums_are_written_in_a_given_format(value, fmt, expected):
    """Amounts (sums of usage) are written in the format asked for, falling back to decimal where binary cannot."""
    assert format_quantity(value, fmt=fmt) == expected


@pytest.mark.parametrize("raw, fmt", [("1Gi", "BinarySI"), ("1e3", "DecimalExponent"), ("1E", "DecimalSI"),
                                      ("500m", "DecimalSI"), (3, "DecimalSI")])
def test_format_of(raw, fmt):
    """The format is read from the suffix (`E` alone is exa, not an exponent)."""
    assert format_of(raw) == fmt
