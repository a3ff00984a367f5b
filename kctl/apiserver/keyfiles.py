"""Private key material on disk: a 0700 folder beside the store, an flock per folder.

Used by kctl.apiserver.tokens (the ServiceAccount signing key) and kctl.kubeapi.pki (the
cluster CA, serving and client certificates), which keep their files in `<store>.pki/`
beside the store; each file is written atomically, 0600, by kctl.store.privatefiles.write_private.
Several daemons on one store serialise their checks-and-writes with `locked(folder)`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
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


__all__ = ["LOCK_NAME", "locked", "pki_dir", "private_dir"]
