"""Temporary vs permanent errors (kctl.client.errors): apimachinery's reasons and client-go's retry semantics."""

from __future__ import annotations

import pytest

from kctl.apiserver.wire import ServerUnavailable
from kctl.client import errors
from kctl.client.claim import ClaimIncomplete
from kctl.client.errors import PermanentError, TemporaryError
from kctl.machinery.errors import (AlreadyExists, APIError, BadRequest, ClientSideError, Conflict, FieldError,
                                   Forbidden, Gone, Invalid, NotFound, RequestEntityTooLarge, Timeout)


def api_error(reason: str, code: int) -> APIError:
    """An APIError as a remote server's Status decodes it: only reason and code are known."""
    exc = APIError("from the server")
    exc.reason, exc.code = reason, code
    return exc


TEMPORARY = [
    (Conflict("the object has been modified"), "conflict"),
    (Gone("too old resource version"), "gone-watch-relists"),
    (Timeout("timed out"), "timeout"),
    (ServerUnavailable("cannot reach the control plane"), "server-unavailable"),
    (api_error("TooManyRequests", 429), "too-many-requests"),
    (api_error("ServerTimeout", 504), "server-timeout"),
    (api_error("Expired", 410), "expired"),
    (APIError("store exploded"), "internal-error"),
    (api_error("SomethingNew", 502), "unknown-5xx"),
    (ConnectionResetError("reset by peer"), "connection-reset"),
    (TimeoutError("read timed out"), "socket-timeout"),
    (OSError("broken pipe"), "os-error"),
    (ClaimIncomplete("an adoption conflicted"), "claim-incomplete"),
    (KeyError("spec"), "unrecognised-exception"),
    (TemporaryError("not yet"), "temporary-error"),
]
PERMANENT = [
    (Invalid("pods \"p\"", [FieldError("spec.containers", "Required value")]), "invalid"),
    (BadRequest("not an object"), "bad-request"),
    (ClientSideError("unknown resource type"), "client-side"),
    (Forbidden("namespace is terminating"), "forbidden"),
    (NotFound("pods", "p", "default"), "not-found"),
    (AlreadyExists("pods", "p"), "already-exists"),
    (RequestEntityTooLarge("object over 1.5 MiB"), "too-large"),
    (api_error("Unauthorized", 401), "unauthorized"),
    (api_error("SomethingNew", 418), "unknown-4xx"),
    (PermanentError("cannot ever work"), "permanent-error"),
]


@pytest.mark.parametrize("exc", [e for e, _ in TEMPORARY], ids=[i for _, i in TEMPORARY])
def test_temporary_errors(exc):
    """Errors a retry may cure are temporary (and not permanent)."""
    assert errors.is_temporary(exc) and not errors.is_permanent(exc)


@pytest.mark.parametrize("exc", [e for e, _ in PERMANENT], ids=[i for _, i in PERMANENT])
def test_permanent_errors(exc):
    """Errors only another change can cure are permanent (and not temporary)."""
    assert errors.is_permanent(exc) and not errors.is_temporary(exc)


@pytest.mark.parametrize("exc, delay", [
    (TemporaryError("wait", delay=12.5), 12.5),
    (TemporaryError("back-off"), None),
    (Conflict("modified"), None),
    (PermanentError("no"), None),
], ids=["temporary-with-delay", "temporary-without", "api-error", "permanent"])
def test_retry_delay(exc, delay):
    """Only a TemporaryError's own delay replaces the queue's back-off."""
    assert errors.retry_delay(exc) == delay


@pytest.mark.parametrize("exc, reason", [
    (PermanentError("bad selector", reason="InvalidSelector"), "InvalidSelector"),
    (PermanentError("no"), "FailedSync"),
    (Invalid("x", "bad"), "FailedSync"),
], ids=["own-reason", "permanent-default", "api-error-default"])
def test_event_reason(exc, reason):
    """The Warning Event's reason: the PermanentError's own, else FailedSync."""
    assert errors.event_reason(exc) == reason


@pytest.mark.parametrize("exc, line", [
    (Conflict("a\nb  c"), "a b c"),
    (KeyError("spec"), "'spec'"),
    (RuntimeError(), "RuntimeError"),
    (PermanentError("cannot\n  work", obj={"metadata": {}}), "cannot work"),
], ids=["newlines-folded", "plain-exception", "empty-message", "permanent"])
def test_one_line(exc, line):
    """An error's message always fits one log line or Event message."""
    assert errors.one_line(exc) == line


def test_permanent_error_carries_its_object():
    """PermanentError names the object and reason for its Warning Event."""
    obj = {"metadata": {"name": "web"}}
    exc = PermanentError("broken", obj=obj, reason="Broken")
    assert exc.obj is obj and exc.reason == "Broken" and str(exc) == "broken"
