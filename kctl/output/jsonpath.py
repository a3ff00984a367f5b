"""kubectl's JSONPath templates: `-o jsonpath=...`, `-o custom-columns=...` cells.

The template language (text outside braces, `{...}` actions, `{range EXPR}...{end}`,
string literals such as `{"\\n"}`) and kubectl's path syntax (`.a.b`, `[0]`, `[-1]`,
`[0:2]`, `[*]`, `..x`, `[?(@.x=="y")]`, escaped dots `a\\.b`, `['a.b']`) are parsed here.
Each path is then built as a jsonpath-ng expression tree (directly, not through
jsonpath-ng's own grammar, which quotes and filters differently from kubectl) and
evaluated by jsonpath-ng; filters keep kubectl's rules (a missing field never matches).

Called by kctl.output.printers (and by any command that evaluates a kubectl JSONPath).
jsonpath-ng is imported on first evaluation only, so parsing a template is cheap.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kctl.machinery.errors import ClientSideError

__all__ = ["Template", "parse_template", "render", "format_value", "go_sprint"]


class _ParseError(Exception):
    """A template that cannot be parsed; turned into ClientSideError with the template."""


# --- the path language --------------------------------------------------------------
# A path is a tuple of segments, each one of:
#   ("field", name) ("wild",) ("index", i) ("slice", start, end, step)
#   ("filter", left_path, op, right)  right: ("lit", value) | ("path", path)
#   ("union", (path, ...)) ("recurse", segment)

_TERMINATORS = frozenset(" \t\r\n.,[]$@{}")
_FILTER_RE = re.compile(r"^([^!<>=]+)([!<>=]+)(.+?)$", re.S)
_INT_RE = re.compile(r"^[+-]?\d+$")
_NUMBER_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_FILTER_OPS = frozenset({"==", "!=", "<", ">", "<=", ">="})


def _parse_path(text: str) -> tuple:
    """kubectl's path syntax (leading `$`/`@`/`.` optional) -> segments."""
    segments: list = []
    i, n = 0, len(text)
    while i < n and text[i] in " \t":
        i += 1
    if i < n and text[i] in "$@":
        i += 1
    elif i < n and text[i] not in ".[":
        # {x} reads as {.x}: a bare leading name.
        name, i = _read_name(text, i)
        segments.append(_name_segment(name))
    while i < n:
        c = text[i]
        if c in " \t":
            i += 1
        elif text.startswith("..", i):
            i += 2
            if i < n and text[i] == "[":
                seg, i = _parse_bracket(text, i)
            else:
                name, i = _read_name(text, i)
                if not name:
                    raise _ParseError("missing field name after '..'")
                seg = _name_segment(name)
            segments.append(("recurse", seg))
        elif c == ".":
            name, i = _read_name(text, i + 1)
            if name:
                segments.append(_name_segment(name))
        elif c == "[":
            seg, i = _parse_bracket(text, i)
            segments.append(seg)
        else:
            raise _ParseError(f"unrecognized character in action: U+{ord(c):04X} {c!r}")
    return tuple(segments)


def _name_segment(name: str) -> tuple:
    return ("wild",) if name == "*" else ("field", name)


def _read_name(text: str, i: int) -> tuple[str, int]:
    """A field name up to the next unescaped terminator; `\\.` is a literal dot."""
    chars: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            chars.append(text[i + 1])
            i += 2
            continue
        if c in _TERMINATORS:
            break
        chars.append(c)
        i += 1
    return "".join(chars), i


def _matching_bracket(text: str, i: int) -> int:
    """Index of the `]` closing the `[` at i (quotes and nesting respected)."""
    depth, quote, n = 0, "", len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise _ParseError("unterminated array")


def _parse_bracket(text: str, i: int) -> tuple[tuple, int]:
    end = _matching_bracket(text, i)
    inner = text[i + 1:end].strip()
    return _bracket_segment(inner), end + 1


def _bracket_segment(inner: str) -> tuple:
    if inner == "*":
        return ("wild",)
    if inner.startswith("?"):
        body = inner[1:].strip()
        if not (body.startswith("(") and body.endswith(")")):
            raise _ParseError(f"invalid filter {inner}")
        return _parse_filter(body[1:-1])
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"" and inner.count(inner[0]) == 2:
        return ("field", inner[1:-1])
    if "," in inner:
        parts = []
        for part in (p.strip() for p in inner.split(",")):
            if _INT_RE.match(part):
                parts.append((("index", int(part)),))
            elif len(part) >= 2 and part[0] == part[-1] and part[0] in "'\"":
                parts.append(_parse_path("." + part[1:-1]))
            else:
                parts.append(_parse_path(part))
        return ("union", tuple(parts))
    if ":" in inner:
        bounds = inner.split(":")
        if len(bounds) > 3 or not all(b.strip() == "" or _INT_RE.match(b.strip()) for b in bounds):
            raise _ParseError(f"invalid array index {inner}")
        start, stop, step = (int(b) if b.strip() else None for b in (bounds + ["", ""])[:3])
        if step is not None and step <= 0:
            raise _ParseError("step must be > 0")
        return ("slice", start, stop, step)
    if _INT_RE.match(inner):
        return ("index", int(inner))
    raise _ParseError(f"invalid array index {inner}")


def _parse_filter(body: str) -> tuple:
    match = _FILTER_RE.match(body)
    if match is None:
        return ("filter", _parse_path(body.strip()), "exists", None)
    left, op, right = match.group(1).strip(), match.group(2), match.group(3).strip()
    if op not in _FILTER_OPS:
        raise _ParseError(f"unrecognized filter operator {op}")
    return ("filter", _parse_path(left), op, _filter_operand(right))


def _filter_operand(text: str) -> tuple:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return ("lit", _unquote(text))
    if text in ("true", "false"):
        return ("lit", text == "true")
    if _INT_RE.match(text):
        return ("lit", int(text))
    if _NUMBER_RE.match(text):
        return ("lit", float(text))
    return ("path", _parse_path(text))


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'",
            "a": "\a", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|.)", re.S)


def _unquote(quoted: str) -> str:
    """A Go-style quoted string literal ("\\n", '\\t', "\\u00e9") -> its text."""
    def sub(m: re.Match) -> str:
        esc = m.group(1)
        if esc[0] in "uUx" and len(esc) > 1:
            return chr(int(esc[1:], 16))
        if esc in _ESCAPES:
            return _ESCAPES[esc]
        raise _ParseError(f"unquote string {quoted} error invalid syntax")
    return _ESCAPE_RE.sub(sub, quoted[1:-1])


# --- the template layer -------------------------------------------------------------

@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Expr:
    path: tuple


@dataclass(frozen=True)
class _Range:
    path: tuple
    body: tuple


def _split_actions(template: str) -> list[tuple[bool, str]]:
    """(is_action, text) pieces: text outside braces and the inside of each `{...}`."""
    pieces: list[tuple[bool, str]] = []
    i, n = 0, len(template)
    while i < n:
        start = template.find("{", i)
        if start < 0:
            pieces.append((False, template[i:]))
            break
        if start > i:
            pieces.append((False, template[i:start]))
        j, quote, depth = start + 1, "", 0
        while True:
            if j >= n:
                raise _ParseError("unclosed action")
            c = template[j]
            if quote:
                if c == "\\":
                    j += 1
                elif c == quote:
                    quote = ""
                elif c == "\n":
                    raise _ParseError("unterminated quoted string")
            elif c in "'\"":
                quote = c
            elif c in "[(":
                depth += 1
            elif c in "])":
                depth -= 1
            elif c == "}" and depth <= 0:
                break
            elif c == "\\":
                j += 1
            j += 1
        pieces.append((True, template[start + 1:j]))
        i = j + 1
    return pieces


def _parse_nodes(template: str) -> tuple:
    stack: list[list] = [[]]
    ranges: list[tuple] = []
    for is_action, text in _split_actions(template):
        if not is_action:
            stack[-1].append(_Text(text))
            continue
        action = text.strip()
        word = re.match(r"[A-Za-z]+", action)
        keyword = word.group(0) if word else ""
        if keyword == "range" and (len(action) == 5 or action[5] in " \t"):
            expr = action[5:].strip()
            if not expr:
                raise _ParseError("range needs an expression")
            ranges.append(_parse_path(expr))
            stack.append([])
        elif action == "end":
            if not ranges:
                raise _ParseError("not in range, nothing to end")
            body = tuple(stack.pop())
            stack[-1].append(_Range(ranges.pop(), body))
        elif len(action) >= 2 and action[0] == action[-1] and action[0] in "'\"":
            stack[-1].append(_Text(_unquote(action)))
        elif action in ("", "$", "@", "."):
            stack[-1].append(_Expr(()))
        else:
            stack[-1].append(_Expr(_parse_path(action)))
    if ranges:
        raise _ParseError("unclosed range: {range} without {end}")
    return tuple(stack[0])


class Template:
    """A parsed kubectl JSONPath template; `render` it against objects."""

    def __init__(self, source: str, nodes: tuple) -> None:
        self.source = source
        self._nodes = nodes

    def render(self, data: Any) -> str:
        """The template's text for `data`, as `kubectl -o jsonpath=` prints it (no newline added)."""
        out: list[str] = []
        _render(self._nodes, data, out)
        return "".join(out)

    def values(self, data: Any) -> list:
        """Every value the template's actions yield, in order (text literals included)."""
        found: list = []
        _collect(self._nodes, data, found)
        return found

    def __repr__(self) -> str:
        return f"Template({self.source!r})"


@lru_cache(maxsize=256)
def parse_template(template: str) -> Template:
    """Parse a template; ClientSideError with kubectl's wording if it cannot be."""
    try:
        return Template(template, _parse_nodes(template))
    except _ParseError as e:
        raise ClientSideError(f"error parsing jsonpath {template}, {e}") from None


def render(template: str, data: object) -> str:
    """Render kubectl JSONPath `template` against `data`; a missing field renders empty."""
    return parse_template(template).render(data)


def _render(nodes: tuple, data: Any, out: list[str]) -> None:
    for node in nodes:
        if type(node) is _Text:
            out.append(node.text)
        elif type(node) is _Expr:
            out.append(" ".join(format_value(v) for v in _find(node.path, data)))
        else:
            for item in _find(node.path, data):
                _render(node.body, item, out)


def _collect(nodes: tuple, data: Any, found: list) -> None:
    for node in nodes:
        if type(node) is _Text:
            found.append(node.text)
        elif type(node) is _Expr:
            found.extend(_find(node.path, data))
        else:
            for item in _find(node.path, data):
                _collect(node.body, item, found)


# --- evaluation with jsonpath-ng ----------------------------------------------------

def _find(path: tuple, data: Any) -> list:
    if not path:
        return [data]
    return [match.value for match in _compiled(path).find(data)]


@lru_cache(maxsize=512)
def _compiled(path: tuple):
    return _build(path, _engine())


@lru_cache(maxsize=1)
def _engine():
    """jsonpath-ng's node classes, plus the two kubectl needs that it lacks."""
    from jsonpath_ng.jsonpath import Child, DatumInContext, Descendants, Fields, Index, Slice, This

    class KubeWildcard:
        """`[*]` / `.*`: every element of a list, every value of a map."""

        def find(self, datum):
            datum = DatumInContext.wrap(datum)
            value = datum.value
            if isinstance(value, list):
                return [DatumInContext(v, context=datum) for v in value]
            if isinstance(value, dict):
                return [DatumInContext(v, context=datum) for v in value.values()]
            return []

    class KubeFilter:
        """`[?(@.a OP b)]` with kubectl's rules: only list elements; a missing side never matches."""

        def __init__(self, left, op: str, right) -> None:
            self.left, self.op, self.right = left, op, right

        def find(self, datum):
            datum = DatumInContext.wrap(datum)
            if not isinstance(datum.value, list):
                return []
            return [DatumInContext(item, context=datum) for item in datum.value if self._passes(item)]

        def _passes(self, item) -> bool:
            lefts = self.left.find(item)
            if self.op == "exists":
                return bool(lefts)
            if len(lefts) != 1:
                return False
            if isinstance(self.right, tuple):
                right = self.right[0]
            else:
                rights = self.right.find(item)
                if len(rights) != 1:
                    return False
                right = rights[0].value
            return _compare(self.op, lefts[0].value, right)

    class KubeUnion:
        """`[a,b]`: the results of each alternative, one after another."""

        def __init__(self, parts) -> None:
            self.parts = parts

        def find(self, datum):
            return [m for part in self.parts for m in part.find(datum)]

    return {"Child": Child, "Descendants": Descendants, "Fields": Fields, "Index": Index,
            "Slice": Slice, "This": This, "Wildcard": KubeWildcard, "Filter": KubeFilter,
            "Union": KubeUnion}


def _build(path: tuple, ng: dict):
    node = ng["This"]()
    for seg in path:
        if seg[0] == "recurse":
            node = ng["Descendants"](node, _build_segment(seg[1], ng))
        else:
            node = ng["Child"](node, _build_segment(seg, ng))
    return node


def _build_segment(seg: tuple, ng: dict):
    kind = seg[0]
    if kind == "field":
        return ng["Fields"](seg[1])
    if kind == "wild":
        return ng["Wildcard"]()
    if kind == "index":
        return ng["Index"](seg[1])
    if kind == "slice":
        return ng["Slice"](start=seg[1], end=seg[2], step=seg[3]) if seg[1:] != (None, None, None) \
            else ng["Wildcard"]()
    if kind == "filter":
        _, left, op, right = seg
        right_node = None if right is None else \
            ((right[1],) if right[0] == "lit" else _build(right[1], ng))
        return ng["Filter"](_build(left, ng), op, right_node)
    if kind == "union":
        return ng["Union"]([_build(p, ng) for p in seg[1]])
    raise AssertionError(seg)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _compare(op: str, left: Any, right: Any) -> bool:
    """kubectl's filter comparison: numbers with numbers, strings with strings, else no match."""
    if _is_number(left) and _is_number(right):
        pass
    elif type(left) is not type(right) or isinstance(left, (dict, list)):
        return False
    elif op not in ("==", "!=") and not isinstance(left, str):
        return False
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    if op == "<":
        return left < right
    if op == ">":
        return left > right
    if op == "<=":
        return left <= right
    return left >= right


# --- printing values ----------------------------------------------------------------

def _go_float(f: float) -> str:
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "+Inf" if f > 0 else "-Inf"
    if f.is_integer() and abs(f) < 1e21:
        return str(int(f))
    return repr(f)


def _go_json(value: Any) -> str:
    """Go's json.Marshal: compact, map keys sorted, <>& escaped."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def format_value(value: Any) -> str:
    """One result as `kubectl -o jsonpath` prints it: maps and lists as JSON, scalars as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, (dict, list)):
        return _go_json(value)
    return str(value)


def go_sprint(value: Any) -> str:
    """Go's fmt.Sprint of a decoded JSON value (`map[a:1 b:x]`, `[x y]`): custom-columns cells."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_sprint(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_sprint(v) for v in value) + "]"
    return str(value)
