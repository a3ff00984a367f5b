"""YAML and JSON text in and out: the manifests `kctl apply -f` reads, the `-o yaml|json` output.

Called by kctl.manifests.sources (which finds and reads files, directories, stdin and URLs), by
kctl.output.printers and by git sync. Loading reads manifests exactly as Kubernetes does (kubectl and the
API server decode YAML with sigs.k8s.io/yaml, that is go-yaml v2 and its YAML 1.1 scalars, then
round-trip it through JSON): `0644` is the octal 420, `yes`/`no`/`on`/`off`/`y`/`n` (in their
lower, Capitalised and UPPER forms) are booleans, `1_000` is 1000, `0x1F` 31, `0o17` 15; `1:20`
and timestamps stay strings; integral floats become ints (`1e3` is 1000), integers past int64
floats; `.inf`/`.nan` are refused (JSON has no such numbers) and so are null keys; other keys
become the strings Kubernetes makes of them (`on:` is "true", `0644:` "420"). Only plain data
comes back: dicts with str keys, lists, str, int, float, bool and None.

Three readers, tried in this order, give the same data:

1. JSON text (one value or a stream of them) goes to the json module;
2. block YAML of the shapes manifests have (mappings, sequences, plain and quoted scalars,
   one-line flow collections, `|` literals) goes to `_FastReader`, a line-based reader
   about 40 times faster than ruamel.yaml in pure Python (its C extension is not installed);
3. every other document -- anchors and aliases, tags, folded or multi-line scalars, and
   every document with an error -- goes to ruamel.yaml, whose messages are condensed to one
   line. `_FastReader` never guesses: on anything it is unsure of it raises `_Unsupported`
   and the document goes to ruamel.yaml; tests check both agree.

Writing (`dump_yaml`) uses a small emitter of its own for the same reason (speed), quoting
every string that YAML 1.1 (Kubernetes) or 1.2 would read as something else, so that output read back
gives exactly the input. ruamel.yaml is imported only by path 3, so printing a table (or
reading ordinary manifests) never loads it.
"""

from __future__ import annotations

import codecs
import json
import math
import re
import struct
from collections.abc import Iterable
from typing import Any

__all__ = [
    "MAX_ALIASES",
    "MAX_DEPTH",
    "MAX_INPUT_BYTES",
    "MAX_NODES",
    "ManifestError",
    "decode_text",
    "dump_json",
    "dump_yaml",
    "dump_yaml_all",
    "format_where",
    "load_documents",
]

# --- safety bounds -------------------------------------------------------------------------

MAX_INPUT_BYTES = 32 * 1024 * 1024
"""Largest input read, in UTF-8 bytes; checked before parsing (and before reading a file)."""

MAX_DEPTH = 100
"""Deepest nesting: nodes on the longest path from a document's root to a leaf, the leaf
counted (`a: b` is 2 deep, `[[]]` is 2 deep). Reading stops at the first node deeper."""

MAX_NODES = 1_000_000
"""Most nodes (every key, value and item) in one input after alias expansion: a "billion
laughs" YAML bomb is measured on its node graph, never expanded, and refused."""

MAX_ALIASES = 10_000
"""Most alias uses (`*name`) in one input."""


# --- errors --------------------------------------------------------------------------------


def format_where(source: str, *, index: int | None = None, item: int | None = None,
                 line: int | None = None) -> str:
    """`FILE`, `FILE: document 2 (line 14)`, `FILE: document 1, item 3`, `FILE: line 5`.

    `index` and `item` are 0-based and shown 1-based; `line` is 1-based.
    """
    where = source
    if index is not None:
        where += f": document {index + 1}"
        if item is not None:
            where += f", item {item + 1}"
        if line is not None:
            where += f" (line {line})"
    elif line is not None:
        where += f": line {line}"
    return where


class ManifestError(Exception):
    """A manifest that cannot be read or parsed.

    `source` is the file name, URL or `<stdin>`; `index` the 0-based document index (None when
    the whole input is at fault); `item` the 0-based item of a List document; `line` 1-based;
    `message` says what is wrong in one line. `str()` gives one line for the CLI to print:
    `FILE: document 2 (line 14): mapping values are not allowed here`.
    """

    exit_code = 1

    def __init__(self, source: str, message: str, *, index: int | None = None,
                 line: int | None = None, item: int | None = None) -> None:
        self.source = source
        self.message = message
        self.index = index
        self.line = line
        self.item = item
        super().__init__(str(self))

    def __str__(self) -> str:
        where = format_where(self.source, index=self.index, item=self.item, line=self.line)
        return f"{where}: {self.message}"

    def __reduce__(self) -> tuple:
        return (_restore_error, (self.source, self.message, self.index, self.line, self.item))


def _restore_error(source: str, message: str, index: int | None, line: int | None,
                   item: int | None) -> ManifestError:
    return ManifestError(source, message, index=index, line=line, item=item)


# --- scalar resolution: YAML 1.1 as Kubernetes reads it (go-yaml v2, sigs.k8s.io/yaml) -------

_TAG = "tag:yaml.org,2002:"
_INT64_MIN, _INT64_LIMIT, _UINT64_LIMIT = -(1 << 63), 1 << 63, 1 << 64
#: go-yaml v2's resolve table: plain scalars that are looked up, not parsed.
_WORDS: dict[str, tuple[str, Any]] = {
    **{word: ("bool", True) for word in "y Y yes Yes YES true True TRUE on On ON".split()},
    **{word: ("bool", False) for word in "n N no No NO false False FALSE off Off OFF".split()},
    **{word: ("null", None) for word in ("~", "null", "Null", "NULL")},
    **{word: ("float", math.nan) for word in (".nan", ".NaN", ".NAN")},
    **{f"{sign}{word}": ("float", -math.inf if sign == "-" else math.inf)
       for sign in ("", "+", "-") for word in (".inf", ".Inf", ".INF")},
}
#: first characters go-yaml v2 tries to resolve; a plain scalar starting otherwise is a str.
_RESOLVED_FIRST = frozenset("-+.0123456789yYnNtTfFoO~")
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
    return value if _INT64_MIN <= value < _INT64_LIMIT else None


def _go_parse_float(text: str) -> float | None:
    """strconv.ParseFloat(text, 64) for decimal text, or None where Go errs (out of range)."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _resolve_plain(text: str) -> tuple[str, Any]:
    """(tag name, value) of a plain (unquoted, untagged) scalar, as go-yaml v2 resolves it.

    Tags: str, null, bool, int (a Python int in the int64 range), uint (past int64, below
    2**64), float (NaN and infinities included) and merge (`<<`). This is what kubectl and
    the Kubernetes API server read: `0644` is 420, `yes`/`on`/`y` are true, `1_000` is 1000,
    `0x1F` 31, `0o17` 15, `1:20` and timestamps stay strings. `_json_value` then gives what
    Kubernetes stores after its JSON round trip.
    """
    if not text:
        return "null", None
    found = _WORDS.get(text)
    if found is not None:
        return found
    first = text[0]
    if first not in _RESOLVED_FIRST:
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


def _json_value(tag: str, value: Any) -> Any:
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
            if _INT64_MIN <= integer < _INT64_LIMIT:
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


def _json_key(tag: str, value: Any, text: str) -> str:
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


def _construct_tagged(tag: str, text: str) -> tuple[str, Any]:
    """(tag name, value) of a scalar with an explicit core tag (`!!int "12"`), as go-yaml v2
    reads it; ValueError if the text is not of that type."""
    name = tag[len(_TAG):] if tag.startswith(_TAG) else None
    if name in ("str", "timestamp"):
        return "str", text
    if name == "merge":  # `<<` anywhere but a key
        return "str", text
    if name in ("null", "bool", "int", "float"):
        resolved, value = _resolve_plain(text)
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


# --- loading -------------------------------------------------------------------------------

class _LazyPattern:
    """A regex compiled on first use: these Unicode classes take milliseconds to compile,
    and most commands (`kctl get`, `kctl apply` of plain text) never need them."""

    __slots__ = ("_source", "_compiled")

    def __init__(self, source: str) -> None:
        self._source = source
        self._compiled: re.Pattern[str] | None = None

    def _pattern(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source)
        return self._compiled

    def search(self, text: str) -> re.Match[str] | None:
        return self._pattern().search(text)

    def sub(self, replacement: Any, text: str) -> str:
        return self._pattern().sub(replacement, text)


_ASCII_CONTROL = re.compile("[^\t\n\r\x20-\x7e]")  # _NON_PRINTABLE for ASCII text, quick to compile
_NON_PRINTABLE = _LazyPattern("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SPECIAL_BREAKS = ("\r", "\x85", "\u2028", "\u2029", "\ufeff")
_JSON_SPACE = re.compile(r"[ \t\r\n]*")


class _Unsupported(Exception):
    """The fast reader met YAML it does not handle: ruamel.yaml reads the document."""


class _TooManyNodes(Exception):
    """The input has more nodes than MAX_NODES."""


def _too_many_nodes(source: str, index: int | None, line: int | None) -> ManifestError:
    return ManifestError(source, f"more than {MAX_NODES:,} nodes after expanding aliases: "
                                 f"refusing it (a YAML bomb?)", index=index, line=line)


def _too_deep(source: str, index: int | None, line: int | None) -> ManifestError:
    return ManifestError(source, f"nested deeper than {MAX_DEPTH} levels", index=index,
                         line=line)


def decode_text(data: bytes, *, source: str) -> str:
    """Manifest bytes as text: UTF-8 (a BOM allowed), or UTF-16/32 with a BOM.

    Raises ManifestError for binary data (a NUL byte in what should be UTF-8) and for bytes
    that are not valid in the encoding.
    """
    if len(data) > MAX_INPUT_BYTES:
        raise ManifestError(source, f"larger than {MAX_INPUT_BYTES >> 20} MiB: refusing it")
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        encoding = "utf-32"
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
        nul = data.find(b"\0")
        if nul != -1:
            raise ManifestError(source, f"binary data (a NUL byte at offset {nul}), "
                                        f"not a YAML or JSON document")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        name = "UTF-8" if encoding == "utf-8-sig" else encoding.upper()
        line = data.count(b"\n", 0, error.start) + 1
        raise ManifestError(source, f"not {name} text (invalid byte 0x{data[error.start]:02x} "
                                    f"at offset {error.start})", line=line) from None


def load_documents(text: str, *, source: str) -> list[tuple[int, int, object]]:
    """Parse a YAML (or JSON) stream into (document index, start line, data) per document.

    The index counts from 0 over every document of the stream, empty ones included; empty
    documents (only comments or `---`) are left out. The line (1-based) is where the
    document's content starts. Data is plain: dict (str keys), list, str, int, float, bool,
    None; aliases come back as independent copies. Raises ManifestError, and nothing else,
    for any input that is not such a stream or exceeds the bounds above.
    """
    length = len(text)
    if length > MAX_INPUT_BYTES or (
            length * 4 > MAX_INPUT_BYTES
            and len(text.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES):
        raise ManifestError(source, f"larger than {MAX_INPUT_BYTES >> 20} MiB: refusing it")
    if text.startswith("\ufeff"):
        text = text[1:]
    bad = _ASCII_CONTROL.search(text) if text.isascii() else _NON_PRINTABLE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        char = bad.group()
        if char == "\0":
            message = "binary data (a NUL character), not a YAML or JSON document"
        elif "\ud800" <= char <= "\udfff":
            message = f"invalid text (an unpaired surrogate U+{ord(char):04X})"
        else:
            message = f"the control character U+{ord(char):04X} is not allowed in YAML"
        raise ManifestError(source, message, line=line)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    budget = [MAX_NODES]
    start = _JSON_SPACE.match(text).end()
    if text[start:start + 1] in ("{", "["):
        documents = _json_documents(text, start, source, budget)
        if documents is not None:
            return [(index, line, value) for index, (line, value) in enumerate(documents)]
        budget = [MAX_NODES]
    if any(char in text for char in _SPECIAL_BREAKS):
        return _ruamel_documents(text, source, 0, budget)[0]
    return _yaml_documents(text, source, budget)


def _yaml_documents(text: str, source: str, budget: list[int]) -> list[tuple[int, int, object]]:
    """Split the stream at `---` lines; each document goes to the fast reader or ruamel.yaml."""
    lines = text.split("\n")
    if text.endswith("\n"):
        count, open_line = len(lines) - 1, -1
    else:
        count, open_line = len(lines), len(lines) - 1
    separators = []
    for number in range(count):
        line = lines[number]
        if line.startswith(("---", "...", "%")):
            if line[:3] == "---" and (len(line) == 3 or line[3] in " \t"):
                separators.append(number)
            elif line[0] == "%" or (line[:3] == "..." and (len(line) == 3 or line[3] in " \t")):
                # directives and document-end markers: ruamel.yaml reads the whole stream
                return _ruamel_documents(text, source, 0, budget)[0]
    documents: list[tuple[int, int, object]] = []
    index = 0
    bounds = [(None, 0)] + [(number, number + 1) for number in separators]
    ends = separators + [count]
    for (separator, start), end in zip(bounds, ends):
        head = lines[separator][3:].strip(" \t") if separator is not None else ""
        try:
            if head and head[0] != "#":
                raise _Unsupported  # content on the `---` line itself
            reader = _FastReader(lines[start:end], budget[0], open_line - start)
            try:
                found = reader.document()
            except (_Unsupported, _TooManyNodes):
                raise
            except Exception:  # a fast-reader bug must not lose a document: ruamel.yaml reads it
                raise _Unsupported from None
            if found is None:
                index += separator is not None  # an empty document still has its number
                continue
            first, value = found
            budget[0] -= reader.nodes
            documents.append((index, start + first + 1, value))
            index += 1
        except _TooManyNodes:
            raise _too_many_nodes(source, index, None) from None
        except _Unsupported:
            body = "\n".join(lines[start:end]) + ("\n" if end - 1 != open_line else "")
            parsed = None
            if not head:
                offset = _JSON_SPACE.match(body).end()
                if body[offset:offset + 1] in ("{", "["):
                    parsed = _json_documents(body, offset, source, budget, index=index,
                                             first_line=start)
            if parsed is not None and len(parsed) == 1:
                documents.append((index, parsed[0][0], parsed[0][1]))
                index += 1
                continue
            if separator is None:
                segment, top = body, start
            else:
                segment, top = lines[separator] + "\n" + body, separator
            found_documents, seen = _ruamel_documents(segment, source, index, budget,
                                                      first_line=top)
            documents.extend(found_documents)
            index += seen
    return documents


def _measure(value: Any) -> tuple[int, int]:
    """(nodes, depth) of plain data, keys counted as nodes; iterative, so any depth is safe."""
    nodes = 0
    deepest = 0
    stack = [(value, 1)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if depth > deepest:
            deepest = depth
            if depth > MAX_DEPTH:
                break
        if isinstance(value, dict):
            nodes += len(value)
            stack.extend((child, depth + 1) for child in value.values())
        elif isinstance(value, list):
            stack.extend((child, depth + 1) for child in value)
    return nodes, deepest


def _json_object(pairs: list[tuple[str, Any]]) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate key")  # ruamel.yaml reports it, with its line
    return result


def _json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_number(text: str) -> Any:
    """A JSON number as Kubernetes keeps it: `1.0` is 1, past int64 a float (as from YAML)."""
    return _json_value(*_resolve_plain(text))


def _json_int(text: str) -> Any:
    value = int(text)
    return value if _INT64_MIN <= value < _INT64_LIMIT else _json_number(text)


_JSON = json.JSONDecoder(object_pairs_hook=_json_object, parse_constant=_json_constant,
                         parse_float=_json_number, parse_int=_json_int)


def _json_documents(text: str, start: int, source: str, budget: list[int], *,
                    index: int = 0, first_line: int = 0) -> list[tuple[int, Any]] | None:
    """(line, value) of each JSON value in a stream of objects/arrays, or None if it is not
    one (then YAML readers take it, and report any error with its line). `first_line` is the
    0-based line of the stream where text starts."""
    found = []
    position = start
    line = first_line + 1
    counted = 0
    used = 0
    while position < len(text):
        if text[position] not in "{[":
            return None
        try:
            value, end = _JSON.raw_decode(text, position)
        except (ValueError, RecursionError):
            return None
        line += text.count("\n", counted, position)
        counted = position
        nodes, depth = _measure(value)
        if depth > MAX_DEPTH:
            return None  # ruamel.yaml reports where
        used += nodes
        if used > budget[0]:
            raise _too_many_nodes(source, index + len(found), line)
        found.append((line, value))
        position = _JSON_SPACE.match(text, end).end()
    budget[0] -= used
    return found


# --- the fast reader -----------------------------------------------------------------------

_ESCAPES = {"0": "\0", "a": "\x07", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v",
            "f": "\f", "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\",
            "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029"}
_ESCAPE_DIGITS = {"x": 2, "u": 4, "U": 8}
_HEX = frozenset("0123456789abcdefABCDEF")
_KEY_FIRST_UNSUPPORTED = frozenset("-?:,[]{}#&*!|>%@`")
_KEY_UNSUPPORTED = re.compile(r"[,\[\]{}]")
_SIMPLE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*:(?= |$)")
_SIMPLE_ENTRY = re.compile(
    r"""([A-Za-z_][A-Za-z0-9_./-]*):(?: +([^\s\-?:,\[\]{}#&*!|>'"%@`](?:.*[^ ])?))? *\Z""")
_KEY_WORDS = frozenset(word for word in _WORDS if word[0].isalpha())  # `on:`, `null:`: not str keys
_VALUE_FIRST_UNSUPPORTED = frozenset("&*!%@`,]}?:#>")
_FLOW_PLAIN = re.compile(
    r"(?:[^\s\-?:,\[\]{}#&*!|>'\"%@`]|-(?=[^\s,\[\]{}]))[^\s,\[\]{}:#]*(?: +[^\s,\[\]{}:#]+)*")


def _fast_plain(text: str) -> Any:
    """The stored value of a plain scalar for the fast reader; _Unsupported for .inf/.nan (the
    ruamel.yaml path reports those with their line)."""
    tag, value = _resolve_plain(text)
    try:
        return _json_value(tag, value)
    except ValueError:
        raise _Unsupported from None


class _FastReader:
    """Reads one document of block YAML of the common shapes, line by line.

    Handles block mappings and sequences (indented or not, compact `- key: v`), plain,
    single- and double-quoted one-line scalars, one-line flow collections and `|` literal
    blocks. Raises _Unsupported for everything else and for anything invalid, so that
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
            raise _Unsupported
        value = self.block_node(0, 1)
        if self.skip() is not None:
            raise _Unsupported
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
                    raise _Unsupported
                return len(line) - len(content)
            pos += 1
        self.pos = pos
        return None

    def count(self, nodes: int) -> None:
        self.nodes += nodes
        if self.nodes > self.max_nodes:
            raise _TooManyNodes

    def block_node(self, indent: int, depth: int) -> Any:
        """The block collection starting on the current line, at column `indent`."""
        line = self.lines[self.pos]
        if line[indent] == "-" and (len(line) == indent + 1 or line[indent + 1] == " "):
            return self.sequence(indent, depth)
        return self.mapping(indent, depth)  # _Unsupported for a scalar on its own line

    def key(self, line: str, col: int) -> tuple[str, int] | None:
        """(key, index after its `:`) if the line holds `key:` at col, else None."""
        first = line[col]
        if first == '"' or first == "'":
            text, end = self.quoted(line, col)
            if end - col > 1000:
                raise _Unsupported
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
        if first in _KEY_FIRST_UNSUPPORTED or len(text) > 1000 or _KEY_UNSUPPORTED.search(text):
            raise _Unsupported
        if _resolve_plain(text)[0] != "str":
            raise _Unsupported  # null, bool, number or merge key: ruamel.yaml path converts it
        return text, colon + 1

    def mapping(self, indent: int, depth: int) -> dict:
        if depth >= MAX_DEPTH:
            raise _Unsupported
        result: dict[str, Any] = {}
        lines = self.lines
        entry = _SIMPLE_ENTRY.match
        while True:
            line = lines[self.pos]
            simple = entry(line, indent)
            if simple is not None and (text := simple.group(2)) is None:
                key = simple.group(1)  # `key:`, its value on the lines below
                if key in _KEY_WORDS or len(key) > 1000:
                    raise _Unsupported
                value = self.value(line, simple.end(1) + 1, indent, depth + 1)
            elif (simple is not None and ": " not in text and " #" not in text
                  and text[-1] != ":"):
                key = simple.group(1)  # `key: plain value`, checked as key() and inline() would
                if key in _KEY_WORDS or len(key) > 1000:
                    raise _Unsupported
                value = _fast_plain(text) if text[0] in _RESOLVED_FIRST else text
                self.pos += 1
            else:
                found = self.key(line, indent)
                if found is None:
                    raise _Unsupported
                key, after = found
                value = self.value(line, after, indent, depth + 1)
            if key in result:
                raise _Unsupported  # duplicate key: ruamel.yaml path reports it
            result[key] = value
            self.nodes += 2
            if self.nodes > self.max_nodes:
                raise _TooManyNodes
            following = self.skip()
            if following is None or following < indent:
                return result
            if following > indent:
                raise _Unsupported

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
            raise _Unsupported
        else:
            comment = line.find(" #", col)
            text = (line[col:comment] if comment != -1 else line[col:]).rstrip(" ")
            if ": " in text or text[-1] == ":":
                raise _Unsupported
            self.pos += 1
            return _fast_plain(text)
        if end < len(line):
            rest = line[end:]
            stripped = rest.lstrip(" ")
            if stripped and (stripped[0] != "#" or len(stripped) == len(rest)):
                raise _Unsupported
        self.pos += 1
        return value

    def sequence(self, indent: int, depth: int) -> list:
        if depth >= MAX_DEPTH:
            raise _Unsupported
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
                raise _Unsupported
            below = lines[self.pos]
            if below[indent] != "-" or (len(below) > indent + 1 and below[indent + 1] != " "):
                return result

    def quoted(self, line: str, col: int) -> tuple[str, int]:
        """A one-line single- or double-quoted scalar at col: (text, index after it)."""
        start = col + 1
        if line[col] == "'":
            close = line.find("'", start)
            if close == -1:
                raise _Unsupported
            if not line.startswith("'", close + 1):
                return line[start:close], close + 1
            parts = []
            while True:
                close = line.find("'", start)
                if close == -1:
                    raise _Unsupported
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
                raise _Unsupported  # multi-line
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
                    raise _Unsupported
                point = int(digits, 16)
                if point > 0x10FFFF:
                    raise _Unsupported
                parts.append(chr(point))
                start = slash + 2 + size
            else:
                raise _Unsupported  # escaped line break or an invalid escape

    def flow(self, line: str, col: int, depth: int) -> tuple[Any, int]:
        """A one-line flow collection (`[a, "b"]`, `{k: v}`) at col: (value, index after it)."""
        if depth >= MAX_DEPTH:
            raise _Unsupported
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
                raise _Unsupported
            self.count(1)
            item, pos, kind = self.flow_item(line, pos, depth + 1)
            while pos < size and line[pos] == " ":
                pos += 1
            if is_map:
                if kind not in ("str", "quoted") or item in result:
                    raise _Unsupported
                if not line.startswith(": ", pos):
                    raise _Unsupported
                pos += 2
                while pos < size and line[pos] == " ":
                    pos += 1
                if pos >= size or line[pos] in ",}":
                    raise _Unsupported
                self.count(1)
                result[item], pos, kind = self.flow_item(line, pos, depth + 1)
                while pos < size and line[pos] == " ":
                    pos += 1
            else:
                result.append(item)
            if pos >= size:
                raise _Unsupported
            char = line[pos]
            if char == close:
                return result, pos + 1
            if char != ",":
                raise _Unsupported
            pos += 1
            while pos < size and line[pos] == " ":
                pos += 1
            if pos >= size or line[pos] == close:
                raise _Unsupported  # trailing comma, or more lines

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
            raise _Unsupported
        end = match.end()
        if end < len(line) and line[end] not in ",]} ":
            if not (line[end] == ":" and line.startswith(": ", end)):
                raise _Unsupported
        text = match.group()
        tag = _resolve_plain(text)[0]
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
                raise _Unsupported  # indentation indicator, or junk
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
            raise _Unsupported  # empty block scalar
        indent = len(text) - len(content)
        if indent <= parent or widest or content[0] == "\t":
            raise _Unsupported  # (ruamel.yaml refuses some leading lines with spaces)
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
            raise _Unsupported  # no final line break: leave the chomping rules to ruamel.yaml
        self.pos = pos
        value = "\n".join(parts[:last])
        if chomp == "-":
            return value
        if chomp == "+":
            return value + "\n" * (1 + len(parts) - last)
        return value + "\n"


# --- the ruamel.yaml path ------------------------------------------------------------------

class _NodeProblem(Exception):
    """A composed document that is not plain data (a bad tag, key, alias, ...)."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


_RUAMEL_CLASSES: tuple | None = None


def _ruamel_classes() -> tuple:
    """(Resolver, Composer) subclasses: our scalar resolution; an alias budget."""
    global _RUAMEL_CLASSES
    if _RUAMEL_CLASSES is None:
        from ruamel.yaml.composer import Composer, ComposerError
        from ruamel.yaml.events import AliasEvent
        from ruamel.yaml.nodes import ScalarNode
        from ruamel.yaml.resolver import VersionedResolver
        from ruamel.yaml.tag import Tag

        class Resolver(VersionedResolver):
            def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
                if kind is ScalarNode and implicit[0]:
                    name = _resolve_plain(value)[0]
                    return Tag(suffix=_TAG + ("int" if name == "uint" else name))
                return super().resolve(kind, value, implicit)

        class LimitedComposer(Composer):
            aliases = 0

            def compose_node(self, parent: Any, index: Any) -> Any:
                if self.parser.check_event(AliasEvent):
                    self.aliases += 1
                    if self.aliases > MAX_ALIASES:
                        mark = self.parser.peek_event().start_mark
                        raise ComposerError(None, None, f"more than {MAX_ALIASES:,} aliases",
                                            mark)
                return super().compose_node(parent, index)

        _RUAMEL_CLASSES = (Resolver, LimitedComposer)
    return _RUAMEL_CLASSES


def _condense(error: Any) -> tuple[str, int | None]:
    """A ruamel.yaml MarkedYAMLError as (one-line message, 1-based line)."""
    problem = getattr(error, "problem", None) or ""
    context = getattr(error, "context", None) or ""
    problem_mark = getattr(error, "problem_mark", None)
    context_mark = getattr(error, "context_mark", None)
    message = problem or context or type(error).__name__
    if problem and context:
        if context_mark is not None and (problem_mark is None
                                         or context_mark.line != problem_mark.line):
            context = f"{context} at line {context_mark.line + 1}"
        message = f"{problem} ({context})"
    mark = problem_mark if problem_mark is not None else context_mark
    return " ".join(message.split()), (mark.line + 1 if mark is not None else None)


def _ruamel_documents(text: str, source: str, first_index: int, budget: list[int], *,
                      first_line: int = 0) -> tuple[list[tuple[int, int, object]], int]:
    """Parse with ruamel.yaml: (non-empty documents, number of documents seen).

    `first_line` is the 0-based line of the stream where text starts (marks count from it).
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.composer import MaxDepthExceededError
    from ruamel.yaml.error import MarkedYAMLError
    from ruamel.yaml.nodes import ScalarNode

    resolver, composer_class = _ruamel_classes()
    yaml = YAML(typ="safe", pure=True)
    yaml.Resolver = resolver
    yaml.Composer = composer_class
    yaml.max_depth = MAX_DEPTH
    documents: list[tuple[int, int, object]] = []
    index = first_index
    try:
        yaml.get_constructor_parser(text)
        yaml.reader.line = first_line
        composer = yaml.composer
        composer.warn_double_anchors = False
        while composer.check_node():
            node = composer.get_node()
            line = node.start_mark.line + 1
            if not (isinstance(node, ScalarNode) and node.value == "" and node.style is None
                    and node.tag == _TAG + "null" and node.anchor is None):
                size, _ = _measure_node(node, 1, {}, set())
                if size > budget[0]:
                    raise _too_many_nodes(source, index, line)
                budget[0] -= size
                documents.append((index, line, _node_data(node)))
            index += 1
    except MaxDepthExceededError as error:
        raise _too_deep(source, index, _condense(error)[1]) from None
    except MarkedYAMLError as error:
        message, line = _condense(error)
        raise ManifestError(source, message, index=index, line=line) from None
    except _NodeProblem as problem:
        line = problem.mark.line + 1 if problem.mark is not None else None
        raise ManifestError(source, problem.message, index=index, line=line) from None
    except ManifestError:
        raise
    except Exception as error:  # ruamel.yaml's own failures (e.g. a \U escape past U+10FFFF)
        message = " ".join(str(error).split()) or type(error).__name__
        raise ManifestError(source, f"cannot parse: {message}", index=index) from error
    return documents, index - first_index


def _measure_node(node: Any, depth: int, memo: dict, active: set) -> tuple[int, int]:
    """(nodes, height) of a composed node with aliases expanded, without expanding them.

    Raises _NodeProblem past MAX_DEPTH or MAX_NODES, or for an alias inside its own anchor.
    """
    known = memo.get(id(node))
    if known is not None:
        if depth + known[1] - 1 > MAX_DEPTH:
            raise _NodeProblem(f"nested deeper than {MAX_DEPTH} levels (through an alias)",
                               node.start_mark)
        return known
    if depth > MAX_DEPTH:
        raise _NodeProblem(f"nested deeper than {MAX_DEPTH} levels", node.start_mark)
    if isinstance(node.value, str):
        result = (1, 1)
    else:
        if id(node) in active:
            raise _NodeProblem("an alias refers to a node that contains it (a recursive "
                               "structure)", node.start_mark)
        active.add(id(node))
        size, height = 1, 0
        children = node.value
        for child in children:
            for part in (child if isinstance(child, tuple) else (child,)):
                part_size, part_height = _measure_node(part, depth + 1, memo, active)
                size += part_size
                height = max(height, part_height)
            if size > MAX_NODES:
                raise _NodeProblem(f"more than {MAX_NODES:,} nodes after expanding aliases: "
                                   f"refusing it (a YAML bomb?)", node.start_mark)
        active.discard(id(node))
        result = (size, height + 1)
    memo[id(node)] = result
    return result


def _node_data(node: Any) -> Any:
    """Plain data from a composed node (checked by _measure_node, so recursion is bounded)."""
    tag = node.tag
    value = node.value
    if isinstance(value, str):
        try:
            return _json_value(*_construct_tagged(tag, value))
        except ValueError as error:
            raise _NodeProblem(str(error), node.start_mark) from None
    if tag == _TAG + "seq":
        return [_node_data(child) for child in value]
    if tag != _TAG + "map":
        raise _NodeProblem(f"unsupported tag {tag!r}: kctl reads plain data (maps, lists, "
                           f"strings, numbers, booleans, null)", node.start_mark)
    result: dict[str, Any] = {}
    lines: dict[str, int] = {}
    merged: dict[str, Any] | None = None
    for key_node, value_node in value:
        if key_node.tag == _TAG + "merge" and isinstance(key_node.value, str):
            if merged is not None:
                raise _NodeProblem('duplicate merge key "<<"', key_node.start_mark)
            merged = {}
            sources = value_node.value if value_node.tag == _TAG + "seq" else [value_node]
            for source in sources:
                if source.tag != _TAG + "map":
                    raise _NodeProblem("a merge key (<<) needs a mapping or a list of mappings",
                                       source.start_mark)
                for merged_key, merged_value in _node_data(source).items():
                    merged.setdefault(merged_key, merged_value)
            continue
        if not isinstance(key_node.value, str):
            raise _NodeProblem("a mapping key must be a string, not a collection",
                               key_node.start_mark)
        try:  # `on:` is "true", `0644:` "420": as sigs.k8s.io/yaml makes JSON keys
            key = _json_key(*_construct_tagged(key_node.tag, key_node.value), key_node.value)
        except ValueError as error:
            raise _NodeProblem(str(error), key_node.start_mark) from None
        if key in result:
            raise _NodeProblem(f'duplicate key "{key}" (first at line {lines[key]})',
                               key_node.start_mark)
        lines[key] = key_node.start_mark.line + 1
        result[key] = _node_data(value_node)
    if merged:
        merged.update(result)
        return merged
    return result


# --- writing -------------------------------------------------------------------------------

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
_NOT_PLAIN = _LazyPattern(f": | #|[^{_PRINTABLE}]")
_NOT_SINGLE = _LazyPattern(f"[^{_PRINTABLE}]")
_NOT_LITERAL = _LazyPattern(f"[^\t\n{_PRINTABLE}]")
_DOUBLE_ESCAPE = _LazyPattern(f'[\\\\"]|[^{_PRINTABLE}]')
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
        if _resolve_plain(text)[0] != "str":
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
            and not _KEY_UNSUPPORTED.search(key)):
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
    if depth >= MAX_DEPTH:
        raise ValueError(f"cannot write data nested deeper than {MAX_DEPTH} levels")
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
    if depth >= MAX_DEPTH:
        raise ValueError(f"cannot write data nested deeper than {MAX_DEPTH} levels")
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
