"""Loads the JSON Schemas of kinds: schemas/ for built-ins, a CRD's openAPIV3Schema for custom kinds.

A loaded schema is one self-contained dict: the kind's schema with the shared
definitions under `$defs`, every `$ref` of the form `#/$defs/NAME`. Used by validation,
`kctl explain`, and strategic merge (which reads x-kubernetes-patch-merge-key).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from kctl.machinery.resources import ResourceType


def schema_dir() -> Path:
    """schemas/ beside the package in a checkout, else the copy installed inside it."""
    here = Path(__file__).resolve().parents[2] / "schemas"
    return here if here.is_dir() else Path(__file__).resolve().parents[1] / "_schemas"


@lru_cache(maxsize=1)
def _definitions() -> dict:
    return json.loads((schema_dir() / "_definitions.json").read_text())["$defs"]


@lru_cache(maxsize=None)
def _builtin(schema_name: str) -> dict:
    root = json.loads((schema_dir() / schema_name).read_text())
    root["$defs"] = _definitions()
    return root


def load(rt: ResourceType) -> dict:
    """The root schema of a kind (do not mutate it: it is shared)."""
    if rt.crd_schema is not None:
        return rt.crd_schema
    return _builtin(rt.schema_name)


def resolve(root: dict, node: dict) -> dict:
    """Follow `$ref`s (and a lone allOf/oneOf wrapper of one ref) to the node they name."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < 64:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        seen += 1
    return node


OBJECT_META_REF = "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_DRAFT = "https://json-schema.org/draft/2020-12/schema"
#: OpenAPI v3 keys a CRD schema may not use (or that mean nothing once converted).
_DROPPED = frozenset({"$ref", "$schema", "id", "definitions", "additionalItems", "nullable"})


def crd_schema(openapi: dict | None, *, api_version: str, kind: str) -> dict:
    """A custom kind's root schema from its CRD version's `schema.openAPIV3Schema`.

    The result has the shape `load()` returns (shared `$defs`, ObjectMeta for metadata)
    and is plain JSON Schema 2020-12: `nullable` becomes a "null" type,
    `x-kubernetes-int-or-string` an integer-or-string type, draft-4 boolean
    exclusiveMinimum/Maximum numbers, and every object that does not say
    `x-kubernetes-preserve-unknown-fields` refuses unknown fields (Kubernetes would prune
    them; kctl, like kubectl's strict validation, reports them). The `x-kubernetes-*`
    markers are kept, for explain.
    """
    root = openapi_to_json_schema(openapi or {"type": "object"})
    properties = dict(root.get("properties") or {})
    properties["apiVersion"] = {
        "description": "APIVersion defines the versioned schema of this representation of an object.",
        "enum": [api_version], "type": ["string", "null"]}
    properties["kind"] = {
        "description": "Kind is a string value representing the REST resource this object represents.",
        "enum": [kind], "type": ["string", "null"]}
    properties["metadata"] = {
        "$ref": OBJECT_META_REF,
        "description": "Standard object's metadata. More info: "
                       "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}
    root["properties"] = properties
    root["type"] = "object"
    if not root.get("x-kubernetes-preserve-unknown-fields"):
        root.setdefault("additionalProperties", False)
    root["$schema"] = _DRAFT
    root["$defs"] = _definitions()
    return root


def openapi_to_json_schema(node: dict, *, structural: bool = True) -> dict:
    """One OpenAPI v3 (CRD dialect) schema node as JSON Schema 2020-12, recursively.

    `structural` is False inside allOf/anyOf/oneOf/not, whose branches only add value
    checks to fields the surrounding schema declares, so they never refuse unknown fields.
    """
    if not isinstance(node, dict):
        return node
    out: dict = {}
    for key, value in node.items():
        if key in _DROPPED or value is None:  # null is "not set", as when Kubernetes decodes it
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: openapi_to_json_schema(sub) for name, sub in value.items()}
        elif key == "patternProperties" and isinstance(value, dict):
            out[key] = {name: openapi_to_json_schema(sub) for name, sub in value.items()}
        elif key in ("additionalProperties", "items") and isinstance(value, dict):
            out[key] = openapi_to_json_schema(value)
        elif key == "items" and isinstance(value, list):
            out["prefixItems"] = [openapi_to_json_schema(sub) for sub in value]
        elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
            out[key] = [openapi_to_json_schema(sub, structural=False) for sub in value]
        elif key == "not" and isinstance(value, dict):
            out[key] = openapi_to_json_schema(value, structural=False)
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if value and bound in node:
                out[key] = node[bound]
        elif key == "dependencies" and isinstance(value, dict):
            for name, dep in value.items():
                if isinstance(dep, list):
                    out.setdefault("dependentRequired", {})[name] = dep
                else:
                    out.setdefault("dependentSchemas", {})[name] = openapi_to_json_schema(dep, structural=False)
        else:
            out[key] = value
    for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if key in out:
            out.pop(bound, None)
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
        if _is_int_or_string_any_of(out.get("anyOf")):
            del out["anyOf"]
    if node.get("x-kubernetes-embedded-resource"):
        properties = out.setdefault("properties", {})
        properties.setdefault("apiVersion", {"type": "string", "description": "APIVersion of the embedded object."})
        properties.setdefault("kind", {"type": "string", "description": "Kind of the embedded object."})
        properties.setdefault("metadata", {"$ref": OBJECT_META_REF, "description": "Standard object's metadata."})
    if node.get("nullable"):
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    is_object = node.get("type") == "object" or "properties" in out
    if structural and is_object and not node.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    return out


def _is_int_or_string_any_of(any_of: object) -> bool:
    if not isinstance(any_of, list) or len(any_of) != 2:
        return False
    return sorted(str(branch.get("type")) for branch in any_of if isinstance(branch, dict)) == ["integer", "string"]
