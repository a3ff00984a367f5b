"""Typed API errors, as the Kubernetes API server returns them.

Raised by the store and the API layer (kctl.apiserver.server); the CLI turns each into one
line on stderr and the exit status named here (docs/cli.md lists them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One problem with one field: `path` is dotted with [i] indices (spec.containers[0].image)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class APIError(Exception):
    """Base of every error the API layer raises on purpose."""

    reason = "InternalError"
    code = 500
    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def status(self) -> dict:
        """The error as a Kubernetes `Status` object."""
        return {"apiVersion": "v1", "kind": "Status", "status": "Failure",
                "reason": self.reason, "code": self.code, "message": self.message}


class BadRequest(APIError):
    """Input that cannot be understood at all (not an object, unknown kind, bad selector)."""

    reason, code, exit_code = "BadRequest", 400, 1


class ClientSideError(BadRequest):
    """Bad input a client finds itself, before any request (unknown resource type, bad flag combination,
    output format or template): the CLI prints `error: ...` for it, as kubectl does, not `Error from server`."""


class NotFound(APIError):
    """The named object does not exist."""

    reason, code, exit_code = "NotFound", 404, 3

    def __init__(self, resource: str, name: str, namespace: str | None = None) -> None:
        where = f' in namespace "{namespace}"' if namespace else ""
        super().__init__(f'{resource} "{name}" not found{where}')


class AlreadyExists(APIError):
    """create of a name that is taken."""

    reason, code, exit_code = "AlreadyExists", 409, 4

    def __init__(self, resource: str, name: str) -> None:
        super().__init__(f'{resource} "{name}" already exists')


class Conflict(APIError):
    """A write whose resourceVersion precondition no longer holds."""

    reason, code, exit_code = "Conflict", 409, 5


class Invalid(APIError):
    """The object fails validation; `causes` name each field path and what is wrong."""

    reason, code, exit_code = "Invalid", 422, 6

    def __init__(self, what: str, causes: list[FieldError] | FieldError | str) -> None:
        if isinstance(causes, str):
            causes = [FieldError("", causes)]
        elif isinstance(causes, FieldError):
            causes = [causes]
        self.causes = list(causes)
        super().__init__(f"{what} is invalid: " + "; ".join(str(c) for c in self.causes))


class Forbidden(APIError):
    """Refused by admission (a validating hook, Pod Security, a terminating namespace)."""

    reason, code, exit_code = "Forbidden", 403, 7


class Gone(APIError):
    """A watch asked for revisions older than the compacted horizon: re-list."""

    reason, code, exit_code = "Gone", 410, 8


class Timeout(APIError):
    """A wait (delete --wait, watch with a deadline) ran out."""

    reason, code, exit_code = "Timeout", 504, 9


class RequestEntityTooLarge(APIError):
    """A request over 3 MiB, or an object over etcd's 1.5 MiB (kctl.machinery.limits)."""

    reason, code, exit_code = "RequestEntityTooLarge", 413, 6


class TooManyRequests(APIError):
    """A request refused for now, to be retried later: an eviction that would violate a PodDisruptionBudget."""

    reason, code, exit_code = "TooManyRequests", 429, 10
