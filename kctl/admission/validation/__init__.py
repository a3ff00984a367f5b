"""Validation of objects: the JSON Schema step of admission, plus the checks a schema cannot say.

The API layer calls `validate(obj, rt)` after defaulting and mutating hooks and before
validating hooks; an empty list means the object may be stored, otherwise it raises
`Invalid` with these FieldErrors. Messages follow kubectl's strict validation
(`spec.replicass: unknown field "replicass"`, `spec.replicas: Invalid value: "3": must be
an integer`), paths are dotted with [i] indices.

The package, one idea a module:
- schema.py: the kind's JSON Schema, checked fast (compiled predicates) and explained by
  jsonschema when it fails;
- kinds.py: the semantic checks by kind (metadata, workloads, Jobs, CronJobs, Services,
  ConfigMaps/Secrets, admission hooks), with podspec.py (Kubernetes' ValidatePodSpec)
  and file_modes.py (volume file modes);
- names.py: name, label, annotation and selector syntax (apimachinery's util/validation);
- crd.py: what a CustomResourceDefinition must satisfy beyond its schema (`validate_crd`);
- fields.py: field paths and FieldErrors as kubectl prints them.

Turning a stored CRD into ResourceTypes is the API layer's (kctl.machinery.crd.crd_resource_types).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kctl.admission.validation.crd import validate_crd
from kctl.admission.validation.kinds import KIND_CHECKS, metadata_errors
from kctl.admission.validation.schema import schema_errors
from kctl.machinery.errors import FieldError
from kctl.machinery.resources import ResourceType

__all__ = ["validate", "validate_crd"]


def validate(obj: dict, rt: ResourceType) -> list[FieldError]:
    """Every problem with `obj` as an object of kind `rt`, sorted by path; [] if it is valid.

    Schema errors (unknown fields, wrong types, bad quantities) come first and alone, as
    from the API server: only an object that matches its schema gets the semantic checks.
    """
    errors = schema_errors(obj, rt)
    if errors:  # as the API server: an object that does not decode is not checked further
        return _finish(errors)
    errors = metadata_errors(obj, rt)
    for check in KIND_CHECKS.get(rt.group_kind, ()):
        errors.extend(check(obj))
    return _finish(errors)


def _finish(errors: Iterable[FieldError]) -> list[FieldError]:
    """Deduplicated and sorted by path (numeric indices in numeric order)."""
    return sorted(set(errors), key=lambda e: (_path_sort_key(e.path), e.message))


def _path_sort_key(path: str) -> tuple:
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"[.\[\]]+", path) if part)
