"""Go values over decoded JSON, and how Go's fmt prints them: the value model of kctl's Go templates.

Values follow kubectl's unstructured objects: JSON integers are int64, other numbers float64,
objects `map[string]interface {}` (printed `map[k:v]` in key order); `MISSING` is a key that is
not there (Go's invalid reflect.Value, printed `<no value>`) and `Int` an integer constant written
in the template (Go's `int`). `go_sprint_value`/`sprint`/`go_sprintf` are fmt.Sprint/Sprintf,
`go_quote` strconv.Quote, `truth` text/template's isTrue. Called by the function library
(kctl.output.gotemplate.funcs), the parser (number constants) and execution.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["MISSING", "Int", "go_type", "go_sprint_value", "go_quote", "truth", "sprint", "go_sprintf"]

MISSING = object()  # Go's invalid reflect.Value: a key that is not there ("<no value>")


class Int(int):
    """An integer constant written in the template: Go's `int` (JSON integers are int64)."""


def go_type(value: Any) -> str:
    """The Go type name of a decoded JSON value, as fmt and error messages show it."""
    if value is MISSING or value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Int):
        return "int"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    return type(value).__name__


def _go_float(f: float, verb: str = "v") -> str:
    """fmt's %v of a float64 (strconv 'g' with the shortest repr, exponent when < -4 or >= 21)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    text = repr(f)
    mantissa, _, exp = text.partition("e")
    digits = mantissa.replace("-", "").replace(".", "").lstrip("0") or "0"
    exponent = int(exp) if exp else None
    if exponent is None:
        # repr gave positional: find the decimal exponent of the leading digit
        exponent = math.floor(math.log10(abs(f)))
    if exponent < -4 or exponent >= 21:
        digits = digits.rstrip("0") or "0"
        lead, rest = digits[0], digits[1:]
        sign = "-" if f < 0 else ""
        return f"{sign}{lead}{'.' + rest if rest else ''}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    out = mantissa if not exp else format(f, "f")
    if "." in out:
        out = out.rstrip("0").rstrip(".")
    return out


def go_sprint_value(value: Any) -> str:
    """fmt.Sprint of one value (%v)."""
    if value is MISSING:
        return "<no value>"
    if value is None:
        return "<nil>"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_sprint_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_sprint_value(v) for v in value) + "]"
    return str(value)


def go_quote(text: str) -> str:
    """strconv.Quote: Go's double-quoted string with Go escapes (printable Unicode kept)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append("\\" + "abfnrtv"["\a\b\f\n\r\t\v".index(ch)])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def truth(value: Any) -> bool:
    """text/template's isTrue: the zero value of its type is false."""
    if value is MISSING or value is None:
        return False
    if isinstance(value, (bool, int, float, str, dict, list)):
        return bool(value)
    return True


def sprint(args: list) -> str:
    """fmt.Sprint: a space between operands when neither is a string."""
    out = []
    for i, arg in enumerate(args):
        if i and not isinstance(arg, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(go_sprint_value(arg))
    return "".join(out)


_VERB = re.compile(r"%([-+# 0]*)(\d+|\*)?(?:\.(\d+|\*)?)?([a-zA-Z%])")


def _bad_verb(verb: str, arg: Any) -> str:
    if arg is None or arg is MISSING:
        return f"%!{verb}(<nil>)"
    return f"%!{verb}({go_type(arg)}={go_sprint_value(arg)})"


def _format_one(flags: str, width: str | None, prec: str | None, verb: str, arg: Any) -> str:
    if verb == "s" and (arg is None or arg is MISSING):
        return _pad(_bad_verb(verb, arg), flags, width)
    if verb in "vs":
        if verb == "s" and not isinstance(arg, (str, dict, list)) and arg is not None:
            if isinstance(arg, bool) or isinstance(arg, (int, float)):
                return _pad(_bad_verb(verb, arg), flags, width)
        text = go_sprint_value(arg) if not (verb == "s" and isinstance(arg, (dict, list))) \
            else _sprint_verb(arg, "s")
        if prec is not None and isinstance(arg, str):
            text = text[:int(prec)]
        if verb == "v" and isinstance(arg, float) and prec is not None:
            text = f"{arg:.{int(prec)}g}"
    elif verb == "d":
        if isinstance(arg, bool) or not isinstance(arg, int):
            if isinstance(arg, list):
                text = "[" + " ".join(_format_one(flags, None, None, "d", a) for a in arg) + "]"
            else:
                return _bad_verb(verb, arg)
        else:
            text = f"{arg:+d}" if "+" in flags else str(arg)
            if "0" in flags and width and "-" not in flags:
                sign = "-" if arg < 0 or "+" in flags else ""
                sign = text[0] if text[0] in "+-" else ""
                body = text[len(sign):]
                return sign + body.rjust(int(width) - len(sign), "0")
    elif verb in "feEgG":
        if isinstance(arg, bool) or not isinstance(arg, (int, float)) or isinstance(arg, int):
            return _bad_verb(verb, arg)
        p = 6 if prec is None else int(prec)
        if verb in "gG" and prec is None:
            text = _go_float(arg)
        else:
            text = format(arg, f"{'+' if '+' in flags else ''}.{p}{verb}")
            if verb in "eE":
                text = re.sub(r"e([+-])(\d)$", r"e\g<1>0\2", text)
    elif verb == "t":
        if not isinstance(arg, bool):
            return _bad_verb(verb, arg)
        text = "true" if arg else "false"
    elif verb == "q":
        if isinstance(arg, str):
            text = go_quote(arg)
        elif isinstance(arg, int) and not isinstance(arg, bool):
            text = "'" + chr(arg) + "'" if 0 <= arg < 0x110000 else _bad_verb(verb, arg)
        elif isinstance(arg, list):
            text = "[" + " ".join(_format_one("", None, None, "q", a) for a in arg) + "]"
        else:
            return _bad_verb(verb, arg)
    elif verb in "xX":
        if isinstance(arg, str):
            text = arg.encode().hex()
        elif isinstance(arg, int) and not isinstance(arg, bool):
            text = format(arg, "x")
        else:
            return _bad_verb(verb, arg)
        if verb == "X":
            text = text.upper()
    else:
        return _bad_verb(verb, arg)
    return _pad(text, flags, width)


def _sprint_verb(value: Any, verb: str) -> str:
    """%s applied inside a map or slice (fmt recurses with the same verb)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_sprint_verb(value[k], verb)}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_sprint_verb(v, verb) for v in value) + "]"
    if isinstance(value, str):
        return value
    return _bad_verb(verb, value)


def _pad(text: str, flags: str, width: str | None) -> str:
    if not width:
        return text
    w = int(width)
    return text.ljust(w) if "-" in flags else text.rjust(w)


def go_sprintf(fmt: str, args: list) -> str:
    """fmt.Sprintf with the verbs templates use (%v %s %d %q %f %t %x %%, width and precision)."""
    out: list[str] = []
    pos = 0
    argi = 0
    for m in _VERB.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        flags, width, prec, verb = m.group(1), m.group(2), m.group(3), m.group(4)
        if verb == "%":
            out.append("%")
            continue
        if width == "*":
            width = str(args[argi]) if argi < len(args) else None
            argi += 1
        if prec == "*":
            prec = str(args[argi]) if argi < len(args) else None
            argi += 1
        if argi >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        out.append(_format_one(flags, width, prec, verb, args[argi]))
        argi += 1
    out.append(fmt[pos:])
    if argi < len(args):
        extra = ", ".join(f"{go_type(a)}={go_sprint_value(a)}" for a in args[argi:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)
