"""File modes of secret, configMap, downwardAPI and projected volumes (defaultMode, items[].mode).

Kubernetes allows 0..0777 (octal), both inclusive. Called by the pod spec checks
(podspec.py) for every volume.
"""

from __future__ import annotations

from typing import Any

from kctl.admission.validation.fields import Path, dig, invalid_value
from kctl.machinery.errors import FieldError


FILE_MODE_MESSAGE = "must be a number between 0 and 0777 (octal), both inclusive"
_MODE_SOURCES = ("secret", "configMap", "downwardAPI")


def _mode_error(value: Any, path: Path) -> list[FieldError]:
    """Kubernetes' file mode check (defaultMode, items[].mode): 0..0o777 (511), both inclusive."""
    if isinstance(value, bool) or not isinstance(value, int) or 0 <= value <= 0o777:
        return []  # absent, or not an integer (the schema reports that)
    return [invalid_value(path, value, FILE_MODE_MESSAGE)]


def file_mode_errors(volume: Any, path: Path) -> list[FieldError]:
    """The file modes of a secret/configMap/downwardAPI/projected volume and of its items."""
    if not isinstance(volume, dict):
        return []
    errors: list[FieldError] = []

    def items(source: Any, where: Path) -> None:
        for j, item in enumerate(dig(source, "items") if isinstance(dig(source, "items"), list) else ()):
            if isinstance(item, dict):
                errors.extend(_mode_error(item.get("mode"), (*where, "items", j, "mode")))

    for key in (*_MODE_SOURCES, "projected"):
        source = volume.get(key)
        if not isinstance(source, dict):
            continue
        errors.extend(_mode_error(source.get("defaultMode"), (*path, key, "defaultMode")))
        if key != "projected":
            items(source, (*path, key))
            continue
        sources = source.get("sources")
        for i, projection in enumerate(sources if isinstance(sources, list) else ()):
            for inner in _MODE_SOURCES:
                if isinstance(dig(projection, inner), dict):
                    items(projection[inner], (*path, key, "sources", i, inner))
    return errors
