"""The key order kubectl prints objects in: every mapping's keys sorted.

An API server hands kubectl objects as JSON that kubectl decodes into Go maps
(unstructured objects); Go writes maps with their keys sorted, so `kubectl get -o json`
and `-o yaml` both show sorted keys at every level. `sorted_keys` gives that order to a
decoded object. Called by kctl.output.printers (-o yaml/json, templates) and by `kctl diff`,
so both sides of a diff are normalised the same way and only real changes show.
"""

from __future__ import annotations

from typing import Any

__all__ = ["sorted_keys"]


def sorted_keys(value: Any) -> Any:
    """A copy of `value` whose mappings (at any depth) have their keys in sorted order."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value
