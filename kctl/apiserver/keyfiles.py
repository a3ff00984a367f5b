"""Private key material on disk: a 0700 folder, 0600 files written atomically, an flock per folder.

Used by kctl.apiserver.tokens (the ServiceAccount signing key) and kctl.kubeapi.pki (the
cluster CA, serving and client certificates), which keep their files in `<store>.pki/`
beside the store. A file is written to a temporary name in the same folder, flushed to disk
and renamed over the old one, so a reader (or a process killed mid-write) never sees half a
key. Several daemons on one store serialise their checks-and-writes with `locked(folder)`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from pathlib import Path
from typing import Iterator

#: the lock file each private folder holds
LOCK_NAME = ".lock"


def pki_dir(store_path: str | os.PathLike) -> Path:
    """The folder of the PKI of the store at store_path: beside it, `<name>.pki`."""
    path = Path(store_path)
    return path.with_name(path.name + ".pki")


def private_dir(folder: Path) -> Path:
    """Make folder (and its parents) if missing, mode 0700 (tightened if looser); folder."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.stat().st_mode & 0o777 != 0o700:
        os.chmod(folder, 0o700)
    return folder


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """An exclusive flock on folder/.lock for the block (other processes' blocks wait)."""
    private_dir(folder)
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_private(path: Path, data: bytes) -> None:
    """Write data to path atomically, mode 0600 (a temporary file renamed over it after fsync)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename is durable once the folder is synced
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


__all__ = ["LOCK_NAME", "locked", "pki_dir", "private_dir", "write_private"]
