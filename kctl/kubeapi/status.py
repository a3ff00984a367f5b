"""Errors as Kubernetes' `Status` objects: what every handler of the HTTPS API answers a failure with.

kctl.kubeapi.app (authentication, authorization, unknown paths), kctl.kubeapi.resources (the verbs)
and the other handlers of kctl.kubeapi turn an APIError from kctl's API, or a failure of their own,
into a `v1 Status` body with Kubernetes' reason, code, details {name, group, kind, causes} and
message, as kube-apiserver's `apierrors` package words them.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from kctl.machinery.errors import APIError, Invalid
from kctl.machinery.managedfields import ApplyConflict

if TYPE_CHECKING:
    from aiohttp import web

#: Kubernetes' reasons for codes kctl's errors do not name themselves
REASONS: dict[int, str] = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
    406: "NotAcceptable", 409: "Conflict", 410: "Expired", 413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
    501: "NotImplemented", 503: "ServiceUnavailable", 504: "Timeout",
}
#: the object a kctl error message names: `deployments.apps "web" not found`, `Deployment.apps "web" is invalid`
_NAMED = re.compile(r'^(?P<what>[A-Za-z0-9.-]+) "(?P<name>[^"]*)"')
#: how a kctl field error's message maps to Kubernetes' cause reason
_CAUSE_REASONS = (("Required value", "FieldValueRequired"), ("Unsupported value", "FieldValueNotSupported"),
                  ("Duplicate value", "FieldValueDuplicate"), ("Forbidden", "FieldValueForbidden"),
                  ("Too long", "FieldValueTooLong"), ("Too many", "FieldValueTooMany"),
                  ("unknown field", "FieldValueInvalid"))


def failure(code: int, message: str, *, reason: str | None = None, details: dict | None = None) -> dict:
    """A v1 Status of a failure: code, its reason (Kubernetes' word for the code unless given), message."""
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
              "reason": reason or REASONS.get(code, "Unknown"), "code": code}
    if details is not None:  # kube-apiserver sends `details: {}` where it has nothing to say (a 404 of a path)
        status["details"] = details
    return status


def success(*, code: int = 200, details: dict | None = None) -> dict:
    """A v1 Status of a success (a delete that finished, an eviction, a binding)."""
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
    if details:
        status["details"] = details
    return status


def status_of(exc: APIError, *, name: str | None = None, group: str | None = None, kind: str | None = None) -> dict:
    """The v1 Status of an error of kctl's API, with Kubernetes' reason, code and details.

    name/group/kind (the resource's plural, as Kubernetes' details carry it) come from the request when the
    caller knows them; else they are read from the message where it names an object.
    """
    code = getattr(exc, "code", 500) or 500
    reason = getattr(exc, "reason", "") or REASONS.get(code, "InternalError")
    if reason == "Gone":  # kube-apiserver's word for a compacted resourceVersion
        reason = "Expired"
    details: dict = {}
    named = _NAMED.match(exc.message or "")
    if name is None and named:
        name = named.group("name")
    if name:
        details["name"] = name
    if group is None and kind is None and named:
        what = named.group("what")
        kind, _, group = what.partition(".")
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    if isinstance(exc, Invalid):
        if named:  # an Invalid's details name the Kind (Deployment), not the resource
            details["kind"] = named.group("what").split(".")[0]
        details["causes"] = [_cause(c.path, c.message) for c in exc.causes]
    elif isinstance(exc, ApplyConflict):  # server-side apply: each field another manager owns
        details["causes"] = exc.status()["details"]["causes"]
    if not details and reason == "NotFound":  # a NotFound always has details (kubectl debug reads details.name)
        return failure(code, exc.message, reason=reason, details={})
    return failure(code, exc.message, reason=reason, details=details or None)


def names_an_object(message: str) -> bool:
    """Whether a message begins by naming the object it is about (`configmaps "a" not found`): its details are
    read from it."""
    return _NAMED.match(message or "") is not None


def _cause(path: str, message: str) -> dict:
    reason = next((r for prefix, r in _CAUSE_REASONS if message.startswith(prefix)), "FieldValueInvalid")
    cause = {"reason": reason, "message": f"{message}"}
    if path:
        cause["field"] = path
    return cause


def unknown_error(exc: BaseException) -> dict:
    """The Status of a failure no handler expected: its type only (never data a message may hold)."""
    return failure(500, f"Internal error occurred: {type(exc).__name__}", reason="InternalError")


def json_response(body: dict | list, *, status: int = 200, headers: dict | None = None) -> "web.Response":
    """A JSON response (Content-Type application/json), as kube-apiserver sends."""
    from aiohttp import web

    return web.Response(body=json.dumps(body, separators=(",", ":")).encode(), status=status,
                        content_type="application/json", headers=headers)


def status_response(status: dict, *, headers: dict | None = None) -> "web.Response":
    """A Status body with its code as the HTTP status."""
    return json_response(status, status=int(status.get("code") or 500), headers=headers)


def error_response(exc: APIError, *, name: str | None = None, group: str | None = None, kind: str | None = None,
                   headers: dict | None = None) -> "web.Response":
    """The HTTP response of an error of kctl's API: its Status, with its code."""
    return status_response(status_of(exc, name=name, group=group, kind=kind), headers=headers)


__all__ = ["REASONS", "error_response", "failure", "json_response", "names_an_object", "status_of",
           "status_response", "success", "unknown_error"]
