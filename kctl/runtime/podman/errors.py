"""Podman's errors as kctl's: every podman-py, requests or socket error becomes one line.

Each Podman call of the runtime (kctl.runtime.podman.*) runs inside `calling(what)`, which
turns what podman-py, requests or the OS raised into RuntimeError_, ImageNotFound or
NotFoundInRuntime (kctl.runtime.interface) with a one-line message naming the call.
"""

from __future__ import annotations

import contextlib
import subprocess
from typing import Iterator

import requests
from podman import errors as podman_errors

from kctl.runtime.interface import ImageNotFound, NotFoundInRuntime, RuntimeError_


def one_line(text: str) -> str:
    """Several lines of an error as one ("a; b")."""
    return "; ".join(part.strip() for part in str(text).strip().splitlines() if part.strip())


def _explain(error: BaseException) -> str:
    if isinstance(error, podman_errors.APIError) and isinstance(error.__cause__, OSError):
        return f"cannot reach the Podman service: {_innermost(error.__cause__)}"
    if isinstance(error, podman_errors.APIError):
        return one_line(error.explanation or str(error))
    return one_line(str(error) or type(error).__name__)


def _innermost(error: BaseException) -> str:
    """The deepest message of an exception wrapped in others' args (requests, urllib3)."""
    for argument in error.args:
        if isinstance(argument, BaseException):
            return _innermost(argument)
    return one_line(str(error.args[-1] if error.args else error) or type(error).__name__)


def _is_image_missing(message: str) -> bool:
    lowered = message.lower()
    return "image not known" in lowered or "no such image" in lowered


def _is_object_missing(message: str) -> bool:
    lowered = message.lower()
    return any(f"no such {kind}" in lowered for kind in ("container", "pod", "volume", "exec session"))


@contextlib.contextmanager
def calling(what: str) -> Iterator[None]:
    """Turn any podman-py / requests / OS error raised inside into one of ours."""
    try:
        yield
    except RuntimeError_:
        raise
    except podman_errors.APIError as error:
        message = _explain(error)
        if _is_image_missing(message) or isinstance(error, podman_errors.ImageNotFound):
            raise ImageNotFound(f"{what}: {message}") from error
        if error.status_code == 404 or _is_object_missing(message):
            raise NotFoundInRuntime(f"{what}: {message}") from error
        raise RuntimeError_(f"{what}: {message}") from error
    except (podman_errors.PodmanError, requests.RequestException, OSError,
            subprocess.SubprocessError, ValueError, TypeError, KeyError) as error:
        raise RuntimeError_(f"{what}: {_explain(error)}") from error


__all__ = ["calling", "one_line"]
