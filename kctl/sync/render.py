"""Render a checkout into the objects it declares, each with the file and line it came from.

Called by the git-source reconciler and `kctl sync` on a kctl.sync.fetch Checkout. Under
`root/path`: a folder holding a kustomization file is built by kctl.sync.kustomize;
otherwise its *.yaml, *.yml and *.json files are read, recursively, in sorted order
(dot-files and dot-folders skipped), and a subfolder holding a kustomization file is
built as one kustomization instead of being read file by file.

Files are parsed by the same code as `kctl apply -f` (kctl.manifests.sources, kctl.manifests.yamlio):
multi-document YAML, empty documents skipped, `List` documents expanded into their items.
Every document must be an object with apiVersion, kind and metadata.name; anything else,
a parse error, two documents declaring the same object, or a path leading out of the
checkout (`..`, a symbolic link) is a RenderError naming the file and line. Nothing is
admitted or validated against schemas here: the API does that when the objects are applied.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KUSTOMIZATION_FILES", "RenderError", "Rendered", "render"]

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
"""The names kustomize looks for in a folder, in its order."""


class RenderError(Exception):
    """A checkout that does not render: `str()` is `FILE:LINE: message` (or `FILE: message`).

    `file` is relative to the checkout root; `line` is 1-based or None.
    """

    def __init__(self, file: str, line: int | None, message: str) -> None:
        self.file, self.line, self.message = file, line, message
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}" if self.line else f"{self.file}: {self.message}"

    def __reduce__(self) -> tuple:
        return (RenderError, (self.file, self.line, self.message))


@dataclass
class Rendered:
    """One object to apply, and where it is declared (file relative to the checkout root)."""

    obj: dict
    file: str
    line: int

    def where(self) -> str:
        """`FILE:LINE`, the prefix of any error about this object."""
        return f"{self.file}:{self.line}"


def render(root: Path, path: str = ".") -> list[Rendered]:
    """Every object under `root/path` (a folder or one file), in file order."""
    root = Path(root).resolve()
    target = inside(root, root, path, shown=path)
    if not target.exists():
        raise RenderError(path, None, "no such file or directory")
    if target.is_dir():
        if kustomization_file(target, root) is not None:
            from kctl.sync.kustomize import build

            items = build(target, root)
        else:
            items = _walk(root, target, set())
    else:
        items = read_objects(root, target)
    check_duplicates(items)
    return items


# -- shared with kctl.sync.kustomize ----------------------------------------------------------

def relative(root: Path, path: Path) -> str:
    """`path` as shown in messages: relative to the checkout root, with forward slashes."""
    try:
        return Path(os.path.normpath(path)).relative_to(root).as_posix() or "."
    except ValueError:
        return str(path)


def inside(root: Path, base: Path, name: str, *, shown: str, within: Path | None = None) -> Path:
    """`base/name` resolved (symbolic links followed); RenderError if it leaves `within`
    (the checkout root by default)."""
    limit = within or root
    path = (base / name).resolve()
    if path != limit and limit not in path.parents:
        where = "the checkout" if limit == root else f"{relative(root, limit)}/ (kustomize's load restriction)"
        raise RenderError(shown, None, f"{name!r} leads outside {where}")
    return path


def kustomization_file(directory: Path, root: Path) -> Path | None:
    """The kustomization file of a folder, None if it has none; RenderError if it has two."""
    found = [directory / name for name in KUSTOMIZATION_FILES if (directory / name).is_file()]
    if len(found) > 1:
        raise RenderError(relative(root, directory), None,
                          "found more than one kustomization file: " + ", ".join(p.name for p in found))
    return found[0] if found else None


def read_documents(root: Path, path: Path) -> list[tuple[int, dict, int | None]]:
    """A file's documents (Lists expanded): (line, object, item index or None) each.

    Every document must be a mapping; parse errors become RenderError with file and line.
    """
    from kctl.manifests.sources import read_manifests
    from kctl.manifests.errors import ManifestError

    shown = relative(root, path)
    try:
        documents = read_manifests([str(path)])
    except ManifestError as error:
        message = error.message
        if error.line is None and error.index is not None:
            message = f"document {error.index + 1}" + (
                f", item {error.item + 1}" if error.item is not None else "") + f": {message}"
        raise RenderError(shown, error.line, message) from None
    return [(doc.line or 1, doc.obj, doc.item) for doc in documents]


def read_objects(root: Path, path: Path) -> list[Rendered]:
    """A file's objects; RenderError for a document that is not a Kubernetes object."""
    shown = relative(root, path)
    items = []
    for line, obj, item in read_documents(root, path):
        problem = object_problem(obj)
        if problem:
            raise RenderError(shown, line, (f"item {item + 1}: " if item is not None else "") + problem)
        items.append(Rendered(obj, shown, line))
    return items


def object_problem(obj: dict) -> str | None:
    """What keeps `obj` from being an object kctl can apply, or None."""
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            return f"not a Kubernetes object: {key} is missing"
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return "not a Kubernetes object: metadata is missing"
    if not isinstance(metadata.get("name"), str) or not metadata["name"]:
        return "metadata.name is missing"
    if "namespace" in metadata and not isinstance(metadata["namespace"], str):
        return "metadata.namespace must be a string"
    return None


def object_id(obj: dict) -> tuple[str, str, str, str]:
    """(group, kind, namespace, name): what makes two declarations the same object."""
    group = obj["apiVersion"].rpartition("/")[0] if "/" in obj["apiVersion"] else ""
    metadata = obj["metadata"]
    return group, obj["kind"], metadata.get("namespace") or "", metadata["name"]


def describe(obj: dict) -> str:
    """`Kind namespace/name` (or `Kind name`) for messages."""
    _, kind, namespace, name = object_id(obj)
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def check_duplicates(items: list[Rendered]) -> None:
    """RenderError for the second declaration of one object."""
    seen: dict[tuple[str, str, str, str], Rendered] = {}
    for item in items:
        key = object_id(item.obj)
        first = seen.setdefault(key, item)
        if first is not item:
            raise RenderError(item.file, item.line,
                              f"{describe(item.obj)} is also declared at {first.where()}")


# -- plain folders ----------------------------------------------------------------------------

def _walk(root: Path, directory: Path, seen: set[Path]) -> list[Rendered]:
    """A folder's manifests, depth first in name order; kustomizations built whole."""
    from kctl.manifests.sources import MANIFEST_SUFFIXES

    seen.add(directory.resolve())
    items: list[Rendered] = []
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError as error:
        raise RenderError(relative(root, directory), None, (error.strerror or str(error)).lower()) from None
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        shown = relative(root, path)
        if entry.is_dir():
            real = inside(root, directory, entry.name, shown=shown)
            if real in seen:
                continue  # a link back up the tree
            if kustomization_file(path, root) is not None:
                from kctl.sync.kustomize import build

                items.extend(build(real, root))
            else:
                items.extend(_walk(root, path, seen))
        elif entry.name.endswith(MANIFEST_SUFFIXES):
            if entry.is_symlink():
                inside(root, directory, entry.name, shown=shown)
            if entry.is_file():
                items.extend(read_objects(root, path))
    return items
