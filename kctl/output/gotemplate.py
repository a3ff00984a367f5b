"""Go's text/template, the subset `kubectl -o go-template=` users write, over decoded JSON.

Parsing (`parse`) covers text and `{{actions}}` with `{{-`/`-}}` trim markers and
`{{/* comments */}}`; fields `.a.b`, `$var.a`, `$`, `(pipeline).a`; literals (strings,
raw strings, numbers, true/false/nil); pipelines with `|`; `$x := ...` / `$x = ...`;
`if`/`else if`/`else`/`end`, `range` (with `$i, $e :=`, `else`, `break`, `continue`),
`with`/`else`. Functions: Go's `and or not len index print printf println eq ne lt le
gt ge`, and kubectl's `base64decode` and `exists`. Values follow kubectl's unstructured
objects: JSON integers are int64, other numbers float64, objects `map[string]interface {}`
(printed `map[k:v]`, ranged in key order), a missing key prints `<no value>`.

Errors carry Go's wording (`template: output:1: unclosed action`, `template:
output:1:2: executing "output" at <.x>: ...`) so the CLI can print them as kubectl does.
Called by kctl.output.printers; imported only when a go-template output is asked for.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["TemplateError", "ParseError", "ExecError", "GoTemplate", "parse", "go_quote", "go_type"]

_NAME = "output"


class TemplateError(Exception):
    """A template that cannot be parsed or executed; the message is Go's."""


class ParseError(TemplateError):
    """`template: output:LINE: ...` as text/template's parser says it."""


class ExecError(TemplateError):
    """`template: output:LINE:COL: executing "output" at <NODE>: ...`."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


_MISSING = object()  # Go's invalid reflect.Value: a key that is not there ("<no value>")


class _Int(int):
    """An integer constant written in the template: Go's `int` (JSON integers are int64)."""


# --- values -------------------------------------------------------------------------

def go_type(value: Any) -> str:
    """The Go type name of a decoded JSON value, as fmt and error messages show it."""
    if value is _MISSING or value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, _Int):
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
    if value is _MISSING:
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


def _truth(value: Any) -> bool:
    """text/template's isTrue: the zero value of its type is false."""
    if value is _MISSING or value is None:
        return False
    if isinstance(value, (bool, int, float, str, dict, list)):
        return bool(value)
    return True


def _sprint(args: list) -> str:
    """fmt.Sprint: a space between operands when neither is a string."""
    out = []
    for i, arg in enumerate(args):
        if i and not isinstance(arg, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(go_sprint_value(arg))
    return "".join(out)


_VERB = re.compile(r"%([-+# 0]*)(\d+|\*)?(?:\.(\d+|\*)?)?([a-zA-Z%])")


def _bad_verb(verb: str, arg: Any) -> str:
    if arg is None or arg is _MISSING:
        return f"%!{verb}(<nil>)"
    return f"%!{verb}({go_type(arg)}={go_sprint_value(arg)})"


def _format_one(flags: str, width: str | None, prec: str | None, verb: str, arg: Any) -> str:
    if verb == "s" and (arg is None or arg is _MISSING):
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


# --- functions ----------------------------------------------------------------------

class _FuncError(Exception):
    """An error a function returns ("error calling NAME: ...")."""


_INT, _FLOAT, _STR, _BOOL = "int", "float", "string", "bool"


def _basic_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return _BOOL
    if isinstance(value, int):
        return _INT
    if isinstance(value, float):
        return _FLOAT
    if isinstance(value, str):
        return _STR
    return None


def _eq(a: Any, *others: Any) -> bool:
    if not others:
        raise _FuncError("missing argument for comparison")
    ka = _basic_kind(a)
    for b in others:
        kb = _basic_kind(b)
        if ka != kb:
            if a is not _MISSING and b is not _MISSING and (ka is not None or kb is not None):
                raise _FuncError("incompatible types for comparison")
            if ka is None and kb is None:
                if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
                    if a is None or b is None or a is _MISSING or b is _MISSING:
                        continue
                    raise _FuncError(f"non-comparable type {go_sprint_value(a)}: {go_type(a)}")
                if (a in (None, _MISSING)) == (b in (None, _MISSING)):
                    return True
            continue
        if ka is None:
            if a in (None, _MISSING) and b in (None, _MISSING):
                return True
            if a in (None, _MISSING) or b in (None, _MISSING):
                continue
            raise _FuncError(f"non-comparable type {go_sprint_value(a)}: {go_type(a)}")
        if a == b:
            return True
    return False


def _ne(a: Any, b: Any) -> bool:
    return not _eq(a, b)


def _ordered(a: Any, b: Any) -> tuple[Any, Any]:
    ka, kb = _basic_kind(a), _basic_kind(b)
    if ka is None or ka == _BOOL:
        raise _FuncError("invalid type for comparison")
    if kb is None or kb == _BOOL:
        raise _FuncError("invalid type for comparison")
    if ka != kb:
        raise _FuncError("incompatible types for comparison")
    return a, b


def _lt(a: Any, b: Any) -> bool:
    a, b = _ordered(a, b)
    return a < b


def _le(a: Any, b: Any) -> bool:
    a, b = _ordered(a, b)
    return a <= b


def _gt(a: Any, b: Any) -> bool:
    a, b = _ordered(a, b)
    return a > b


def _ge(a: Any, b: Any) -> bool:
    a, b = _ordered(a, b)
    return a >= b


def _len(value: Any) -> int:
    if isinstance(value, (str, dict, list)):
        return len(value.encode() if isinstance(value, str) else value)
    raise _FuncError(f"len of type {go_type(value)}")


def _index(item: Any, *indexes: Any) -> Any:
    if item is None or item is _MISSING:
        raise _FuncError("index of untyped nil")
    for index in indexes:
        if isinstance(item, list) or isinstance(item, str):
            if isinstance(index, bool) or not isinstance(index, int):
                raise _FuncError(f"cannot index slice/array with type {go_type(index)}")
            if not 0 <= index < len(item):
                raise _FuncError(f"index out of range: {index}")
            item = item[index] if isinstance(item, list) else item.encode()[index]
        elif isinstance(item, dict):
            if not isinstance(index, str):
                if index is None or index is _MISSING:
                    raise _FuncError("value is nil; should be of type string")
                raise _FuncError(f"value has type {go_type(index)}; should be string")
            item = item.get(index, _MISSING)
        elif item is None or item is _MISSING:
            raise _FuncError("index of nil pointer")
        else:
            raise _FuncError(f"can't index item of type {go_type(item)}")
    return item


def _base64decode(value: Any) -> str:
    if not isinstance(value, str):
        raise _FuncError(f"wrong type for value; expected string; got {go_type(value)}")
    try:
        return base64.b64decode(value.encode(), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        at = next((i for i, ch in enumerate(value) if ch not in alphabet), len(value) - len(value) % 4)
        raise _FuncError(f"base64 decode failed: illegal base64 data at input byte {at}") from None


def _exists(item: Any, *indexes: Any) -> bool:
    """kubectl's `exists`: whether the chain of keys/indexes leads somewhere."""
    for index in indexes:
        if isinstance(item, dict) and isinstance(index, str) and index in item:
            item = item[index]
        elif isinstance(item, list) and isinstance(index, int) and 0 <= index < len(item):
            item = item[index]
        else:
            return False
    return True


def _printf(fmt: Any, *args: Any) -> str:
    if not isinstance(fmt, str):
        raise _FuncError(f"wrong type for value; expected string; got {go_type(fmt)}")
    return go_sprintf(fmt, list(args))


_FUNCS: dict[str, Callable[..., Any]] = {
    "eq": _eq, "ne": _ne, "lt": _lt, "le": _le, "gt": _gt, "ge": _ge, "len": _len, "index": _index,
    "print": lambda *a: _sprint(list(a)), "println": lambda *a: " ".join(go_sprint_value(x) for x in a) + "\n",
    "printf": _printf, "base64decode": _base64decode, "exists": _exists,
    "not": lambda a: not _truth(a),
}
#: functions that take their arguments unevaluated (short-circuit), as Go 1.18+
_LAZY = {"and", "or"}
_ARITY = {"not": 1, "len": 1, "ne": 2, "lt": 2, "le": 2, "gt": 2, "ge": 2, "base64decode": 1}


# --- parse tree ---------------------------------------------------------------------

@dataclass
class _Node:
    pos: int


@dataclass
class _Text(_Node):
    text: str


@dataclass
class _Field(_Node):
    """`.a.b` (names empty: `.`); on a variable: `$x.a`; on a parenthesised pipeline: `(p).a`."""

    names: tuple[str, ...]
    var: str | None = None
    base: Any = None

    def __str__(self) -> str:
        tail = "".join("." + n for n in self.names)
        if self.base is not None:
            return f"({self.base}){tail}"
        if self.var is not None:
            return self.var + tail
        return tail or "."


@dataclass
class _Literal(_Node):
    value: Any
    source: str

    def __str__(self) -> str:
        return self.source


@dataclass
class _Ident(_Node):
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass
class _Command(_Node):
    args: list

    def __str__(self) -> str:
        return " ".join(f"({a})" if isinstance(a, _Pipeline) else str(a) for a in self.args)


@dataclass
class _Pipeline(_Node):
    decl: list[str] = field(default_factory=list)
    assign: bool = False
    cmds: list[_Command] = field(default_factory=list)

    def __str__(self) -> str:
        text = " | ".join(str(c) for c in self.cmds)
        if self.decl:
            text = ", ".join(self.decl) + (" = " if self.assign else " := ") + text
        return text


@dataclass
class _Action(_Node):
    pipe: _Pipeline


@dataclass
class _Branch(_Node):
    kind: str  # if | range | with
    pipe: _Pipeline
    body: list
    other: list | None


@dataclass
class _Loop(_Node):
    kind: str  # break | continue


# --- lexing ---------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<declare>:=)
  | (?P<assign>=)
  | (?P<pipe>\|)
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<comma>,)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<char>'(?:[^'\\\n]|\\.)+')
  | (?P<number>[+-]?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|(?:\d[\d_]*)?\.?\d[\d_]*(?:[eE][+-]?\d+)?))
  | (?P<var>\$[A-Za-z0-9_]*)
  | (?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+|\.)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
""", re.VERBOSE)


def _go_unquote(text: str) -> str:
    if text.startswith("`"):
        return text[1:-1]
    body = text[1:-1]
    out = []
    i = 0
    simple = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
              '"': '"', "'": "'"}
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
        elif nxt == "x":
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        elif nxt == "u":
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
        elif nxt == "U":
            out.append(chr(int(body[i + 2:i + 10], 16)))
            i += 10
        elif nxt in "01234567":
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
        else:
            raise ValueError(f"invalid syntax: {text}")
    return "".join(out)


def _go_number(text: str) -> int | float:
    clean = text.replace("_", "")
    try:
        return int(clean, 0)
    except ValueError:
        pass
    if clean.lstrip("+-").isdigit():
        return int(clean)
    return float(clean)


# --- parser ---------------------------------------------------------------------------

class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.vars: list[list[str]] = [["$"]]

    def fail(self, pos: int, message: str) -> ParseError:
        line = 1 + self.source.count("\n", 0, pos)
        return ParseError(f"template: {_NAME}:{line}: {message}")

    # Split into text and action items, applying trim markers.
    def items(self) -> list[tuple[str, int, str]]:
        src = self.source
        out: list[tuple[str, int, str]] = []
        pos = 0
        trim_next = False
        while True:
            start = src.find("{{", pos)
            text = src[pos:] if start < 0 else src[pos:start]
            left_trim = start >= 0 and src[start + 2:start + 3] == "-" and src[start + 3:start + 4] in (
                " ", "\t", "\r", "\n")
            if trim_next:
                text = text.lstrip(" \t\r\n")
            if left_trim:
                text = text.rstrip(" \t\r\n")
            if text:
                out.append(("text", pos, text))
            if start < 0:
                return out
            inner_start = start + (4 if left_trim else 2)
            # find the closing }} outside quotes
            i = inner_start
            end = -1
            comment = src.startswith("/*", inner_start)
            if comment:
                close = src.find("*/", inner_start)
                if close < 0:
                    raise self.fail(start, "unclosed comment")
                i = close + 2
            while i < len(src):
                ch = src[i]
                if ch in "\"'`":
                    j = i + 1
                    while j < len(src) and src[j] != ch:
                        if src[j] == "\\" and ch != "`":
                            j += 1
                        if src[j] == "\n" and ch != "`":
                            raise self.fail(i, "unterminated quoted string" if ch == '"'
                                            else "unterminated character constant")
                        j += 1
                    if j >= len(src):
                        raise self.fail(i, "unterminated quoted string" if ch == '"' else
                                        "unterminated raw quoted string" if ch == "`"
                                        else "unterminated character constant")
                    i = j + 1
                    continue
                if src.startswith(" -}}", i) or src.startswith("\t-}}", i) or src.startswith("\n-}}", i):
                    end, trim_next, close_len = i, True, 4
                    break
                if src.startswith("}}", i):
                    end, trim_next, close_len = i, False, 2
                    break
                i += 1
            if end < 0:
                raise self.fail(start, "unclosed action")
            body = src[inner_start:end]
            if comment:
                stripped = body.strip()
                if not (stripped.startswith("/*") and stripped.endswith("*/")):
                    raise self.fail(start, "comment ends before closing delimiter")
            else:
                out.append(("action", inner_start, body))
            pos = end + close_len

    def parse(self) -> list:
        self.stream = self.items()
        self.index = 0
        nodes, end = self.parse_list(top=True)
        return nodes

    def parse_list(self, *, top: bool = False, in_range: bool = False) -> tuple[list, tuple[str, int, str] | None]:
        nodes: list = []
        while self.index < len(self.stream):
            kind, pos, body = self.stream[self.index]
            self.index += 1
            if kind == "text":
                nodes.append(_Text(pos, body))
                continue
            words = body.strip()
            keyword = re.match(r"[A-Za-z]+", words)
            word = keyword.group(0) if keyword else ""
            rest = words[len(word):] if word else words
            if word in ("end", "else") and (not rest or not rest[0].isalnum()):
                if top:
                    raise self.fail(pos, f"unexpected {{{{{word}}}}}")
                return nodes, (word, pos, rest.strip())
            if word in ("if", "range", "with") and (not rest or not rest[0].isalnum()):
                rest_pos = pos + len(body) - len(body.lstrip()) + len(word)
                nodes.append(self.parse_branch(word, rest_pos, rest, in_range=in_range))
                continue
            if word in ("break", "continue") and (not rest or not rest[0].isalnum()):
                if not in_range:
                    raise self.fail(pos, f"{{{{{word}}}}} outside {{{{range}}}}")
                if rest.strip():
                    raise self.fail(pos, f"unexpected {rest.strip()!r} in {word}")
                nodes.append(_Loop(pos, word))
                continue
            if word in ("define", "template", "block") and (not rest or not rest[0].isalnum()):
                raise self.fail(pos, f"{{{{{word}}}}} is not supported by kctl's go-template")
            pipe = self.parse_pipeline(body, pos, context="command")
            nodes.append(_Action(pos, pipe))
        if not top:
            raise self.fail(len(self.source), "unexpected EOF")
        return nodes, None

    def parse_branch(self, kind: str, pos: int, rest: str, *, in_range: bool) -> _Branch:
        self.vars.append([])
        pipe = self.parse_pipeline(rest, pos, context=kind, allow_range_decl=kind == "range")
        body, end = self.parse_list(in_range=in_range or kind == "range")
        other = None
        word, epos, erest = end
        if word == "else":
            if erest:
                m = re.match(r"(if|with)\b", erest)
                if m is None or (m.group(1) != kind and not (kind == "if" and m.group(1) == "if")):
                    if m is not None and m.group(1) == "with" and kind == "with":
                        pass
                    else:
                        raise self.fail(epos, f"unexpected {erest!r} in else")
                # `else if` / `else with`: a nested branch that shares our {{end}}
                self.vars.append([])
                inner_pipe = self.parse_pipeline(erest[len(m.group(1)):], epos, context=m.group(1))
                inner_body, inner_end = self.parse_list(in_range=in_range)
                nested = self._finish_chain(m.group(1), epos, inner_pipe, inner_body, inner_end, in_range=in_range)
                self.vars.pop()
                other = [nested]
            else:
                other, end2 = self.parse_list(in_range=in_range)
                if end2[0] != "end":
                    raise self.fail(end2[1], "expected end; found {{else}}")
        self.vars.pop()
        return _Branch(pos, kind, pipe, body, other)

    def _finish_chain(self, kind: str, pos: int, pipe: _Pipeline, body: list, end, *, in_range: bool) -> _Branch:
        word, epos, erest = end
        other = None
        if word == "else":
            if erest:
                m = re.match(r"(if|with)\b", erest)
                if m is None:
                    raise self.fail(epos, f"unexpected {erest!r} in else")
                self.vars.append([])
                inner_pipe = self.parse_pipeline(erest[len(m.group(1)):], epos, context=m.group(1))
                inner_body, inner_end = self.parse_list(in_range=in_range)
                other = [self._finish_chain(m.group(1), epos, inner_pipe, inner_body, inner_end,
                                            in_range=in_range)]
                self.vars.pop()
            else:
                other, end2 = self.parse_list(in_range=in_range)
                if end2[0] != "end":
                    raise self.fail(end2[1], "expected end; found {{else}}")
        return _Branch(pos, kind, pipe, body, other)

    def declared(self, name: str) -> bool:
        return any(name in scope for scope in self.vars)

    def tokens(self, body: str, pos: int) -> list[tuple[str, str, int]]:
        out = []
        i = 0
        while i < len(body):
            m = _TOKEN.match(body, i)
            if m is None:
                ch = body[i]
                raise self.fail(pos, f"unexpected {ch!r} in command" if ch != "}" else
                                "unexpected \"}\" in operand")
            kind = m.lastgroup
            if kind != "space":
                text = m.group(0)
                # a field directly after a closing paren or a variable belongs to it
                out.append((kind, text, pos + i))
            i = m.end()
        return out

    def parse_pipeline(self, body: str, pos: int, *, context: str, allow_range_decl: bool = False) -> _Pipeline:
        toks = self.tokens(body, pos)
        pipe = _Pipeline(pos)
        # declarations: $x := / $x = / $i, $e :=
        if toks and toks[0][0] == "var":
            if len(toks) > 1 and toks[1][0] in ("declare", "assign"):
                pipe.decl = [toks[0][1]]
                pipe.assign = toks[1][0] == "assign"
                toks = toks[2:]
            elif allow_range_decl and len(toks) > 3 and toks[1][0] == "comma" and toks[2][0] == "var" \
                    and toks[3][0] in ("declare", "assign"):
                pipe.decl = [toks[0][1], toks[2][1]]
                pipe.assign = toks[3][0] == "assign"
                toks = toks[4:]
        if pipe.assign:
            for name in pipe.decl:
                if not self.declared(name):
                    raise self.fail(pos, f"undefined variable \"{name}\"")
        elif pipe.decl:
            self.vars[-1].extend(pipe.decl)
        self.toks, self.tpos = toks, 0
        pipe.cmds = self.parse_commands(context, pos)
        if not pipe.cmds:
            raise self.fail(pos, f"missing value for {context}")
        return pipe

    def parse_commands(self, context: str, pos: int, *, until_paren: bool = False) -> list[_Command]:
        cmds: list[_Command] = []
        args: list = []
        while self.tpos < len(self.toks):
            kind, text, tpos = self.toks[self.tpos]
            if kind == "rparen":
                if until_paren:
                    break
                raise self.fail(pos, "unexpected right paren")
            self.tpos += 1
            if kind == "pipe":
                if not args:
                    raise self.fail(pos, 'unexpected "|" in command' if not cmds else "missing command")
                cmds.append(_Command(args[0].pos, args))
                args = []
                continue
            if kind in ("declare", "assign", "comma"):
                raise self.fail(pos, f"unexpected {text!r} in {'operand' if args else 'command'}")
            args.append(self.operand(kind, text, tpos, pos))
        if args:
            cmds.append(_Command(args[0].pos, args))
        return cmds

    def operand(self, kind: str, text: str, tpos: int, pos: int) -> Any:
        if kind == "lparen":
            inner = _Pipeline(tpos)
            inner.cmds = self.parse_commands(context="parenthesized pipeline", pos=pos, until_paren=True)
            if self.tpos >= len(self.toks) or self.toks[self.tpos][0] != "rparen":
                raise self.fail(pos, "unclosed left paren")
            self.tpos += 1
            if not inner.cmds:
                raise self.fail(pos, "missing value for parenthesized pipeline")
            node: Any = inner
            names = self.trailing_fields()
            if names:
                node = _Field(tpos, names, base=inner)
            return node
        if kind == "string" or kind == "raw":
            try:
                return _Literal(tpos, _go_unquote(text), text)
            except (ValueError, IndexError):
                raise self.fail(pos, f"invalid syntax: {text}") from None
        if kind == "char":
            try:
                return _Literal(tpos, ord(_go_unquote('"' + text[1:-1] + '"')), text)
            except (ValueError, TypeError):
                raise self.fail(pos, f"malformed character constant: {text}") from None
        if kind == "number":
            try:
                number = _go_number(text)
                return _Literal(tpos, _Int(number) if isinstance(number, int) else number, text)
            except ValueError:
                raise self.fail(pos, f"bad number syntax: \"{text}\"") from None
        if kind == "var":
            if not self.declared(text):
                raise self.fail(pos, f"undefined variable \"{text}\"")
            return _Field(tpos, self.trailing_fields(), var=text)
        if kind == "field":
            names = tuple(n for n in text.split(".") if n)
            # Go reports a chain of fields at its second `.name`
            second = text.find(".", 1) if len(names) > 1 else 0
            return _Field(tpos + second, names)
        if kind == "ident":
            if text in ("true", "false"):
                return _Literal(tpos, text == "true", text)
            if text == "nil":
                return _Literal(tpos, None, "nil")
            if text not in _FUNCS and text not in _LAZY:
                raise self.fail(pos, f"function \"{text}\" not defined")
            return _Ident(tpos, text)
        raise self.fail(pos, f"unexpected {text!r} in operand")

    def trailing_fields(self) -> tuple[str, ...]:
        if self.tpos < len(self.toks) and self.toks[self.tpos][0] == "field" and self.toks[self.tpos][1] != ".":
            text = self.toks[self.tpos][1]
            self.tpos += 1
            return tuple(n for n in text.split(".") if n)
        return ()


# --- execution --------------------------------------------------------------------------

class _State:
    def __init__(self, source: str, root: Any) -> None:
        self.source = source
        self.vars: list[tuple[str, Any]] = [("$", root)]
        self.out: list[str] = []

    def fail(self, node: Any, message: str) -> ExecError:
        pos = node.pos
        line = 1 + self.source.count("\n", 0, pos)
        col = pos - (self.source.rfind("\n", 0, pos) + 1)
        return ExecError(f"template: {_NAME}:{line}:{col}: executing \"{_NAME}\" at <{node}>: {message}")

    def var(self, name: str) -> Any:
        for key, value in reversed(self.vars):
            if key == name:
                return value
        return _MISSING

    def set_var(self, name: str, value: Any) -> None:
        for i in range(len(self.vars) - 1, -1, -1):
            if self.vars[i][0] == name:
                self.vars[i] = (name, value)
                return


def _field_chain(state: _State, node: Any, value: Any, names: tuple[str, ...], has_args: bool) -> Any:
    for i, name in enumerate(names):
        if value is _MISSING:
            return _MISSING
        if isinstance(value, dict):
            value = value.get(name, _MISSING)
            continue
        if value is None:
            raise state.fail(node, f"nil pointer evaluating interface {{}}.{name}")
        raise state.fail(node, f"can't evaluate field {name} in type interface {{}}")
    return value


def _eval_arg(state: _State, dot: Any, arg: Any) -> Any:
    if isinstance(arg, _Literal):
        return arg.value
    if isinstance(arg, _Field):
        return _eval_field(state, dot, arg, has_args=False)
    if isinstance(arg, _Pipeline):
        return _eval_pipeline(state, dot, arg)
    if isinstance(arg, _Ident):
        return _call(state, dot, arg, [], _MISSING, node=arg)
    raise state.fail(arg, "can't handle argument")


def _eval_field(state: _State, dot: Any, node: _Field, *, has_args: bool) -> Any:
    if node.base is not None:
        start = _eval_pipeline(state, dot, node.base)
    elif node.var is not None:
        start = state.var(node.var)
    else:
        start = dot
    return _field_chain(state, node, start, node.names, has_args)


def _call(state: _State, dot: Any, ident: _Ident, args: list, final: Any, *, node: Any) -> Any:
    name = ident.name
    if name in _LAZY:
        values = list(args) + ([final] if final is not _MISSING else [])
        if not values:
            raise state.fail(node, f"wrong number of args for {name}: want at least 1 got 0")
        result: Any = _MISSING
        for v in values:
            result = v if not isinstance(v, _Node) else _eval_arg(state, dot, v)
            if (name == "and") != _truth(result):
                return result
        return result
    evaluated = [_eval_arg(state, dot, a) for a in args]
    if final is not _MISSING:
        evaluated.append(final)
    want = _ARITY.get(name)
    if want is not None and len(evaluated) != want:
        raise state.fail(node, f"wrong number of args for {name}: want {want} got {len(evaluated)}")
    if name in ("index", "exists", "printf") and not evaluated:
        raise state.fail(node, f"wrong number of args for {name}: want at least 1 got 0")
    try:
        return _FUNCS[name](*evaluated)
    except _FuncError as exc:
        raise state.fail(node, f"error calling {name}: {exc}") from None


def _eval_command(state: _State, dot: Any, cmd: _Command, final: Any) -> Any:
    first, rest = cmd.args[0], cmd.args[1:]
    if isinstance(first, _Ident):
        return _call(state, dot, first, rest, final, node=cmd)
    if rest or final is not _MISSING:
        if isinstance(first, _Field) and first.names:
            raise state.fail(first, f"{first.names[-1]} is not a method but has arguments")
        raise state.fail(first, f"can't give argument to non-function {first}")
    return _eval_arg(state, dot, first)


def _eval_pipeline(state: _State, dot: Any, pipe: _Pipeline) -> Any:
    value: Any = _MISSING
    for cmd in pipe.cmds:
        value = _eval_command(state, dot, cmd, value)
    for name in pipe.decl:
        if pipe.assign:
            state.set_var(name, value)
        else:
            state.vars.append((name, value))
    return value


def _walk(state: _State, dot: Any, nodes: list) -> None:
    for node in nodes:
        if isinstance(node, _Text):
            state.out.append(node.text)
        elif isinstance(node, _Action):
            value = _eval_pipeline(state, dot, node.pipe)
            if not node.pipe.decl:
                state.out.append("<no value>" if value is None else go_sprint_value(value))
        elif isinstance(node, _Loop):
            raise _Break() if node.kind == "break" else _Continue()
        elif isinstance(node, _Branch):
            mark = len(state.vars)
            try:
                _branch(state, dot, node)
            finally:
                del state.vars[mark:]


def _branch(state: _State, dot: Any, node: _Branch) -> None:
    if node.kind == "range":
        pipe = _Pipeline(node.pipe.pos, [], False, node.pipe.cmds)
        value = _eval_pipeline(state, dot, pipe)
        if isinstance(value, dict):
            pairs = [(k, value[k]) for k in sorted(value)]
        elif isinstance(value, list):
            pairs = list(enumerate(value))
        elif value is None or value is _MISSING:
            pairs = []
        else:
            last = node.pipe.cmds[-1]
            raise state.fail(last.args[0] if len(last.args) == 1 else last,
                             f"range can't iterate over {go_sprint_value(value)}")
        if not pairs:
            if node.other is not None:
                _walk(state, dot, node.other)
            return
        for key, elem in pairs:
            mark = len(state.vars)
            if len(node.pipe.decl) == 1:
                state.vars.append((node.pipe.decl[0], elem))
            elif len(node.pipe.decl) == 2:
                state.vars.append((node.pipe.decl[0], key))
                state.vars.append((node.pipe.decl[1], elem))
            try:
                _walk(state, elem, node.body)
            except _Continue:
                pass
            except _Break:
                break
            finally:
                del state.vars[mark:]
        return
    value = _eval_pipeline(state, dot, node.pipe)
    if _truth(value):
        _walk(state, value if node.kind == "with" else dot, node.body)
    elif node.other is not None:
        _walk(state, dot, node.other)


class GoTemplate:
    """A parsed template; `execute(data)` renders it (ExecError on failure)."""

    def __init__(self, source: str, nodes: list) -> None:
        self.source = source
        self._nodes = nodes

    def execute(self, data: Any) -> str:
        state = _State(self.source, data)
        try:
            _walk(state, data, self._nodes)
        except RecursionError:
            raise ExecError(f"template: {_NAME}: exceeded maximum template depth") from None
        return "".join(state.out)


def parse(source: str) -> GoTemplate:
    """Parse a Go template; ParseError with Go's message if it is not one."""
    try:
        return GoTemplate(source, _Parser(source).parse())
    except RecursionError:
        raise ParseError(f"template: {_NAME}: nesting too deep") from None
