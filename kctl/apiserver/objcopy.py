"""Deep copies of API objects, several times faster than copy.deepcopy.

Every write copies the object it is given, the stored one it changes and what it commits
(so that neither the caller nor a retried transaction sees another's changes); with
`copy.deepcopy` those copies were most of the CPU a pod's status write cost
(copy.deepcopy keeps a memo of every value it visits to preserve shared references and
cycles, which JSON-shaped objects never have). `json_copy` copies dicts and lists and
shares the immutable leaves (str, int, float, bool, None); anything else (a tuple, a set,
a dict subclass) is handed to copy.deepcopy, so every value copies as before.
"""

from __future__ import annotations

import copy
from typing import TypeVar

T = TypeVar("T")

_LEAVES = frozenset((str, int, float, bool, type(None)))


def json_copy(value: T) -> T:
    """A deep copy of `value`: dicts and lists rebuilt, immutable leaves shared, anything else deep-copied."""
    kind = type(value)
    if kind is dict:
        out = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            t = type(item)
            out[key] = json_copy(item) if t is dict or t is list else item if t in _LEAVES else copy.deepcopy(item)
        return out  # type: ignore[return-value]
    if kind is list:
        return [json_copy(item) if type(item) is dict or type(item) is list
                else item if type(item) in _LEAVES else copy.deepcopy(item)
                for item in value]  # type: ignore[attr-defined,return-value]
    if kind in _LEAVES:
        return value
    return copy.deepcopy(value)


__all__ = ["json_copy"]
