"""Find and read the manifests that `-f` names: files, directories, `-` (stdin), http(s) URLs.

Called by the CLI commands that take `-f` (apply, create, delete, replace, diff) and by git
sync (kctl.sync.render). Every source is read and every document parsed (by
kctl.manifests.yamlio) before anything is returned, so one bad document anywhere means the
caller writes nothing. Documents that are `List`s (`kind: List`,
`PodList`, ... with `items`) are expanded into their items. Problems raise ManifestError,
whose one-line message names the source and the document: `FILE: document 2 (line 14): ...`
(documents and items are numbered from 1 in messages).
"""

from __future__ import annotations

import os
import stat
import sys
import time
from dataclasses import dataclass
from typing import BinaryIO, TextIO

from kctl.manifests.bounds import MAX_INPUT_BYTES
from kctl.manifests.errors import ManifestError, format_where
from kctl.manifests.yamlio import decode_text, load_documents

__all__ = ["MANIFEST_SUFFIXES", "STDIN", "URL_TIMEOUT", "Document", "ManifestError",
           "read_manifests"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""Files a directory contributes (as kubectl); a file named on its own is read whatever its name."""

STDIN = "<stdin>"
"""The source name of documents read from `-`."""

URL_TIMEOUT = 30.0
"""Seconds a URL may take in all (connecting and reading)."""

_CHUNK = 1 << 16


@dataclass(frozen=True)
class Document:
    """One object to apply: where it came from and the object itself.

    `index` is the 0-based document index in its source, `item` the 0-based index within a
    List document (None otherwise), `line` the 1-based line where the document starts.
    """

    source: str
    index: int
    line: int | None
    obj: dict
    item: int | None = None

    def where(self) -> str:
        """`FILE: document 2 (line 14)`, or `FILE: document 1, item 3` for a List's item."""
        line = self.line if self.item is None else None
        return format_where(self.source, index=self.index, item=self.item, line=line)


def read_manifests(paths: list[str], *, recursive: bool = False,
                   stdin: TextIO | BinaryIO | None = None) -> list[Document]:
    """Every object in the named files, directories, `-` (stdin) and http(s) URLs, in order.

    A directory gives its *.yaml, *.yml and *.json files in sorted order, and its
    subdirectories' too when `recursive`. Raises ManifestError for a missing or unreadable
    source, a directory with no manifests, and any document that is not valid YAML/JSON or
    not a mapping; in that case nothing is returned.
    """
    documents: list[Document] = []
    stdin_read = False
    for path in paths:
        if path == "-":
            if stdin_read:
                raise ManifestError(STDIN, "standard input can be read only once")
            stdin_read = True
            sources = [(STDIN, _read_stream(stdin if stdin is not None else sys.stdin, STDIN))]
        elif path.startswith(("http://", "https://")):
            sources = [(path, _read_url(path))]
        else:
            sources = [(name, _read_file(name)) for name in _files(path, recursive=recursive)]
        for source, text in sources:
            documents.extend(_objects(source, text))
    return documents


def _objects(source: str, text: str) -> list[Document]:
    """The documents of one source, List documents expanded; each must be a mapping."""
    documents = []
    for index, line, obj in load_documents(text, source=source):
        if not isinstance(obj, dict):
            raise ManifestError(source, f"expected a mapping (an object with apiVersion and "
                                        f"kind), got {_describe(obj)}", index=index, line=line)
        kind = obj.get("kind")
        items = obj.get("items")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
            for number, item in enumerate(items):
                if not isinstance(item, dict):
                    raise ManifestError(source, f"expected a mapping (an object with apiVersion "
                                                f"and kind), got {_describe(item)}",
                                        index=index, item=number)
                documents.append(Document(source, index, line, item, item=number))
        else:
            documents.append(Document(source, index, line, obj))
    return documents


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _os_error(path: str, error: OSError) -> ManifestError:
    if isinstance(error, FileNotFoundError):
        return ManifestError(path, "no such file or directory")
    if isinstance(error, PermissionError):
        return ManifestError(path, "permission denied")
    return ManifestError(path, (error.strerror or str(error)).lower())


def _files(path: str, *, recursive: bool) -> list[str]:
    """[path] for a file; a directory's manifest files in sorted (walk) order."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise _os_error(path, error) from None
    if not stat.S_ISDIR(mode):
        return [path]
    found: list[str] = []
    stack = [_entries(path)]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                if recursive:
                    stack.append(_entries(entry.path))
            elif entry.name.endswith(MANIFEST_SUFFIXES) and entry.is_file():
                found.append(entry.path)
        except OSError as error:
            raise _os_error(entry.path, error) from None
    if not found:
        raise ManifestError(path, "no manifests found (" + ", ".join(MANIFEST_SUFFIXES) + ")")
    return found


def _entries(directory: str):
    """A directory's entries sorted by name."""
    try:
        with os.scandir(directory) as scan:
            return iter(sorted(scan, key=lambda entry: entry.name))
    except OSError as error:
        raise _os_error(directory, error) from None


def _too_large(source: str) -> ManifestError:
    return ManifestError(source, f"larger than {MAX_INPUT_BYTES >> 20} MiB: refusing it")


def _read_file(path: str) -> str:
    """A file's text; its size is checked before it is read."""
    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size > MAX_INPUT_BYTES:
                raise _too_large(path)
            data = file.read(MAX_INPUT_BYTES + 1)  # special files report no size
    except OSError as error:
        raise _os_error(path, error) from None
    if len(data) > MAX_INPUT_BYTES:
        raise _too_large(path)
    return decode_text(data, source=path)


def _read_stream(stream: TextIO | BinaryIO, source: str) -> str:
    """All of a stream (its binary buffer when it has one), at most MAX_INPUT_BYTES."""
    stream = getattr(stream, "buffer", stream)
    chunks: list = []
    size = 0
    try:
        while size <= MAX_INPUT_BYTES:  # (a raw stream may return less than asked)
            chunk = stream.read(MAX_INPUT_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = "".join(chunks) if chunks and isinstance(chunks[0], str) else b"".join(chunks)
    except UnicodeDecodeError as error:
        raise ManifestError(source, f"not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise ManifestError(source, (error.strerror or str(error)).lower()) from None
    if isinstance(data, str):
        if len(data) > MAX_INPUT_BYTES:
            raise _too_large(source)
        return data
    if len(data) > MAX_INPUT_BYTES:
        raise _too_large(source)
    return decode_text(data, source=source)


def _read_url(url: str) -> str:
    """A URL's body: URL_TIMEOUT seconds in all, at most MAX_INPUT_BYTES."""
    import http.client
    import urllib.error
    import urllib.request

    from kctl import __version__

    deadline = time.monotonic() + URL_TIMEOUT
    request = urllib.request.Request(url, headers={
        "User-Agent": f"kctl/{__version__}",
        "Accept": "application/yaml, application/json;q=0.9, text/plain;q=0.8, */*;q=0.1"})
    try:
        with urllib.request.urlopen(request, timeout=URL_TIMEOUT) as response:
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > MAX_INPUT_BYTES:
                raise _too_large(url)
            chunks: list[bytes] = []
            size = 0
            while True:
                chunk = response.read(_CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_INPUT_BYTES:
                    raise _too_large(url)
                if time.monotonic() > deadline:
                    raise ManifestError(url, f"timed out after {URL_TIMEOUT:g} s")
                chunks.append(chunk)
    except urllib.error.HTTPError as error:
        raise ManifestError(url, f"HTTP {error.code} {error.reason}") from None
    except urllib.error.URLError as error:
        reason = error.reason
        text = reason.strerror if isinstance(reason, OSError) and reason.strerror else reason
        raise ManifestError(url, f"cannot fetch: {text}") from None
    except TimeoutError:
        raise ManifestError(url, f"timed out after {URL_TIMEOUT:g} s") from None
    except (OSError, http.client.HTTPException, ValueError) as error:
        raise ManifestError(url, f"cannot fetch: {error}") from None
    return decode_text(b"".join(chunks), source=url)
