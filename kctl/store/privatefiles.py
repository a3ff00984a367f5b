"""Private files written atomically: mode 0600, never seen half-written.

The store's encryption key file (kctl.store.encryption) and the PKI beside the store
(kctl.apiserver.keyfiles, used by kctl.apiserver.tokens and kctl.kubeapi.pki) are written here. A file
goes to a temporary name in the same folder, is flushed to disk, and is then renamed over the
old one (or linked to the name only if none exists), so a reader, or a process killed mid-write,
never sees half a key.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def write_private(path: Path, data: bytes, *, replace: bool = True) -> bool:
    """Write data to path atomically, mode 0600. replace=False never overwrites: False if path exists."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    with contextlib.suppress(OSError):  # the new name is durable once the folder is synced
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return True


__all__ = ["write_private"]
