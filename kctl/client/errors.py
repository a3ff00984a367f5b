"""Temporary or permanent: how a client of the API judges an error it got (client-go's retry semantics).

A reconcile that fails either may succeed if simply run again later (the object changed
under it, the control plane did not answer, a watch fell behind the compacted horizon)
or cannot succeed until something else changes (the object it wrote is invalid, the
write is forbidden, the object is gone). Kubernetes tells them apart by the Status
reason of the error (apimachinery's `errors.IsConflict`, `IsServiceUnavailable`,
`IsTooManyRequests`, `IsInvalid`, ...); kctl's errors (kctl.machinery.errors) carry the
same reasons and HTTP codes, so `is_temporary` reads those:

- temporary: Conflict, Gone/Expired (a watch re-lists), TooManyRequests, Timeout,
  ServerTimeout, ServiceUnavailable (the remote API's ssh died or never answered),
  InternalError and any other 5xx; connection and OS errors (`OSError`, `TimeoutError`);
  and, as Kubernetes' controllers treat every unrecognised error, any other exception;
- permanent: every other 4xx: Invalid, BadRequest, Forbidden, NotFound (the object is
  gone), AlreadyExists (the same create cannot succeed), RequestEntityTooLarge.

A caller may say it itself: raise `TemporaryError` (optionally with a `delay` in
seconds, instead of the queue's back-off) or `PermanentError` (optionally naming the
object and the Event reason to record on it).

Used by the controllers' error handling (kctl/controllers/base.py, which the controller
manager calls when a reconcile raises) and by anyone who retries a call
(`is_temporary`). Imports nothing above the object model's errors.
"""

from __future__ import annotations

from kctl.machinery.errors import APIError

#: Status reasons a retry may cure (apimachinery's IsConflict, IsGone, IsResourceExpired,
#: IsTooManyRequests, IsTimeout, IsServerTimeout, IsServiceUnavailable, IsInternalError)
TEMPORARY_REASONS = frozenset({"Conflict", "Gone", "Expired", "TooManyRequests", "Timeout", "ServerTimeout",
                               "ServiceUnavailable", "InternalError"})
#: Status reasons only another change can cure (apimachinery's IsInvalid, IsBadRequest,
#: IsForbidden, IsNotFound, IsAlreadyExists, IsRequestEntityTooLargeError, IsUnauthorized, ...)
PERMANENT_REASONS = frozenset({"Invalid", "BadRequest", "Forbidden", "NotFound", "AlreadyExists",
                               "RequestEntityTooLarge", "Unauthorized", "MethodNotAllowed", "NotAcceptable",
                               "UnsupportedMediaType"})
#: the Event reason a permanent failure is recorded under unless the error names another
DEFAULT_EVENT_REASON = "FailedSync"


class TemporaryError(Exception):
    """Raised by a reconcile that must run again later: after `delay` seconds, or the queue's back-off (None)."""

    def __init__(self, message: str, *, delay: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.delay = delay


class PermanentError(Exception):
    """Raised by a reconcile that cannot succeed until something changes.

    `obj` is the object to record a Warning Event on (else the controller's own object for
    the key, when it can say which), `reason` the Event's reason.
    """

    def __init__(self, message: str, *, obj: dict | None = None, reason: str = DEFAULT_EVENT_REASON) -> None:
        super().__init__(message)
        self.message = message
        self.obj = obj
        self.reason = reason


def is_temporary(exc: BaseException) -> bool:
    """Whether running the same thing again later may succeed (see the module docstring)."""
    if isinstance(exc, TemporaryError):
        return True
    if isinstance(exc, PermanentError):
        return False
    if isinstance(exc, APIError):
        if exc.reason in TEMPORARY_REASONS:
            return True
        if exc.reason in PERMANENT_REASONS:
            return False
        return exc.code in (409, 410, 429) or not 400 <= exc.code < 500  # 5xx (and no code) temporary
    return True  # OSError, TimeoutError, a bug: retried with back-off, as Kubernetes' controllers do


def is_permanent(exc: BaseException) -> bool:
    """Whether only another change can make it succeed (the opposite of `is_temporary`)."""
    return not is_temporary(exc)


def retry_delay(exc: BaseException) -> float | None:
    """Seconds the error asks to wait before the next try (a TemporaryError's delay), else None."""
    return exc.delay if isinstance(exc, TemporaryError) else None


def event_reason(exc: BaseException) -> str:
    """The reason of the Warning Event that records a permanent failure."""
    return exc.reason if isinstance(exc, PermanentError) else DEFAULT_EVENT_REASON


def one_line(exc: BaseException) -> str:
    """The error's message on one line (no traceback, no newlines), as a log line or Event shows it."""
    text = " ".join(str(getattr(exc, "message", None) or exc).split())
    return text or type(exc).__name__


__all__ = ["DEFAULT_EVENT_REASON", "PERMANENT_REASONS", "PermanentError", "TEMPORARY_REASONS", "TemporaryError",
           "event_reason", "is_permanent", "is_temporary", "one_line", "retry_delay"]
