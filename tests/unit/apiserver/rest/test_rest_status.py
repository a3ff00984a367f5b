"""Status answers -> kctl errors, and Warning headers -> warnings (kctl.apiserver.rest.status)."""

from __future__ import annotations

import json

import pytest

from kctl.apiserver.rest.status import Unauthorized, error_of, warnings_of
from kctl.apiserver.wire import ServerUnavailable
from kctl.cli.connect import error_line
from kctl.machinery import errors


def status(reason: str, code: int, message: str, **details) -> bytes:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code,
            "message": message}
    if details:
        body["details"] = details
    return json.dumps(body).encode()


CASES = [
    ("not-found", 404, status("NotFound", 404, 'pods "x" not found'), errors.NotFound, 3,
     'Error from server (NotFound): pods "x" not found'),
    ("already-exists", 409, status("AlreadyExists", 409, 'pods "x" already exists'), errors.AlreadyExists, 4,
     'Error from server (AlreadyExists): pods "x" already exists'),
    ("conflict", 409, status("Conflict", 409, "the object has been modified"), errors.Conflict, 5,
     "Error from server (Conflict): the object has been modified"),
    ("forbidden", 403, status("Forbidden", 403, 'pods is forbidden: User "alice" cannot list resource "pods"'),
     errors.Forbidden, 7, 'Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods"'),
    ("gone", 410, status("Expired", 410, "too old resource version: 1 (5)"), errors.Gone, 8,
     "Error from server (Gone): too old resource version: 1 (5)"),
    ("too-many", 429, status("TooManyRequests", 429, "Cannot evict pod"), errors.TooManyRequests, 10,
     "Error from server (TooManyRequests): Cannot evict pod"),
    ("too-large", 413, status("RequestEntityTooLarge", 413, "too big"), errors.RequestEntityTooLarge, 6,
     "Error from server (RequestEntityTooLarge): too big"),
    ("bad-request", 400, status("BadRequest", 400, "bad"), errors.BadRequest, 1, "Error from server (BadRequest): bad"),
    ("timeout", 504, status("Timeout", 504, "slow"), errors.Timeout, 9, "Error from server (Timeout): slow"),
    ("unavailable", 503, status("ServiceUnavailable", 503, "later"), ServerUnavailable, 1,
     "Error from server (ServiceUnavailable): later"),
    ("unauthorized", 401, status("Unauthorized", 401, "Unauthorized"), Unauthorized, 1,
     "error: You must be logged in to the server (Unauthorized)"),
    ("code-only", 404, status("", 404, "gone away"), errors.NotFound, 3, "Error from server (NotFound): gone away"),
    ("internal", 500, status("InternalError", 500, "boom"), errors.APIError, 1,
     "Error from server (InternalError): boom"),
    ("method", 405, status("MethodNotAllowed", 405, "no"), errors.APIError, 1,
     "Error from server (MethodNotAllowed): no"),
    ("not-json", 502, b"<html>Bad Gateway</html>\n", errors.APIError, 1,
     "Error from server (InternalError): the server answered 502: <html>Bad Gateway</html>"),
]


@pytest.mark.parametrize("code,body,cls,exit_code,line", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_status_becomes_the_kctl_error_of_its_reason(code, body, cls, exit_code, line):
    """Each Status reason (or bare HTTP code) is the kctl error class, exit status and line a local API gives."""
    exc = error_of(code, body)
    assert type(exc) is cls
    assert exc.exit_code == exit_code
    assert error_line(exc) == line


def test_invalid_keeps_its_field_causes():
    """An Invalid Status keeps the server's message and each cause's field path."""
    body = status("Invalid", 422, 'Deployment.apps "w" is invalid: spec.replicas: must be >= 0',
                  causes=[{"reason": "FieldValueInvalid", "field": "spec.replicas", "message": "must be >= 0"}])
    exc = error_of(422, body)
    assert isinstance(exc, errors.Invalid) and exc.exit_code == 6
    assert exc.message == 'Deployment.apps "w" is invalid: spec.replicas: must be >= 0'
    assert [(c.path, c.message) for c in exc.causes] == [("spec.replicas", "must be >= 0")]


@pytest.mark.parametrize("values,expected", [
    (['299 - "a deprecated field"'], ["a deprecated field"]),
    (['299 - "one", 299 - "two"'], ["one", "two"]),
    (['299 - "quoted \\"x\\""', '299 kctl "again"'], ['quoted "x"', "again"]),
    (['299 - "same"', '299 - "same"'], ["same"]),
    ([], []),
], ids=["one", "two-in-one-header", "escapes-and-agent", "deduplicated", "none"])
def test_warning_headers_become_their_texts(values, expected):
    """RFC 7234 Warning values give their texts, as kubectl prints them after `Warning: `."""
    assert warnings_of(values) == expected
