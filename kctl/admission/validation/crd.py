"""What Kubernetes checks in a CustomResourceDefinition beyond its schema (`validate_crd`).

Names, versions, exactly one storage version, and each version's openAPIV3Schema (which
must convert to a valid JSON Schema). Called by the per-kind checks (kinds.py) for
CustomResourceDefinition objects. Turning a stored CRD into ResourceTypes is
kctl.machinery.crd's `crd_resource_types`.
"""

from __future__ import annotations

from kctl.admission.validation.fields import (Path, dig, invalid_value, join_path, required_value, show_value,
                                              unsupported_value)
from kctl.admission.validation.names import (DNS1035_LABEL, dns1123_label_problems, dns1123_subdomain_problems,
                                             name_errors)
from kctl.machinery import schemas
from kctl.machinery.errors import FieldError


def validate_crd(crd: dict) -> list[FieldError]:
    """What Kubernetes checks in a CRD beyond its schema: names, versions, storage, schemas."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return []
    errors: list[FieldError] = []
    group = spec.get("group")
    if isinstance(group, str):
        errors.extend(name_errors(("spec", "group"), group, dns1123_subdomain_problems))
        if "." not in group:
            errors.append(invalid_value(("spec", "group"), group, "should be a domain with at least one dot"))
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    plural = names.get("plural")
    for field in ("plural", "singular"):
        if isinstance(names.get(field), str) and names[field]:
            errors.extend(name_errors(("spec", "names", field), names[field], dns1123_label_problems))
    kind = names.get("kind")
    if isinstance(kind, str) and kind and not DNS1035_LABEL.fullmatch(kind.lower()):
        errors.append(invalid_value(("spec", "names", "kind"), kind,
                               "must start with a letter and consist of letters, digits or '-'"))
    short_names = names.get("shortNames")
    for i, short in enumerate(short_names if isinstance(short_names, list) else ()):
        if isinstance(short, str):
            errors.extend(name_errors(("spec", "names", "shortNames", i), short, dns1123_label_problems))
    name = dig(crd, "metadata", "name")
    if isinstance(plural, str) and isinstance(group, str) and name != f"{plural}.{group}":
        errors.append(invalid_value(("metadata", "name"), name, 'must be spec.names.plural+"."+spec.group'))
    scope = spec.get("scope")
    if isinstance(scope, str) and scope not in ("Cluster", "Namespaced"):
        errors.append(unsupported_value(("spec", "scope"), scope, ("Cluster", "Namespaced")))
    versions = spec.get("versions")
    if not isinstance(versions, list):
        return errors
    if not versions:
        errors.append(required_value(("spec", "versions"), "must have at least one version"))
        return errors
    storage = [v for v in versions if isinstance(v, dict) and v.get("storage") is True]
    if len(storage) != 1:
        errors.append(FieldError("spec.versions", f"Invalid value: {len(storage)} storage versions: "
                                                  "must have exactly one version marked as storage version"))
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if not isinstance(version, dict):
            continue
        path = ("spec", "versions", i)
        version_name = version.get("name")
        if isinstance(version_name, str):
            errors.extend(name_errors((*path, "name"), version_name, dns1123_label_problems))
            if version_name in seen:
                errors.append(FieldError(join_path((*path, "name")), f"Duplicate value: {show_value(version_name)}"))
            seen.add(version_name)
        openapi = dig(version, "schema", "openAPIV3Schema")
        if not isinstance(openapi, dict) or not openapi:
            errors.append(required_value((*path, "schema", "openAPIV3Schema"), "schemas are required"))
            continue
        errors.extend(_openapi_schema_errors(openapi, (*path, "schema", "openAPIV3Schema"),
                                             f"{group}/{version_name}", str(kind)))
    return errors


def _openapi_schema_errors(openapi: dict, path: Path, api_version: str, kind: str) -> list[FieldError]:
    if openapi.get("type") != "object":
        return [required_value((*path, "type"), 'must be "object" at the root')]
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    converted = schemas.crd_schema(openapi, api_version=api_version, kind=kind)
    try:
        Draft202012Validator.check_schema({k: v for k, v in converted.items() if k != "$defs"})
    except SchemaError as error:
        where = (*path, *error.absolute_path)
        return [invalid_value(where, error.instance, "not a valid schema: " + error.message)]
    return []
