"""Admission warnings of the request being served, sent back as Kubernetes' `Warning: 299 - "..."` headers.

kctl's API reports an admission warning through its `warn` callback. kctl.kubeapi.app opens a
`collecting()` block around each request (a context variable, so the worker threads that make the
request's API calls see it: ServerContext.run copies the context); `route(api)`, called once by
whoever starts the server (kctl.daemon.server, the test fixtures), makes the API's callback put a
warning raised inside such a block into it, and pass any other to the callback it had.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator

_sink: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("kctl_kubeapi_warnings", default=None)


@contextlib.contextmanager
def collecting() -> Iterator[list[str]]:
    """Warnings raised inside this block (in this context or a copy of it) are appended to the list yielded."""
    found: list[str] = []
    token = _sink.set(found)
    try:
        yield found
    finally:
        _sink.reset(token)


def add(message: str) -> bool:
    """Put a warning in the current request's list; False when no request is being served here."""
    sink = _sink.get()
    if sink is None:
        return False
    if message not in sink:
        sink.append(message)
    return True


def route(api: Any) -> None:
    """Make `api.warn` (an APIServer's or RemoteAPIServer's callback) feed the request being served first."""
    previous: Callable[[str], None] | None = getattr(api, "warn", None)
    if previous is None or getattr(previous, "_routes_kubeapi", False):
        return

    def warn(message: str) -> None:
        if not add(message):
            previous(message)

    warn._routes_kubeapi = True  # type: ignore[attr-defined]
    api.warn = warn


def header_value(message: str) -> str:
    """One Warning header's value: `299 - "text"` (quotes and backslashes escaped, one printable line)."""
    text = "".join(c if c.isprintable() else " " for c in message)[:1024]
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


__all__ = ["add", "collecting", "header_value", "route"]
