"""JSON manifests: a stream of JSON objects/arrays read as Kubernetes reads them, within the bounds.

`json_documents` gives (line, value) per JSON value, or None when the text is not such a stream
(the YAML readers then take it and report any error with its line). Numbers are kept as
Kubernetes keeps them (kctl.manifests.yaml11.json_value: `1.0` is 1, past int64 a float);
duplicate keys, NaN and Infinity are not JSON here. Called by kctl.manifests.yamlio.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kctl.manifests import bounds
from kctl.manifests.yaml11 import INT64_LIMIT, INT64_MIN, json_value, resolve_plain

__all__ = ["JSON_SPACE", "json_documents"]

JSON_SPACE = re.compile(r"[ \t\r\n]*")


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
            if depth > bounds.MAX_DEPTH:
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
    return json_value(*resolve_plain(text))


def _json_int(text: str) -> Any:
    value = int(text)
    return value if INT64_MIN <= value < INT64_LIMIT else _json_number(text)


_JSON = json.JSONDecoder(object_pairs_hook=_json_object, parse_constant=_json_constant,
                         parse_float=_json_number, parse_int=_json_int)


def json_documents(text: str, start: int, source: str, budget: list[int], *,
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
        if depth > bounds.MAX_DEPTH:
            return None  # ruamel.yaml reports where
        used += nodes
        if used > budget[0]:
            raise bounds.too_many_nodes(source, index + len(found), line)
        found.append((line, value))
        position = JSON_SPACE.match(text, end).end()
    budget[0] -= used
    return found
