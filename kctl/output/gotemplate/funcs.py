"""The functions a Go template may call: Go's `and or not len index print printf println eq ne lt le gt ge`
and kubectl's `base64decode` and `exists`, with Go's argument checks and error wording.

`FUNCS` maps a name to its implementation (arguments already evaluated); `LAZY` names the
short-circuit ones execution evaluates itself; `ARITY` the fixed argument counts. A function
fails with `FuncError`, which execution reports as `error calling NAME: ...`. Called by the
parser (which names are defined) and by kctl.output.gotemplate.execute.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Callable

from kctl.output.gotemplate.values import MISSING, go_sprint_value, go_sprintf, go_type, sprint, truth

__all__ = ["FuncError", "FUNCS", "LAZY", "ARITY"]


class FuncError(Exception):
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
        raise FuncError("missing argument for comparison")
    ka = _basic_kind(a)
    for b in others:
        kb = _basic_kind(b)
        if ka != kb:
            if a is not MISSING and b is not MISSING and (ka is not None or kb is not None):
                raise FuncError("incompatible types for comparison")
            if ka is None and kb is None:
                if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
                    if a is None or b is None or a is MISSING or b is MISSING:
                        continue
                    raise FuncError(f"non-comparable type {go_sprint_value(a)}: {go_type(a)}")
                if (a in (None, MISSING)) == (b in (None, MISSING)):
                    return True
            continue
        if ka is None:
            if a in (None, MISSING) and b in (None, MISSING):
                return True
            if a in (None, MISSING) or b in (None, MISSING):
                continue
            raise FuncError(f"non-comparable type {go_sprint_value(a)}: {go_type(a)}")
        if a == b:
            return True
    return False


def _ne(a: Any, b: Any) -> bool:
    return not _eq(a, b)


def _ordered(a: Any, b: Any) -> tuple[Any, Any]:
    ka, kb = _basic_kind(a), _basic_kind(b)
    if ka is None or ka == _BOOL:
        raise FuncError("invalid type for comparison")
    if kb is None or kb == _BOOL:
        raise FuncError("invalid type for comparison")
    if ka != kb:
        raise FuncError("incompatible types for comparison")
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
    raise FuncError(f"len of type {go_type(value)}")


def _index(item: Any, *indexes: Any) -> Any:
    if item is None or item is MISSING:
        raise FuncError("index of untyped nil")
    for index in indexes:
        if isinstance(item, list) or isinstance(item, str):
            if isinstance(index, bool) or not isinstance(index, int):
                raise FuncError(f"cannot index slice/array with type {go_type(index)}")
            if not 0 <= index < len(item):
                raise FuncError(f"index out of range: {index}")
            item = item[index] if isinstance(item, list) else item.encode()[index]
        elif isinstance(item, dict):
            if not isinstance(index, str):
                if index is None or index is MISSING:
                    raise FuncError("value is nil; should be of type string")
                raise FuncError(f"value has type {go_type(index)}; should be string")
            item = item.get(index, MISSING)
        elif item is None or item is MISSING:
            raise FuncError("index of nil pointer")
        else:
            raise FuncError(f"can't index item of type {go_type(item)}")
    return item


def _base64decode(value: Any) -> str:
    if not isinstance(value, str):
        raise FuncError(f"wrong type for value; expected string; got {go_type(value)}")
    try:
        return base64.b64decode(value.encode(), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        at = next((i for i, ch in enumerate(value) if ch not in alphabet), len(value) - len(value) % 4)
        raise FuncError(f"base64 decode failed: illegal base64 data at input byte {at}") from None


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
        raise FuncError(f"wrong type for value; expected string; got {go_type(fmt)}")
    return go_sprintf(fmt, list(args))


FUNCS: dict[str, Callable[..., Any]] = {
    "eq": _eq, "ne": _ne, "lt": _lt, "le": _le, "gt": _gt, "ge": _ge, "len": _len, "index": _index,
    "print": lambda *a: sprint(list(a)), "println": lambda *a: " ".join(go_sprint_value(x) for x in a) + "\n",
    "printf": _printf, "base64decode": _base64decode, "exists": _exists,
    "not": lambda a: not truth(a),
}
#: functions that take their arguments unevaluated (short-circuit), as Go 1.18+
LAZY = {"and", "or"}
ARITY = {"not": 1, "len": 1, "ne": 2, "lt": 2, "le": 2, "gt": 2, "ge": 2, "base64decode": 1}
