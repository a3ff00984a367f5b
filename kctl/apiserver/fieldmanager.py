"""Field managers: who owns which fields of an object (metadata.managedFields) and server-side apply.

The HTTPS API (kctl.kubeapi) names the manager of each write with `managing(name)` around the
API call (the `fieldManager` query parameter, else the client's user agent as Kubernetes derives it);
the API server records, on every write, the fields each manager set.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_manager: contextvars.ContextVar[str | None] = contextvars.ContextVar("kctl_field_manager", default=None)


@contextlib.contextmanager
def managing(name: str | None) -> Iterator[None]:
    """Writes made inside this block are by field manager `name` (None: the default manager)."""
    token = _manager.set(name)
    try:
        yield
    finally:
        _manager.reset(token)


def current_manager() -> str | None:
    """The field manager of a `managing` block around this call, or None."""
    return _manager.get()
