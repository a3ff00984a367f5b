"""Field paths, values and FieldErrors as kubectl prints them, for the validation modules.

`spec.template.spec.containers[0].image: Invalid value: "x": ...`: the schema step
(schema.py), the per-kind checks (kinds.py, podspec.py, file_modes.py), name syntax
(names.py) and CRD checks (crd.py) build their FieldErrors with these helpers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from kctl.machinery.errors import FieldError

Path = tuple[str | int, ...]


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_$-]+")


def join_path(path: Iterable[str | int]) -> str:
    """`spec.template.spec.containers[0].image`; map keys with dots or slashes as `[key]`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part}]"
    return out


def show_value(value: Any) -> str:
    """A value in a message: JSON for scalars, the kind of thing for objects and lists."""
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(str(value))


def invalid_value(path: Iterable[str | int], value: Any, detail: str) -> FieldError:
    """`path: Invalid value: <value>: detail` (field.Invalid)."""
    return FieldError(join_path(path), f"Invalid value: {show_value(value)}: {detail}")


def required_value(path: Iterable[str | int], detail: str = "") -> FieldError:
    """`path: Required value[: detail]` (field.Required)."""
    return FieldError(join_path(path), "Required value" + (f": {detail}" if detail else ""))


def unsupported_value(path: Iterable[str | int], value: Any, supported: Iterable[Any]) -> FieldError:
    """`path: Unsupported value: <value>: supported values: ...` (field.NotSupported)."""
    listed = ", ".join(show_value(v) for v in supported if v is not None)
    return FieldError(join_path(path), f"Unsupported value: {show_value(value)}: supported values: {listed}")


def dig(obj: Any, *keys: str) -> Any:
    """obj[k1][k2]..., or None where a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj
