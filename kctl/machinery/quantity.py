"""Kubernetes resource quantities ("500m", "128Mi", "1e3") parsed into exact fractions.

Schema validation (kctl.admission.validation) checks every Quantity field with
`parse_quantity`; the scheduler and the node agent use it to add up requests and limits.
The grammar is apimachinery's `resource.Quantity`:

    <quantity> ::= <sign><number><suffix>
    <number>   ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>   ::= Ki | Mi | Gi | Ti | Pi | Ei            (powers of 1024)
                 | n | u | m | "" | k | M | G | T | P | E  (powers of 1000)
                 | e<sign><digits> | E<sign><digits>     (decimal exponent)
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5, "Ei": 1024**6}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_SUFFIX = re.compile(r"(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<decimal>[numkMGTPE]?)|[eE](?P<exponent>[+-]?[0-9]+)")
_WHOLE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?|[eE][+-]?[0-9]{1,3})")
#: apimachinery refuses exponents this large; so do we, rather than build huge numbers.
_MAX_EXPONENT = 100


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a Kubernetes quantity; ValueError saying why for a malformed one.

    `parse_quantity("500m") == Fraction(1, 2)`, `parse_quantity("1Ki") == 1024`.
    Plain numbers (YAML `cpu: 2`, `cpu: 0.5`) are accepted as they are.
    """
    if isinstance(value, bool):
        raise ValueError(f"quantity must be a string or a number, not {str(value).lower()}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"quantity must be a finite number, not {value}")
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise ValueError(f"quantity must be a string or a number, not {type(value).__name__}")
    if not value:
        raise ValueError("quantity must not be empty")
    number_match = _NUMBER.match(value)
    if number_match is None:
        raise ValueError(f'quantity "{value}" is not valid: it must start with a number, as in 500m or 128Mi')
    match = _SUFFIX.fullmatch(value, number_match.end())
    if match is None:
        raise ValueError(f'quantity "{value}" is not valid: unknown suffix "{value[number_match.end():]}" '
                         "(expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei, or an exponent like e3)")
    number = Fraction(number_match.group())
    if match["binary"]:
        return number * _BINARY[match["binary"]]
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f'quantity "{value}" is not valid: exponent {exponent} is out of range')
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[match["decimal"] or ""]


def is_quantity(value: object) -> bool:
    """True if `value` parses as a quantity (the JSON Schema format checker for "quantity")."""
    if type(value) is str and _WHOLE.fullmatch(value) and "e" not in value.lower():
        return True  # the common case ("500m", "128Mi"), without building a Fraction
    try:
        parse_quantity(value)  # type: ignore[arg-type]
    except ValueError:
        return False
    return True
