"""Quantities written back as Kubernetes writes them: apimachinery's canonical `Quantity.String()`.

kctl.machinery.quantity parses "500m" into an exact Fraction; this module goes the other way,
for the messages and statuses that must read as Kubernetes' do: the admission plugins
(kctl.admission.plugins.limitranger, .resourcequota: `maximum cpu usage per Container is 500m,
but limit is 1`, `exceeded quota: q, requested: cpu=1, ...`) and the quota controller's
`status.used` (kctl.controllers.resourcequota). A quantity keeps the format it was written
in, as in apimachinery: binary suffixes stay binary (`1024Mi` -> `1Gi`), decimal ones decimal
(`2000m` -> `2`, `1000` -> `1k`), exponents exponents (`1e3`).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Literal

from kctl.machinery.quantity import parse_quantity

#: apimachinery's three formats
Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_EXPONENT = re.compile(r"[0-9.]+[eE][+-]?[0-9]+$")


def format_of(raw: object) -> Format:
    """The format a written quantity has: BinarySI (`Mi` ...), DecimalExponent (`1e3`) or DecimalSI."""
    if isinstance(raw, str):
        text = raw.strip().lstrip("+-")
        if text.endswith("i"):
            return "BinarySI"
        if _EXPONENT.match(text):
            return "DecimalExponent"
    return "DecimalSI"


def format_quantity(value: Fraction | int, *, fmt: Format = "DecimalSI") -> str:
    """`value` in apimachinery's canonical form for `fmt` (values below a nano unit round up, as there)."""
    value = Fraction(value)
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt == "BinarySI" and magnitude.denominator == 1 and magnitude >= 1024:
        number = magnitude.numerator
        power = 0
        while power < len(_BINARY) - 1 and number % 1024 == 0:
            number //= 1024
            power += 1
        return f"{sign}{number}{_BINARY[power]}"
    exponent, mantissa = _decimal(magnitude)
    if fmt == "DecimalExponent":
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    while exponent > 18:  # beyond E: a bigger mantissa
        exponent -= 3
        mantissa *= 1000
    return f"{sign}{mantissa}{_DECIMAL[exponent]}"


def _decimal(magnitude: Fraction) -> tuple[int, int]:
    """(exponent, integer mantissa): the largest multiple-of-3 exponent >= -9 that leaves an integer."""
    scaled = magnitude * 10**9
    if scaled.denominator != 1:
        scaled = Fraction(math.ceil(scaled))
    mantissa, exponent = int(scaled), -9
    while mantissa % 1000 == 0:
        mantissa //= 1000
        exponent += 3
    return exponent, mantissa


def canonical(raw: str | int | float) -> str:
    """A written quantity in its canonical form (`"0.5"` -> `500m`, `"1024Mi"` -> `1Gi`); ValueError if malformed."""
    return format_quantity(parse_quantity(raw), fmt=format_of(raw))


__all__ = ["Format", "canonical", "format_of", "format_quantity"]
