"""An object's compact JSON text: what the stores write and what the size limits measure.

`text(obj)` is `json.dumps(obj, separators=(",", ":"), ensure_ascii=False)` and `encode(obj)`
its UTF-8 bytes, written by orjson: the same text for every object the API stores, at
a tenth of json's time (encoding was about a sixth of the CPU of a Deployment rollout:
every write encodes the object twice, for its size and for the store). Where orjson
refuses a value (integers beyond 64 bits, keys that are not strings, lone surrogates)
json writes it as before, and where orjson may have written a NaN or an infinity as
`null` (json writes `NaN`, which the stores read back: only a text with a null is written
again by json). One difference: orjson writes floats below 1e-4 in positional form
(`0.00001`), the same number when read back.
"""

from __future__ import annotations

import json
from typing import Any

from orjson import dumps as _fast_dumps

__all__ = ["encode", "text"]

_slow_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def text(obj: Any) -> str:
    """obj as compact JSON text."""
    try:
        fast = _fast_dumps(obj)
    except TypeError:  # orjson.JSONEncodeError
        return _slow_dumps(obj)
    return _slow_dumps(obj) if b"null" in fast else fast.decode()


def encode(obj: Any) -> bytes:
    """obj as compact JSON, UTF-8 (lone surrogates kept as json's `surrogatepass` writes them)."""
    try:
        fast = _fast_dumps(obj)
    except TypeError:  # orjson.JSONEncodeError
        return _slow_dumps(obj).encode("utf-8", "surrogatepass")
    return _slow_dumps(obj).encode("utf-8", "surrogatepass") if b"null" in fast else fast
