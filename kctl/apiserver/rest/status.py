"""What a Kubernetes API server answers besides objects: Status errors and Warning headers.

kctl.apiserver.rest.transport calls `error_of(code, body)` for every answer of 400 or more and
`warnings_of(headers)` for every answer: a Status becomes the kctl.machinery.errors class of its
reason (NotFound, Conflict, Invalid with its causes, ...), so callers of the REST client see the
same errors, with the same messages, as callers of the in-process APIServer; the CLI prints
them as kubectl does (`Error from server (NotFound): pods "x" not found`).
"""

from __future__ import annotations

import json
import re

from kctl.machinery import errors
from kctl.machinery.errors import APIError, ClientSideError, FieldError
from kctl.apiserver.wire import ServerUnavailable


class Unauthorized(ClientSideError):
    """401: no credentials, or ones the server does not accept (kubectl: `error: You must be logged in...`)."""

    reason, code, exit_code = "Unauthorized", 401, 1


#: a Status reason -> the error class callers catch
_BY_REASON: dict[str, type[APIError]] = {
    "BadRequest": errors.BadRequest, "NotFound": errors.NotFound, "AlreadyExists": errors.AlreadyExists,
    "Conflict": errors.Conflict, "Invalid": errors.Invalid, "Forbidden": errors.Forbidden,
    "Gone": errors.Gone, "Expired": errors.Gone, "Timeout": errors.Timeout, "ServerTimeout": errors.Timeout,
    "RequestEntityTooLarge": errors.RequestEntityTooLarge, "TooManyRequests": errors.TooManyRequests,
    "ServiceUnavailable": ServerUnavailable, "Unauthorized": Unauthorized,
}
#: an HTTP status with no (known) reason -> the class
_BY_CODE: dict[int, type[APIError]] = {
    400: errors.BadRequest, 401: Unauthorized, 403: errors.Forbidden, 404: errors.NotFound, 409: errors.Conflict,
    410: errors.Gone, 413: errors.RequestEntityTooLarge, 422: errors.Invalid, 429: errors.TooManyRequests,
    503: ServerUnavailable, 504: errors.Timeout,
}
#: the longest piece of a non-Status error body quoted in a message
_QUOTE = 200


def error_of(code: int, body: bytes | dict | None) -> APIError:
    """The kctl error of an answer with HTTP status `code` (>= 400) and its body (a Status, or anything)."""
    status = body if isinstance(body, dict) else _status(body)
    if status is None:
        text = (body or b"").decode("utf-8", "replace").strip().splitlines()
        said = text[0][:_QUOTE] if text else ""
        return _make(_BY_CODE.get(code, APIError), code, "",
                     f"the server answered {code}" + (f": {said}" if said else ""), None)
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or "")
    try:
        status_code = int(status.get("code") or code)
    except (TypeError, ValueError):
        status_code = code
    cls = _BY_REASON.get(reason) or _BY_CODE.get(status_code, APIError)
    if cls is Unauthorized:
        message = "You must be logged in to the server (Unauthorized)"
    details = status.get("details") if isinstance(status.get("details"), dict) else {}
    causes = [c for c in details.get("causes") or () if isinstance(c, dict)]
    if cls is errors.Conflict and any(c.get("reason") == "FieldManagerConflict" for c in causes):
        from kctl.machinery.managedfields import ApplyConflict  # a server-side apply's conflicts, field by field

        return ApplyConflict(message, [FieldError(str(c.get("field") or ""), str(c.get("message") or ""))
                                       for c in causes])
    return _make(cls, status_code, reason, message or f"the server answered {status_code}", details)


def _status(body: bytes | None) -> dict | None:
    if not body:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("kind") == "Status":
        return data
    return None


def _make(cls: type[APIError], code: int, reason: str, message: str, details: dict | None) -> APIError:
    """An instance of cls carrying the server's message verbatim (and an Invalid's causes)."""
    exc = cls.__new__(cls)
    APIError.__init__(exc, message)
    if cls is APIError or (reason and reason != cls.reason and reason not in ("Expired", "ServerTimeout")):
        exc.reason = reason or "InternalError"
        exc.code = code
    if cls is errors.Invalid:
        exc.causes = [FieldError(str(c.get("field") or ""), str(c.get("message") or ""))
                      for c in (details or {}).get("causes") or () if isinstance(c, dict)]
    return exc


_WARNING = re.compile(r'(\d{3})\s+(\S+)\s+"((?:[^"\\]|\\.)*)"')


def warnings_of(values: list[str]) -> list[str]:
    """The texts of RFC 7234 Warning header values (`299 - "text"`), as kubectl prints them."""
    out: list[str] = []
    for value in values:
        for match in _WARNING.finditer(value):
            text = re.sub(r"\\(.)", r"\1", match.group(3))
            if text not in out:
                out.append(text)
    return out


__all__ = ["Unauthorized", "error_of", "warnings_of"]
