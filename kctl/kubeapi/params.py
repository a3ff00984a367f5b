"""The query parameters and option bodies of the resource verbs, read and checked as kube-apiserver does.

kctl.kubeapi.resources and kctl.kubeapi.watch call `list_options`, `write_options` and
`delete_options`; a bad value is a BadRequest naming the parameter (a 400 Status). The continue
token of a paged list (`limit`/`continue`) is made and read here: it carries the list's revision
and the last key returned, base64 of JSON as Kubernetes' (whose content clients never read).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Mapping

from kctl.machinery.errors import BadRequest

FIELD_VALIDATION = ("Strict", "Warn", "Ignore")
#: fieldValidation when the request names none (kube-apiserver's default; kubectl sends Strict itself)
DEFAULT_FIELD_VALIDATION = "Warn"
PROPAGATION = ("Background", "Foreground", "Orphan")
RESOURCE_VERSION_MATCH = ("", "NotOlderThan", "Exact")


@dataclass(frozen=True)
class ListOptions:
    """What a list or watch asks for (metav1.ListOptions)."""

    label_selector: Any = None
    field_selector: Any = None
    limit: int = 0
    continue_key: tuple[str, str] | None = None
    continue_revision: int | None = None
    resource_version: str = ""
    resource_version_match: str = ""
    watch: bool = False
    allow_bookmarks: bool = False
    timeout_seconds: float | None = None
    send_initial_events: bool | None = None


@dataclass(frozen=True)
class WriteOptions:
    """What a create, update or patch asks for (dryRun, fieldValidation, fieldManager, force)."""

    dry_run: bool = False
    field_validation: str = DEFAULT_FIELD_VALIDATION
    field_manager: str | None = None
    force: bool = False


@dataclass(frozen=True)
class DeleteOptions:
    """What a delete asks for (metav1.DeleteOptions, from its body or the query)."""

    dry_run: bool = False
    propagation: str | None = None
    grace_period: int | None = None
    uid: str | None = None
    resource_version: str | None = None


def _bool(query: Mapping[str, str], name: str) -> bool | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise BadRequest(f'{name}: Invalid value: "{value}": must be true or false')


def _int(query: Mapping[str, str], name: str, *, minimum: int = 0) -> int | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise BadRequest(f'{name}: Invalid value: "{value}": must be an integer') from None
    if number < minimum:
        raise BadRequest(f'{name}: Invalid value: {number}: must be greater than or equal to {minimum}')
    return number


def dry_run_of(values: list[str]) -> bool:
    """dryRun: [] or ["All"] (Kubernetes knows no other value)."""
    for value in values:
        if value != "All":
            raise BadRequest(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return bool(values)


def list_options(query: Mapping[str, str], *, kind: str | None = None) -> ListOptions:
    """The ListOptions of a list or watch request; BadRequest for a bad parameter."""
    from kctl.machinery.selectors import parse_field_selector, parse_label_selector

    labels = query.get("labelSelector") or ""
    fields = query.get("fieldSelector") or ""
    limit = _int(query, "limit") or 0
    match = query.get("resourceVersionMatch") or ""
    if match not in RESOURCE_VERSION_MATCH:
        raise BadRequest(f'resourceVersionMatch: Unsupported value: "{match}": supported values: '
                         '"Exact", "NotOlderThan"')
    rv = query.get("resourceVersion") or ""
    if rv and not rv.isdigit():
        raise BadRequest(f'Invalid value: "{rv}": resourceVersion must be a number')
    key, revision = None, None
    token = query.get("continue") or ""
    if token:
        if rv:
            raise BadRequest("specifying resource version is not allowed when using continue")
        key, revision = decode_continue(token)
    timeout = _int(query, "timeoutSeconds")
    watch = bool(_bool(query, "watch"))
    send_initial = _bool(query, "sendInitialEvents")
    if send_initial is not None:  # as Kubernetes' ValidateListOptions
        if not watch:
            raise BadRequest("sendInitialEvents is forbidden for list")
        if match != "NotOlderThan":
            raise BadRequest("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
    elif watch and match:
        raise BadRequest("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
    elif match and not rv:
        raise BadRequest("resourceVersionMatch is forbidden unless resourceVersion is provided")
    return ListOptions(
        label_selector=parse_label_selector(labels) if labels else None,
        field_selector=parse_field_selector(fields, kind=kind) if fields else None,
        limit=limit, continue_key=key, continue_revision=revision, resource_version=rv,
        resource_version_match=match, watch=watch, allow_bookmarks=bool(_bool(query, "allowWatchBookmarks")),
        timeout_seconds=float(timeout) if timeout else None, send_initial_events=send_initial)


def write_options(query: Any) -> WriteOptions:
    """The WriteOptions of a create, update or patch (query: a multidict: dryRun may repeat)."""
    validation = query.get("fieldValidation") or DEFAULT_FIELD_VALIDATION
    if validation not in FIELD_VALIDATION:
        raise BadRequest(f'fieldValidation: Unsupported value: "{validation}": supported values: '
                         '"Ignore", "Strict", "Warn"')
    return WriteOptions(dry_run=dry_run_of(_all(query, "dryRun")), field_validation=validation,
                        field_manager=query.get("fieldManager") or None, force=bool(_bool(query, "force")))


def _all(query: Any, name: str) -> list[str]:
    getall = getattr(query, "getall", None)
    if getall is not None:
        return list(getall(name, []))
    value = query.get(name)
    return [value] if value else []


def delete_options(query: Any, body: dict | None) -> DeleteOptions:
    """The DeleteOptions of a delete: the body's (a DeleteOptions object), else the query's."""
    body = body or {}
    if not isinstance(body, dict):
        raise BadRequest("the body of a delete must be a DeleteOptions object")
    dry = body.get("dryRun")
    dry_run = dry_run_of(list(dry) if isinstance(dry, list) else _all(query, "dryRun"))
    propagation = body.get("propagationPolicy") or query.get("propagationPolicy") or None
    orphan = body.get("orphanDependents")
    if orphan is None and query.get("orphanDependents") is not None:
        orphan = bool(_bool(query, "orphanDependents"))
    if propagation is None and orphan is not None:
        propagation = "Orphan" if orphan else "Background"
    if propagation is not None and propagation not in PROPAGATION:
        raise BadRequest(f'propagationPolicy: Unsupported value: "{propagation}": supported values: '
                         '"Background", "Foreground", "Orphan"')
    grace = body.get("gracePeriodSeconds")
    if grace is None:
        grace = _int(query, "gracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool) or grace < 0):
        raise BadRequest(f"gracePeriodSeconds: Invalid value: {grace!r}: must be a whole number >= 0")
    pre = body.get("preconditions") or {}
    if not isinstance(pre, dict):
        raise BadRequest("preconditions: must be an object")
    return DeleteOptions(dry_run=dry_run, propagation=propagation, grace_period=grace, uid=pre.get("uid") or None,
                         resource_version=str(pre["resourceVersion"]) if pre.get("resourceVersion") else None)


def encode_continue(revision: int, key: tuple[str, str]) -> str:
    """The continue token of a page that ended at key (namespace, name) of a list at revision."""
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": list(key)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[tuple[str, str], int]:
    """The key after which the next page starts, and the list's revision; BadRequest for a token not ours."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        namespace, name = data["start"]
        return (str(namespace), str(name)), int(data["rv"])
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise BadRequest("continue key is not valid: the token was not made by this server") from None


__all__ = ["DEFAULT_FIELD_VALIDATION", "DeleteOptions", "ListOptions", "WriteOptions", "decode_continue",
           "delete_options", "dry_run_of", "encode_continue", "list_options", "write_options"]
