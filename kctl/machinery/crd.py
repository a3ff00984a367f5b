"""CustomResourceDefinitions as resource types: the kinds a stored CRD serves (`crd_resource_types`).

The API server calls it to resolve a custom kind's ResourceType (and its JSON Schema,
converted from the CRD's openAPIV3Schema by kctl.machinery.schemas) when a CRD is stored or
read; `kctl explain` uses the result. What a CRD must satisfy to be stored is checked by
admission (kctl.admission.validation.crd); this module only reads one.
"""

from __future__ import annotations

from typing import Any

from kctl.machinery import schemas
from kctl.machinery.resources import ResourceType

__all__ = ["crd_resource_types"]


def _dig(obj: Any, *keys: str) -> Any:
    """obj[k1][k2]..., or None where a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def crd_resource_types(crd: dict) -> list[ResourceType]:
    """The kinds a stored apiextensions.k8s.io/v1 CRD serves: one ResourceType per served version.

    Each carries its version's openAPIV3Schema converted to JSON Schema (`crd_schema`).
    Expects a CRD that passed `validate`; fields it lacks are taken as empty.
    """
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, kind, plural = spec.get("group", ""), names.get("kind", ""), names.get("plural", "")
    types = []
    for version in spec.get("versions") or ():
        if not version.get("served"):
            continue
        openapi = _dig(version, "schema", "openAPIV3Schema")
        api_version = f"{group}/{version['name']}" if group else version["name"]
        types.append(ResourceType(
            group=group, version=version["name"], kind=kind, plural=plural,
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            crd_schema=schemas.crd_schema(openapi, api_version=api_version, kind=kind),
            has_status=_dig(version, "subresources", "status") is not None,
        ))
    return types
