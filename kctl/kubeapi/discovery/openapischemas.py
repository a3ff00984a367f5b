"""kctl's JSON Schemas as the OpenAPI definitions kube-apiserver publishes (v2 `definitions`, v3 `components`).

kctl.kubeapi.discovery.openapi builds /openapi/v2 and /openapi/v3 documents from these. A built-in kind's
schema (schemas/*.json, JSON Schema 2020-12 with shared `$defs`) is turned back into the OpenAPI
dialect Kubernetes serves: `type: [T, "null"]` becomes `type: T`, IntOrString and Quantity get
Kubernetes' string forms, `$ref`s point at `#/definitions/` (v2) or `#/components/schemas/` (v3,
wrapped in `allOf` when the reference carries a description, as Kubernetes does),
`additionalProperties: false` (kctl's strictness) is dropped, and the `x-kubernetes-*`
extensions (patch strategy and merge key, list type, group-version-kind) are kept. A custom
kind's schema is its CRD version's `openAPIV3Schema` as written, with apiVersion, kind and
metadata added, as the apiextensions server publishes it. Definition names follow Kubernetes'
(`io.k8s.api.apps.v1.Deployment`, `com.example.stable.v1.CronTab`).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from kctl.machinery import schemas
from kctl.machinery.resources import ResourceType

__all__ = ["META", "builtin_definitions", "convert", "definition_name", "kind_definition", "list_definition",
           "references"]

META = "io.k8s.apimachinery.pkg.apis.meta.v1"
_PACKAGES = {"": "io.k8s.api.core", "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
             "metrics.k8s.io": "io.k8s.metrics.pkg.apis.metrics", "rbac.authorization.k8s.io": "io.k8s.api.rbac"}
#: kctl's definitions of types its schemas do not describe but Kubernetes' paths name
_EXTRA: dict[str, dict] = {
    f"{META}.Patch": {"description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH "
                                     "request body.", "type": "object"},
    f"{META}.ListMeta": {
        "description": "ListMeta describes metadata that synthetic resources must have, including lists and "
                       "various status objects.", "type": "object",
        "properties": {"continue": {"type": "string", "description": "continue may be set if the user set a limit "
                                    "on the number of items returned."},
                       "remainingItemCount": {"type": "integer", "format": "int64"},
                       "resourceVersion": {"type": "string", "description": "String that identifies the server's "
                                           "internal version of this object."},
                       "selfLink": {"type": "string"}}},
    f"{META}.Status": {
        "description": "Status is a return value for calls that don't return other objects.", "type": "object",
        "properties": {"apiVersion": {"type": "string"}, "code": {"type": "integer", "format": "int32"},
                       "details": {"type": "object"}, "kind": {"type": "string"},
                       "message": {"type": "string"}, "metadata": {"$ref": f"#/$defs/{META}.ListMeta"},
                       "reason": {"type": "string"}, "status": {"type": "string"}},
        "x-kubernetes-group-version-kind": [{"group": "", "kind": "Status", "version": "v1"}]},
    f"{META}.DeleteOptions": {
        "description": "DeleteOptions may be provided when deleting an API object.", "type": "object",
        "properties": {"apiVersion": {"type": "string"}, "dryRun": {"type": "array", "items": {"type": "string"}},
                       "gracePeriodSeconds": {"type": "integer", "format": "int64"}, "kind": {"type": "string"},
                       "orphanDependents": {"type": "boolean"}, "preconditions": {"type": "object"},
                       "propagationPolicy": {"type": "string"}}},
    "io.k8s.api.autoscaling.v1.Scale": {
        "description": "Scale represents a scaling request for a resource.", "type": "object",
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                       "metadata": {"$ref": f"#/$defs/{META}.ObjectMeta"},
                       "spec": {"type": "object", "properties": {"replicas": {"type": "integer", "format": "int32",
                                "description": "replicas is the desired number of instances for the scaled "
                                               "object."}}},
                       "status": {"type": "object", "required": ["replicas"], "properties": {
                           "replicas": {"type": "integer", "format": "int32"},
                           "selector": {"type": "string"}}}},
        "x-kubernetes-group-version-kind": [{"group": "autoscaling", "kind": "Scale", "version": "v1"}]},
}
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
#: how Kubernetes publishes the definitions kctl's JSON Schemas spell differently
_SPECIAL: dict[str, dict] = {
    _INT_OR_STRING: {"description": "IntOrString is a type that can hold an int32 or a string.  When used in JSON "
                                    "or YAML marshalling and unmarshalling, it produces or consumes the inner type.",
                     "format": "int-or-string", "type": "string"},
    _QUANTITY: {"description": "Quantity is a fixed-point representation of a number (\"128974848\", \"129e6\", "
                               "\"129M\", \"123Mi\").", "type": "string"},
}
_DROPPED = frozenset({"$schema", "$defs", "prefixItems", "$id"})


def package(group: str) -> str:
    """Kubernetes' package prefix of a group's definitions: `io.k8s.api.apps`, `com.example.stable`."""
    if group in _PACKAGES:
        return _PACKAGES[group]
    if group.endswith(".k8s.io"):
        return "io.k8s.api." + group[: -len(".k8s.io")].split(".")[0]
    if "." not in group:
        return "io.k8s.api." + group
    return ".".join(reversed(group.split(".")))


def definition_name(group: str, version: str, kind: str) -> str:
    """The definition name of a kind: `io.k8s.api.core.v1.Pod`."""
    return f"{package(group)}.{version}.{kind}"


def _ref(name: str, *, v3: bool) -> str:
    return ("#/components/schemas/" if v3 else "#/definitions/") + name


def _type(value: Any) -> tuple[Any, dict]:
    """(OpenAPI type or None, extra keys) of a JSON Schema type (a list with "null" in kctl's schemas)."""
    if not isinstance(value, list):
        return value, {}
    kinds = [t for t in value if t != "null"]
    if sorted(kinds) == ["integer", "string"]:
        return "string", {"format": "int-or-string"}
    if "string" in kinds and len(kinds) > 1:
        return "string", {}
    return (kinds[0] if len(kinds) == 1 else None), {}


def convert(node: Any, *, v3: bool) -> Any:
    """One JSON Schema node (kctl's dialect) as Kubernetes' OpenAPI v2 or v3 node, recursively."""
    if isinstance(node, list):
        return [convert(item, v3=v3) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "$ref" and isinstance(value, str):
            out["$ref"] = _ref(value.rsplit("/", 1)[-1], v3=v3)
        elif key == "type":
            kind, extra = _type(value)
            if kind is not None:
                out["type"] = kind
            out.update(extra)
        elif key == "additionalProperties":
            if isinstance(value, dict):
                out[key] = convert(value, v3=v3)
        elif key in ("properties", "patternProperties") and isinstance(value, dict):
            out[key] = {name: convert(sub, v3=v3) for name, sub in value.items()}
        elif key == "enum" and isinstance(value, list):
            out[key] = [v for v in value if v is not None]
        elif key in ("items", "allOf", "anyOf", "oneOf", "not"):
            out[key] = convert(value, v3=v3)
        else:
            out[key] = copy.deepcopy(value)
    if "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        if v3:
            out["allOf"] = [{"$ref": ref}]
        else:  # v2: Kubernetes keeps the description and extensions beside the reference
            out = {"$ref": ref, **out}
    return out


def _root_properties(properties: dict) -> dict:
    """A kind's apiVersion and kind as Kubernetes publishes them (plain strings, no enum of one value)."""
    out = dict(properties)
    for name in ("apiVersion", "kind"):
        if isinstance(out.get(name), dict):
            out[name] = {k: v for k, v in out[name].items() if k != "enum"}
    return out


@lru_cache(maxsize=2)
def builtin_definitions(v3: bool) -> dict[str, dict]:
    """The shared definitions (kctl's `$defs` plus the extra meta types), converted (do not mutate)."""
    from kctl.machinery.resources import BUILTIN

    any_builtin = next(rt for rt in BUILTIN if not rt.is_custom)
    defs = dict(schemas.load(any_builtin)["$defs"])
    defs.update(_EXTRA)
    out = {name: convert(node, v3=v3) for name, node in defs.items()}
    out.update(copy.deepcopy(_SPECIAL))
    if v3:  # v3 says "one of two types" (kubectl explain then names the type: <IntOrString>, <Quantity>)
        del out[_INT_OR_STRING]["type"], out[_QUANTITY]["type"]
        out[_INT_OR_STRING]["oneOf"] = [{"type": "integer"}, {"type": "string"}]
        out[_QUANTITY]["oneOf"] = [{"type": "string"}, {"type": "number"}]
    return out


def kind_definition(rt: ResourceType, *, v3: bool, crd_schema: dict | None = None) -> dict | None:
    """The definition of a kind; a custom kind's from its CRD version's openAPIV3Schema (None: no schema)."""
    gvk = [{"group": rt.group, "kind": rt.kind, "version": rt.version}]
    if rt.is_custom:
        root = copy.deepcopy(crd_schema) if isinstance(crd_schema, dict) else {"type": "object"}
        properties = dict(root.get("properties") or {})
        properties["apiVersion"] = {"description": "APIVersion defines the versioned schema of this representation "
                                    "of an object.", "type": "string"}
        properties["kind"] = {"description": "Kind is a string value representing the REST resource this object "
                              "represents.", "type": "string"}
        properties["metadata"] = convert({"$ref": schemas.OBJECT_META_REF, "description": "Standard object's metadata. "
                                          "More info: https://git.k8s.io/community/contributors/devel/"
                                          "sig-architecture/api-conventions.md#metadata"}, v3=v3)
        root["properties"] = properties
        root.setdefault("type", "object")
        root["x-kubernetes-group-version-kind"] = gvk
        return root
    try:
        schema = schemas.load(rt)
    except OSError:
        return None
    out = convert({k: v for k, v in schema.items() if k != "additionalProperties"}, v3=v3)
    out["properties"] = _root_properties(out.get("properties") or {})
    out["x-kubernetes-group-version-kind"] = gvk
    return out


def list_definition(rt: ResourceType, *, v3: bool) -> dict:
    """`<Kind>List`: items of the kind and the list's metadata."""
    item = definition_name(rt.group, rt.version, rt.kind)
    return {
        "description": f"{rt.kind}List is a list of {rt.kind} objects.",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this "
                           "representation of an object."},
            "items": {"type": "array", "items": {"$ref": _ref(item, v3=v3)}, "description": f"List of {rt.plural}."},
            "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this "
                     "object represents."},
            "metadata": convert({"$ref": f"#/$defs/{META}.ListMeta", "description": "Standard list metadata."},
                                v3=v3),
        },
        "x-kubernetes-group-version-kind": [{"group": rt.group, "kind": rt.kind + "List", "version": rt.version}],
    }


def references(node: Any, found: set[str] | None = None) -> set[str]:
    """The definition names a node refers to (directly; the caller follows them)."""
    found = set() if found is None else found
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref.rsplit("/", 1)[-1])
        for value in node.values():
            if isinstance(value, (dict, list)):
                references(value, found)
    elif isinstance(node, list):
        for value in node:
            references(value, found)
    return found
