"""YAML and JSON text out, as kubectl prints it: `dump_yaml` (block style), `dump_yaml_all`, `dump_json`.

A small emitter of kctl's own (for speed), quoting every string that YAML 1.1 (Kubernetes) or
1.2 would read as something else, so that output read back by kctl.manifests.yamlio gives
exactly the input; multi-line strings become `|` blocks when that reads back exactly. Called by
kctl.output.printers (`-o yaml|json`), `kctl apply`/`edit`/`diff` and git sync. Imports no
YAML library.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from kctl.manifests import bounds
from kctl.manifests.charsets import FLOW_INDICATOR, LazyPattern
from kctl.manifests.yaml11 import resolve_plain

__all__ = ["dump_yaml", "dump_yaml_all", "dump_json"]

# YAML 1.2 core-schema patterns: the writer quotes strings that a YAML 1.2 reader (ruamel.yaml,
# PyYAML's successors) would read as something else, so kctl's output reads back anywhere.
_FLOAT_12 = re.compile(r"""
      [-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    | [-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
    | [-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?
    | [-+]?\.(?:inf|Inf|INF)
    | \.(?:nan|NaN|NAN)""", re.X)
_INT_12 = re.compile(r"[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?[0-9_]+|[-+]?0x[0-9a-fA-F_]+")
_TIMESTAMP_12 = re.compile(r"""
      [0-9]{4}-[0-9]{2}-[0-9]{2}
    | [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?
      (?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?""", re.X)
# YAML 1.1 readings (PyYAML, go-yaml v2 in kubectl) a string must be quoted against too.
_WORDS_11 = frozenset("y Y yes Yes YES n N no No NO on On ON off Off OFF true True TRUE false "
                      "False FALSE null Null NULL ~ = <<".split())
_NUMBER_11 = re.compile(r"""
      [-+]?0b[0-1_]+ | [-+]?0[0-7_]+ | [-+]?(?:0|[1-9][0-9_]*) | [-+]?0x[0-9a-fA-F_]+
    | [-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
    | [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    | [-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    | [-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    | [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    | [-+]?\.(?:inf|Inf|INF) | \.(?:nan|NaN|NAN)""", re.X)
_PRINTABLE = "\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff"
_NOT_PLAIN = LazyPattern(f": | #|[^{_PRINTABLE}]")
_NOT_SINGLE = LazyPattern(f"[^{_PRINTABLE}]")
_NOT_LITERAL = LazyPattern(f"[^\t\n{_PRINTABLE}]")
_DOUBLE_ESCAPE = LazyPattern(f'[\\\\"]|[^{_PRINTABLE}]')
_PLAIN_FIRST_BAD = frozenset(" -?:,[]{}#&*!|>'\"%@`")
_AMBIGUOUS_FIRST = frozenset("-+.0123456789yYnNtTfFoO~=<")
_DOUBLE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\0": "\\0", "\x07": "\\a", "\b": "\\b",
                   "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r",
                   "\x1b": "\\e", "\x85": "\\N", "\u2028": "\\L", "\u2029": "\\P"}
_KEY_TEXT: dict[str, str] = {}


def _plain_ok(text: str) -> bool:
    """Whether text can be written unquoted and read back, by YAML 1.2 or 1.1, as that str."""
    if not text:
        return False
    first = text[0]
    if first in _PLAIN_FIRST_BAD and not (
            first == "-" and len(text) > 1 and text[1] != " " and not text.startswith("---")):
        return False
    if text[-1] in " :" or _NOT_PLAIN.search(text) or text.startswith("..."):
        return False
    if first in _AMBIGUOUS_FIRST:
        if text in _WORDS_11 or _NUMBER_11.fullmatch(text) or _INT_12.fullmatch(text):
            return False  # (the 1.2 int pattern also matches "-_", which ruamel.yaml fails on)
        if _FLOAT_12.fullmatch(text) or _TIMESTAMP_12.fullmatch(text):
            return False
        if resolve_plain(text)[0] != "str":
            return False
    return True


def _double(text: str) -> str:
    def escape(match: re.Match) -> str:
        char = match.group()
        known = _DOUBLE_ESCAPES.get(char)
        if known:
            return known
        point = ord(char)
        return f"\\x{point:02X}" if point < 0x100 else f"\\u{point:04X}"

    return '"' + _DOUBLE_ESCAPE.sub(escape, text) + '"'


def _quoted(text: str) -> str:
    """text in double quotes (as kubectl prints "True"), single quotes when that spares
    escapes, double quotes with escapes when it is not all printable."""
    if _NOT_SINGLE.search(text) or ('"' not in text and "\\" not in text):
        return _double(text)
    return "'" + text.replace("'", "''") + "'"


def _quote(text: str) -> str:
    """A one-line scalar: plain if that reads back as the same str, else quoted."""
    return text if _plain_ok(text) else _quoted(text)


def _key_text(key: Any) -> str:
    """A mapping key as written before `:` (plain or quoted; `? key` form past 1000 chars)."""
    known = _KEY_TEXT.get(key) if type(key) is str else None
    if known is not None:
        return known
    if not isinstance(key, str):
        raise TypeError(f"mapping key {key!r} is not a string")
    key = str(key)
    if (key[:1] != "-" and len(key) <= 1000 and _plain_ok(key)
            and not FLOW_INDICATOR.search(key)):
        text = key
    else:
        text = _quoted(key)
        if len(text) > 1000:  # longer than an implicit key may be
            text = "? " + text
    if len(_KEY_TEXT) > 4096:
        _KEY_TEXT.clear()
    _KEY_TEXT[key] = text
    return text


def _literal(text: str, pad: str) -> str | None:
    """`|` block for a multi-line string, content indented by pad; None when not safe."""
    body = text.rstrip("\n")
    trailing = len(text) - len(body)
    if not body or _NOT_LITERAL.search(body):
        return None
    lines = body.split("\n")
    first = next(line for line in lines if line)
    if first[0] in " \t":
        return None  # the reader would take its indentation for the block's
    header = "|-\n" if trailing == 0 else "|\n" if trailing == 1 else "|+\n"
    parts = [header]
    for line in lines:
        parts.append(f"{pad}{line}\n" if line else "\n")
    if trailing > 1:
        parts.append("\n" * (trailing - 1))
    return "".join(parts)


def _float_text(value: float) -> str:
    if value != value:
        return ".nan"
    if value in (math.inf, -math.inf):
        return ".inf" if value > 0 else "-.inf"
    return repr(float(value))


def _scalar(value: Any, pad: str) -> str:
    """A scalar (or empty collection) as written after `key: ` or `- `, with its newline."""
    kind = type(value)
    if kind is str:
        if "\n" in value:
            block = _literal(value, pad)
            if block is not None:
                return block
        return _quote(value) + "\n"
    if value is None:
        return "null\n"
    if kind is bool:
        return "true\n" if value else "false\n"
    if kind is int:
        return f"{value}\n"
    if kind is float:
        return _float_text(value) + "\n"
    if isinstance(value, bool):
        return "true\n" if value else "false\n"
    if isinstance(value, str):
        return _scalar(str(value), pad)
    if isinstance(value, int):
        return f"{int(value)}\n"
    if isinstance(value, float):
        return _float_text(float(value)) + "\n"
    if isinstance(value, dict) and not value:
        return "{}\n"
    if isinstance(value, (list, tuple)) and not value:
        return "[]\n"
    raise TypeError(f"cannot write {type(value).__name__} as YAML: {value!r}")


def _emit_mapping(mapping: dict, indent: str, out: list[str], depth: int) -> None:
    if depth >= bounds.MAX_DEPTH:
        raise ValueError(f"cannot write data nested deeper than {bounds.MAX_DEPTH} levels")
    pad = indent + "  "
    for key, value in mapping.items():
        key = _key_text(key)
        if key[0] == "?":  # explicit key: its value after `:` on the next line
            out.append(f"{indent}{key}\n")
            if isinstance(value, dict) and value:
                out.append(f"{indent}:\n")
                _emit_mapping(value, pad, out, depth + 1)
            elif isinstance(value, (list, tuple)) and value:
                out.append(f"{indent}:\n")
                _emit_sequence(value, pad, out, depth + 1)
            else:
                out.append(f"{indent}: {_scalar(value, pad)}")
        elif isinstance(value, dict) and value:
            out.append(f"{indent}{key}:\n")
            _emit_mapping(value, pad, out, depth + 1)
        elif isinstance(value, (list, tuple)) and value:
            out.append(f"{indent}{key}:\n")
            _emit_sequence(value, indent, out, depth + 1)
        elif type(value) is str and "\n" not in value and _plain_ok(value):
            out.append(f"{indent}{key}: {value}\n")
        else:
            out.append(f"{indent}{key}: {_scalar(value, pad)}")


def _emit_sequence(items: list | tuple, indent: str, out: list[str], depth: int) -> None:
    if depth >= bounds.MAX_DEPTH:
        raise ValueError(f"cannot write data nested deeper than {bounds.MAX_DEPTH} levels")
    pad = indent + "  "
    dash = indent + "- "
    cut = len(pad)
    for item in items:
        if isinstance(item, dict) and item:
            start = len(out)
            _emit_mapping(item, pad, out, depth + 1)
            out[start] = dash + out[start][cut:]
        elif isinstance(item, (list, tuple)) and item:
            start = len(out)
            _emit_sequence(item, pad, out, depth + 1)
            out[start] = dash + out[start][cut:]
        else:
            out.append(dash + _scalar(item, pad))


def dump_yaml(obj: Any) -> str:
    """One YAML document (no `---`), block style, keys in the object's order, ending in a newline.

    Strings that YAML 1.2 or 1.1 would read as something else are quoted; multi-line strings
    become `|` blocks when that reads back exactly. `load_documents` gives back `obj`.
    Raises TypeError for values other than plain data, or for non-string keys.
    """
    out: list[str] = []
    if isinstance(obj, dict) and obj:
        _emit_mapping(obj, "", out, 1)
    elif isinstance(obj, (list, tuple)) and obj:
        _emit_sequence(obj, "", out, 1)
    elif isinstance(obj, str):
        out.append(_quote(obj) + "\n")  # no block scalar at the top level
    else:
        out.append(_scalar(obj, "  "))
    return "".join(out)


def dump_yaml_all(objs: Iterable[Any]) -> str:
    """Several documents, separated by `---` lines (none before the first)."""
    return "---\n".join(dump_yaml(obj) for obj in objs)


def dump_json(obj: Any) -> str:
    """JSON indented by 4 spaces as kubectl prints it, non-ASCII kept, ending in a newline."""
    return json.dumps(obj, indent=4, ensure_ascii=False) + "\n"
