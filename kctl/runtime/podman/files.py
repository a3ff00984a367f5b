"""Files put into a container: a tar archive of relative paths, never escaping its folder.

Used by the runtime's `write_files` (kctl.runtime.podman.containers): Podman's archive
endpoint unpacks the archive under a folder of the container.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
import time


def safe_join(base: str, relative: str) -> str:
    """base/relative, refusing a relative path that is absolute or climbs out of base."""
    if posixpath.isabs(relative) or ".." in relative.split("/"):
        raise ValueError(f"{relative!r} is not a relative path inside the folder")
    return posixpath.normpath(posixpath.join(base, relative))


def files_tar(files: dict[str, tuple[bytes, int]], *, mtime: float | None = None) -> bytes:
    """A tar archive of relative path -> (content, mode), with every parent folder (0755)."""
    stamp = time.time() if mtime is None else mtime
    buffer = io.BytesIO()
    added: set[str] = set()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path, (content, mode) in sorted(files.items()):
            name = safe_join("/", path).lstrip("/")
            if not name:
                raise ValueError(f"file name {path!r} is empty")
            for folder in _parents(name):
                if folder not in added:
                    archive.addfile(_tar_member(folder, tarfile.DIRTYPE, 0o755, 0, stamp))
                    added.add(folder)
            member = _tar_member(name, tarfile.REGTYPE, mode, len(content), stamp)
            archive.addfile(member, io.BytesIO(content))
    return buffer.getvalue()


def _parents(name: str) -> list[str]:
    parts = name.split("/")[:-1]
    return ["/".join(parts[: index + 1]) for index in range(len(parts))]


def _tar_member(name: str, kind: bytes, mode: int, size: int, mtime: float) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type = kind
    member.mode = mode & 0o7777
    member.size = size
    member.mtime = int(mtime)
    member.uid = member.gid = 0
    return member


__all__ = ["files_tar", "safe_join"]
