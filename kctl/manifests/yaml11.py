"""Scalar resolution: YAML 1.1 as Kubernetes reads it (go-yaml v2 under sigs.k8s.io/yaml), then its JSON round trip.

`resolve_plain` gives the (tag, value) of a plain scalar: `0644` is the octal 420, `yes`/`no`/
`on`/`off`/`y`/`n` (lower, Capitalised, UPPER) are booleans, `1_000` is 1000, `0x1F` 31, `0o17`
15; `1:20` and timestamps stay strings. `construct_tagged` does the same for `!!int "12"` and
the other core tags. `json_value` is what Kubernetes stores after its JSON round trip (integral
floats become ints, integers past int64 floats, .inf/.nan refused); `json_key` the string a
mapping key becomes (`on:` is "true", `0644:` "420"; null keys refused). Used by the readers
(fast, ruamel.yaml, JSON) and by kctl.manifests.writer (which quotes what would not read back
as a string).
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any

__all__ = ["TAG", "INT64_MIN", "INT64_LIMIT", "WORDS", "RESOLVED_FIRST", "resolve_plain", "json_value", "json_key",
           "construct_tagged"]

TAG = "tag:yaml.org,2002:"
INT64_MIN, INT64_LIMIT, _UINT64_LIMIT = -(1 << 63), 1 << 63, 1 << 64
#: go-yaml v2's resolve table: plain scalars that are looked up, not parsed.
WORDS: dict[str, tuple[str, Any]] = {
    **{word: ("bool", True) for word in "y Y yes Yes YES true True TRUE on On ON".split()},
    **{word: ("bool", False) for word in "n N no No NO false False FALSE off Off OFF".split()},
    **{word: ("null", None) for word in ("~", "null", "Null", "NULL")},
    **{word: ("float", math.nan) for word in (".nan", ".NaN", ".NAN")},
    **{f"{sign}{word}": ("float", -math.inf if sign == "-" else math.inf)
       for sign in ("", "+", "-") for word in (".inf", ".Inf", ".INF")},
}
#: first characters go-yaml v2 tries to resolve; a plain scalar starting otherwise is a str.
RESOLVED_FIRST = frozenset("-+.0123456789yYnNtTfFoO~")
#: go-yaml v2's yamlStyleFloat, matched after underscores are removed.
_YAML_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
#: a Go floating-point literal starting with "." (go-yaml v2 hands these to strconv.ParseFloat).
_GO_DOT_FLOAT = re.compile(r"\.[0-9](?:_?[0-9])*(?:[eE][-+]?[0-9](?:_?[0-9])*)?")
_GO_DIGITS = {"x": (16, "0123456789abcdefABCDEF"), "o": (8, "01234567"), "b": (2, "01")}


def _go_parse_uint(text: str) -> int | None:
    """strconv.ParseUint(text, 0, 64) on text without underscores, or None where Go errs."""
    if not text:
        return None
    base, digits = 10, text
    if len(text) > 1 and text[0] == "0":
        prefix = text[1].lower()
        if prefix in _GO_DIGITS:
            base, digits = _GO_DIGITS[prefix][0], text[2:]
        else:
            base, digits = 8, text[1:]
    allowed = _GO_DIGITS["o"][1] if base == 8 else (
        "0123456789" if base == 10 else _GO_DIGITS["x" if base == 16 else "b"][1])
    if not digits or any(char not in allowed for char in digits) or len(digits.lstrip("0")) > 64:
        return None  # (past 64 digits no base gives a uint64; int() would refuse long decimals)
    value = int(digits, base)
    return value if value < _UINT64_LIMIT else None


def _go_parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64) on text without underscores, or None where Go errs."""
    sign = -1 if text[:1] == "-" else 1
    magnitude = _go_parse_uint(text[1:] if text[:1] in "+-" else text)
    if magnitude is None:
        return None
    value = sign * magnitude
    return value if INT64_MIN <= value < INT64_LIMIT else None


def _go_parse_float(text: str) -> float | None:
    """strconv.ParseFloat(text, 64) for decimal text, or None where Go errs (out of range)."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def resolve_plain(text: str) -> tuple[str, Any]:
    """(tag name, value) of a plain (unquoted, untagged) scalar, as go-yaml v2 resolves it.

    Tags: str, null, bool, int (a Python int in the int64 range), uint (past int64, below
    2**64), float (NaN and infinities included) and merge (`<<`). This is what kubectl and
    the Kubernetes API server read: `0644` is 420, `yes`/`on`/`y` are true, `1_000` is 1000,
    `0x1F` 31, `0o17` 15, `1:20` and timestamps stay strings. `json_value` then gives what
    Kubernetes stores after its JSON round trip.
    """
    if not text:
        return "null", None
    found = WORDS.get(text)
    if found is not None:
        return found
    first = text[0]
    if first not in RESOLVED_FIRST:
        return ("merge", text) if text == "<<" else ("str", text)
    if first == ".":
        if _GO_DOT_FLOAT.fullmatch(text):
            number = _go_parse_float(text)
            if number is not None:
                return "float", number
        return "str", text
    if first not in "-+0123456789":  # (timestamps, `dddd-`, are never numbers: they stay str)
        return "str", text
    plain = text.replace("_", "")
    integer = _go_parse_int(plain)
    if integer is not None:
        return "int", integer
    if plain[:1] != "+" and plain[:1] != "-":
        unsigned = _go_parse_uint(plain)
        if unsigned is not None:
            return "uint", unsigned
    if _YAML_FLOAT.fullmatch(plain):
        number = _go_parse_float(plain)
        if number is not None:
            return "float", number
    return "str", text


def json_value(tag: str, value: Any) -> Any:
    """A resolved scalar as Kubernetes stores it after its JSON round trip.

    A uint (past int64) becomes a float; an integral float in the int64 range becomes an int
    (`1e3` is 1000, `1.0` is 1). NaN and infinities have no JSON form: ValueError, as kubectl
    refuses them (`json: unsupported value: +Inf`).
    """
    if tag == "uint":
        return float(value)
    if tag == "float":
        if not math.isfinite(value):
            raise ValueError(f"{_float_word(value)} (infinity or NaN) cannot be represented in "
                             f"JSON: Kubernetes refuses it (quote it for a string)")
        if value == int(value) and abs(value) < 1e21:
            # Go writes it in the shortest digits that read back, zero-padded ("1e18" is
            # 1000000000000000000): Kubernetes reads that back as an int64 when it fits.
            mantissa, _, exponent = repr(value).partition("e")
            whole, _, fraction = mantissa.partition(".")
            shift = int(exponent or 0) - len(fraction.rstrip("0"))
            digits = int(whole + fraction.rstrip("0"))
            integer = digits * 10 ** shift if shift >= 0 else int(value)
            if INT64_MIN <= integer < INT64_LIMIT:
                return integer
    return value


def _float_word(value: float) -> str:
    if value != value:
        return ".nan"
    return ".inf" if value > 0 else "-.inf"


def _go_float32_text(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32), with .inf/-.inf/.nan (sigs.k8s.io/yaml's keys)."""
    if not math.isfinite(value):
        return _float_word(value)
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:  # past float32: Go's conversion gives an infinity
        return ".inf" if value > 0 else "-.inf"
    if single == 0:
        return "-0" if math.copysign(1.0, single) < 0 else "0"
    for precision in range(1, 10):
        text = f"{single:.{precision - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, _, exponent_text = text.partition("e")
    sign = "-" if mantissa[0] == "-" else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    exponent = int(exponent_text)
    if exponent < -4 or exponent >= 6:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    whole = digits[:exponent + 1].ljust(exponent + 1, "0")
    fraction = digits[exponent + 1:]
    return f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}"


def json_key(tag: str, value: Any, text: str) -> str:
    """A resolved mapping key as sigs.k8s.io/yaml turns it into a JSON key.

    `on:` is "true", `0644:` "420", `1.0:` "1"; null and uint keys are refused (ValueError),
    as kubectl refuses them.
    """
    if tag == "str" or tag == "merge":
        return value if isinstance(value, str) else text
    if tag == "bool":
        return "true" if value else "false"
    if tag == "int":
        return str(value)
    if tag == "float":
        return _go_float32_text(value)
    shown = "null" if tag == "null" else text
    raise ValueError(f"mapping key {shown} is not a string Kubernetes accepts (quote it)")


def construct_tagged(tag: str, text: str) -> tuple[str, Any]:
    """(tag name, value) of a scalar with an explicit core tag (`!!int "12"`), as go-yaml v2
    reads it; ValueError if the text is not of that type."""
    name = tag[len(TAG):] if tag.startswith(TAG) else None
    if name in ("str", "timestamp"):
        return "str", text
    if name == "merge":  # `<<` anywhere but a key
        return "str", text
    if name in ("null", "bool", "int", "float"):
        resolved, value = resolve_plain(text)
        if resolved == name or (name == "int" and resolved == "uint"):
            return resolved, value
        if name == "float" and resolved in ("int", "uint"):
            return "float", float(value)
        if name == "null" and resolved != "null":
            return "null", None  # go-yaml v2: `!!null x` is null
        raise ValueError(f"{text!r} is not {'an' if name == 'int' else 'a'} "
                         f"{ {'bool': 'boolean', 'int': 'integer', 'float': 'number'}[name] }")
    raise ValueError(f"unsupported tag {tag!r}: kctl reads plain data (maps, lists, strings, "
                     f"numbers, booleans, null)")
