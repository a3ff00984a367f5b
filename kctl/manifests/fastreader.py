"""The fast reader: one document of block YAML of the shapes manifests have, read line by line.

Mappings, sequences, plain and quoted one-line scalars, one-line flow collections and `|`
literals; about 40 times faster than ruamel.yaml in pure Python (its C extension is not
installed). It never guesses: on anything it is unsure of (anchors, tags, folded or multi-line
scalars, any error) it raises `Unsupported` and kctl.manifests.yamlio hands the document to
ruamel.yaml (kctl.manifests.ruamelreader); tests check both agree. Scalars resolve as
kctl.manifests.yaml11 says. Called by kctl.manifests.yamlio.
"""

from __future__ import annotations

import re
from typing import Any

from kctl.manifests import bounds
from kctl.manifests.charsets import FLOW_INDICATOR
from kctl.manifests.yaml11 import RESOLVED_FIRST, WORDS, json_value, resolve_plain

__all__ = ["FastReader", "Unsupported", "TooManyNodes"]


class Unsupported(Exception):
    """The fast reader met YAML it does not handle: ruamel.yaml reads the document."""


class TooManyNodes(Exception):
    """The input has more nodes than bounds.MAX_NODES."""


_ESCAPES = {"0": "\0", "a": "\x07", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v",
            "f": "\f", "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\",
            "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029"}
_ESCAPE_DIGITS = {"x": 2, "u": 4, "U": 8}
_HEX = frozenset("0123456789abcdefABCDEF")
_KEY_FIRST_UNSUPPORTED = frozenset("-?:,[]{}#&*!|>%@`")
_SIMPLE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*:(?= |$)")
_SIMPLE_ENTRY = re.compile(
    r"""([A-Za-z_][A-Za-z0-9_./-]*):(?: +([^\s\-?:,\[\]{}#&*!|>'"%@`](?:.*[^ ])?))? *\Z""")
_KEY_WORDS = frozenset(word for word in WORDS if word[0].isalpha())  # `on:`, `null:`: not str keys
_VALUE_FIRST_UNSUPPORTED = frozenset("&*!%@`,]}?:#>")
_FLOW_PLAIN = re.compile(
    r"(?:[^\s\-?:,\[\]{}#&*!|>'\"%@`]|-(?=[^\s,\[\]{}]))[^\s,\[\]{}:#]*(?: +[^\s,\[\]{}:#]+)*")


def _fast_plain(text: str) -> Any:
    """The stored value of a plain scalar for the fast reader; Unsupported for .inf/.nan (the
    ruamel.yaml path reports those with their line)."""
    tag, value = resolve_plain(text)
    try:
        return json_value(tag, value)
    except ValueError:
        raise Unsupported from None


class FastReader:
    """Reads one document of block YAML of the common shapes, line by line.

    Handles block mappings and sequences (indented or not, compact `- key: v`), plain,
    single- and double-quoted one-line scalars, one-line flow collections and `|` literal
    blocks. Raises Unsupported for everything else and for anything invalid, so that
    ruamel.yaml reads (or rejects) the document instead. Works on its own copy of the lines
    (compact entries rewrite theirs).
    """

    __slots__ = ("lines", "pos", "end", "nodes", "max_nodes", "open_line")

    def __init__(self, lines: list[str], max_nodes: int, open_line: int) -> None:
        self.lines = lines
        self.pos = 0
        self.end = len(lines)
        self.nodes = 0
        self.max_nodes = max_nodes
        self.open_line = open_line  # the line with no newline after it, or -1

    def document(self) -> tuple[int, Any] | None:
        """(index of the first content line, value), or None for an empty document."""
        indent = self.skip()
        if indent is None:
            return None
        first = self.pos
        if indent:
            raise Unsupported
        value = self.block_node(0, 1)
        if self.skip() is not None:
            raise Unsupported
        return first, value

    def skip(self) -> int | None:
        """Move to the next line with content; return its indent, or None at the end."""
        lines = self.lines
        pos = self.pos
        end = self.end
        while pos < end:
            line = lines[pos]
            content = line.lstrip(" ")
            if content and content[0] != "#":
                self.pos = pos
                if "\t" in line:
                    raise Unsupported
                return len(line) - len(content)
            pos += 1
        self.pos = pos
        return None

    def count(self, nodes: int) -> None:
        self.nodes += nodes
        if self.nodes > self.max_nodes:
            raise TooManyNodes

    def block_node(self, indent: int, depth: int) -> Any:
        """The block collection starting on the current line, at column `indent`."""
        line = self.lines[self.pos]
        if line[indent] == "-" and (len(line) == indent + 1 or line[indent + 1] == " "):
            return self.sequence(indent, depth)
        return self.mapping(indent, depth)  # Unsupported for a scalar on its own line

    def key(self, line: str, col: int) -> tuple[str, int] | None:
        """(key, index after its `:`) if the line holds `key:` at col, else None."""
        first = line[col]
        if first == '"' or first == "'":
            text, end = self.quoted(line, col)
            if end - col > 1000:
                raise Unsupported
            if line.startswith(":", end) and (end + 1 == len(line) or line[end + 1] == " "):
                return text, end + 1
            return None
        if first == "[" or first == "{":
            return None
        simple = _SIMPLE_KEY.match(line, col)
        if simple is not None:
            end = simple.end()
            text = line[col:end - 1]
            if end - col <= 1000 and text not in _KEY_WORDS:
                return text, end
        size = len(line)
        colon = line.find(":", col)
        while colon != -1 and colon + 1 < size and line[colon + 1] != " ":
            colon = line.find(":", colon + 1)
        if colon == -1 or line.find(" #", col, colon) != -1:
            return None
        text = line[col:colon].rstrip(" ")
        if first in _KEY_FIRST_UNSUPPORTED or len(text) > 1000 or FLOW_INDICATOR.search(text):
            raise Unsupported
        if resolve_plain(text)[0] != "str":
            raise Unsupported  # null, bool, number or merge key: ruamel.yaml path converts it
        return text, colon + 1

    def mapping(self, indent: int, depth: int) -> dict:
        if depth >= bounds.MAX_DEPTH:
            raise Unsupported
        result: dict[str, Any] = {}
        lines = self.lines
        entry = _SIMPLE_ENTRY.match
        while True:
            line = lines[self.pos]
            simple = entry(line, indent)
            if simple is not None and (text := simple.group(2)) is None:
                key = simple.group(1)  # `key:`, its value on the lines below
                if key in _KEY_WORDS or len(key) > 1000:
                    raise Unsupported
                value = self.value(line, simple.end(1) + 1, indent, depth + 1)
            elif (simple is not None and ": " not in text and " #" not in text
                  and text[-1] != ":"):
                key = simple.group(1)  # `key: plain value`, checked as key() and inline() would
                if key in _KEY_WORDS or len(key) > 1000:
                    raise Unsupported
                value = _fast_plain(text) if text[0] in RESOLVED_FIRST else text
                self.pos += 1
            else:
                found = self.key(line, indent)
                if found is None:
                    raise Unsupported
                key, after = found
                value = self.value(line, after, indent, depth + 1)
            if key in result:
                raise Unsupported  # duplicate key: ruamel.yaml path reports it
            result[key] = value
            self.nodes += 2
            if self.nodes > self.max_nodes:
                raise TooManyNodes
            following = self.skip()
            if following is None or following < indent:
                return result
            if following > indent:
                raise Unsupported

    def value(self, line: str, after: int, indent: int, depth: int) -> Any:
        """The value after a key's `:`; leaves pos on the line after it."""
        rest = line[after:].lstrip(" ")
        if not rest or rest[0] == "#":
            self.pos += 1
            following = self.skip()
            if following is not None:
                if following > indent:
                    return self.block_node(following, depth)
                if following == indent:
                    below = self.lines[self.pos]
                    if below[indent] == "-" and (len(below) == indent + 1
                                                 or below[indent + 1] == " "):
                        return self.sequence(indent, depth)
            return None
        return self.inline(line, len(line) - len(rest), indent, depth)

    def inline(self, line: str, col: int, parent: int, depth: int) -> Any:
        """A scalar or flow collection starting at col; leaves pos on the next line."""
        first = line[col]
        if first == '"' or first == "'":
            value, end = self.quoted(line, col)
        elif first == "[" or first == "{":
            value, end = self.flow(line, col, depth)
        elif first == "|":
            return self.literal(line, col, parent)
        elif first in _VALUE_FIRST_UNSUPPORTED or (
                first == "-" and (col + 1 == len(line) or line[col + 1] == " ")):
            raise Unsupported
        else:
            comment = line.find(" #", col)
            text = (line[col:comment] if comment != -1 else line[col:]).rstrip(" ")
            if ": " in text or text[-1] == ":":
                raise Unsupported
            self.pos += 1
            return _fast_plain(text)
        if end < len(line):
            rest = line[end:]
            stripped = rest.lstrip(" ")
            if stripped and (stripped[0] != "#" or len(stripped) == len(rest)):
                raise Unsupported
        self.pos += 1
        return value

    def sequence(self, indent: int, depth: int) -> list:
        if depth >= bounds.MAX_DEPTH:
            raise Unsupported
        result: list[Any] = []
        lines = self.lines
        while True:
            self.count(1)
            line = lines[self.pos]
            rest = line[indent + 1:].lstrip(" ")
            if not rest or rest[0] == "#":
                self.pos += 1
                following = self.skip()
                if following is not None and following > indent:
                    result.append(self.block_node(following, depth + 1))
                else:
                    result.append(None)
            else:
                col = len(line) - len(rest)
                first = rest[0]
                if first == "-" and (len(rest) == 1 or rest[1] == " "):
                    lines[self.pos] = line[:indent] + " " + line[indent + 1:]
                    result.append(self.sequence(col, depth + 1))
                elif first != "|" and self.key(line, col) is not None:
                    lines[self.pos] = line[:indent] + " " + line[indent + 1:]
                    result.append(self.mapping(col, depth + 1))
                else:
                    result.append(self.inline(line, col, indent, depth + 1))
            following = self.skip()
            if following is None or following < indent:
                return result
            if following > indent:
                raise Unsupported
            below = lines[self.pos]
            if below[indent] != "-" or (len(below) > indent + 1 and below[indent + 1] != " "):
                return result

    def quoted(self, line: str, col: int) -> tuple[str, int]:
        """A one-line single- or double-quoted scalar at col: (text, index after it)."""
        start = col + 1
        if line[col] == "'":
            close = line.find("'", start)
            if close == -1:
                raise Unsupported
            if not line.startswith("'", close + 1):
                return line[start:close], close + 1
            parts = []
            while True:
                close = line.find("'", start)
                if close == -1:
                    raise Unsupported
                if line.startswith("'", close + 1):
                    parts.append(line[start:close + 1])
                    start = close + 2
                    continue
                parts.append(line[start:close])
                return "".join(parts), close + 1
        close = line.find('"', start)
        slash = line.find("\\", start)
        if close != -1 and (slash == -1 or slash > close):
            return line[start:close], close + 1
        parts = []
        while True:
            close = line.find('"', start)
            slash = line.find("\\", start)
            if close == -1:
                raise Unsupported  # multi-line
            if slash == -1 or slash > close:
                parts.append(line[start:close])
                return "".join(parts), close + 1
            parts.append(line[start:slash])
            code = line[slash + 1:slash + 2]
            if code in _ESCAPES:
                parts.append(_ESCAPES[code])
                start = slash + 2
            elif code in _ESCAPE_DIGITS:
                size = _ESCAPE_DIGITS[code]
                digits = line[slash + 2:slash + 2 + size]
                if len(digits) != size or not _HEX.issuperset(digits):
                    raise Unsupported
                point = int(digits, 16)
                if point > 0x10FFFF:
                    raise Unsupported
                parts.append(chr(point))
                start = slash + 2 + size
            else:
                raise Unsupported  # escaped line break or an invalid escape

    def flow(self, line: str, col: int, depth: int) -> tuple[Any, int]:
        """A one-line flow collection (`[a, "b"]`, `{k: v}`) at col: (value, index after it)."""
        if depth >= bounds.MAX_DEPTH:
            raise Unsupported
        size = len(line)
        is_map = line[col] == "{"
        close = "}" if is_map else "]"
        result: Any = {} if is_map else []
        pos = col + 1
        while pos < size and line[pos] == " ":
            pos += 1
        if pos < size and line[pos] == close:
            return result, pos + 1
        while True:
            if pos >= size:
                raise Unsupported
            self.count(1)
            item, pos, kind = self.flow_item(line, pos, depth + 1)
            while pos < size and line[pos] == " ":
                pos += 1
            if is_map:
                if kind not in ("str", "quoted") or item in result:
                    raise Unsupported
                if not line.startswith(": ", pos):
                    raise Unsupported
                pos += 2
                while pos < size and line[pos] == " ":
                    pos += 1
                if pos >= size or line[pos] in ",}":
                    raise Unsupported
                self.count(1)
                result[item], pos, kind = self.flow_item(line, pos, depth + 1)
                while pos < size and line[pos] == " ":
                    pos += 1
            else:
                result.append(item)
            if pos >= size:
                raise Unsupported
            char = line[pos]
            if char == close:
                return result, pos + 1
            if char != ",":
                raise Unsupported
            pos += 1
            while pos < size and line[pos] == " ":
                pos += 1
            if pos >= size or line[pos] == close:
                raise Unsupported  # trailing comma, or more lines

    def flow_item(self, line: str, pos: int, depth: int) -> tuple[Any, int, str]:
        """(value, index after it, kind) of one scalar or nested collection in a flow."""
        first = line[pos]
        if first == "[" or first == "{":
            value, end = self.flow(line, pos, depth)
            return value, end, "collection"
        if first == '"' or first == "'":
            value, end = self.quoted(line, pos)
            return value, end, "quoted"
        match = _FLOW_PLAIN.match(line, pos)
        if match is None:
            raise Unsupported
        end = match.end()
        if end < len(line) and line[end] not in ",]} ":
            if not (line[end] == ":" and line.startswith(": ", end)):
                raise Unsupported
        text = match.group()
        tag = resolve_plain(text)[0]
        return _fast_plain(text), end, tag

    def literal(self, line: str, col: int, parent: int) -> str:
        """A `|` block scalar whose header is at col, its content below, more indented than
        the parent collection (at column `parent`); leaves pos on the line after it."""
        header = line[col + 1:]
        chomp = ""
        if header[:1] in ("-", "+") and header:
            chomp, header = header[0], header[1:]
        if header:
            stripped = header.lstrip(" ")
            if stripped and (stripped[0] != "#" or len(stripped) == len(header)):
                raise Unsupported  # indentation indicator, or junk
        lines = self.lines
        end = self.end
        pos = self.pos + 1
        widest = 0
        while pos < end:
            text = lines[pos]
            content = text.lstrip(" ")
            if content:
                break
            widest = max(widest, len(text))
            pos += 1
        else:
            raise Unsupported  # empty block scalar
        indent = len(text) - len(content)
        if indent <= parent or widest or content[0] == "\t":
            raise Unsupported  # (ruamel.yaml refuses some leading lines with spaces)
        parts = [""] * (pos - self.pos - 1)
        parts.append(content)
        last = len(parts)
        pad = " " * indent
        pos += 1
        while pos < end:
            text = lines[pos]
            if text.startswith(pad):
                rest = text[indent:]
                parts.append(rest)
                if rest:
                    last = len(parts)
            elif not text.strip(" "):
                parts.append("")
            else:
                break
            pos += 1
        if pos - 1 == self.open_line:
            raise Unsupported  # no final line break: leave the chomping rules to ruamel.yaml
        self.pos = pos
        value = "\n".join(parts[:last])
        if chomp == "-":
            return value
        if chomp == "+":
            return value + "\n" * (1 + len(parts) - last)
        return value + "\n"
