"""ManifestError: a manifest that cannot be read, in one line that says where (file, document, item, line)
and what is wrong; `format_where` writes the "where" part.

Raised by every reader of kctl.manifests (yamlio, sources and the readers under them) and by
their callers (`kctl apply -f`, git sync, `kctl edit`); the CLI prints it as `error: ...` and
exits non-zero.
"""

from __future__ import annotations

__all__ = ["ManifestError", "format_where"]


def format_where(source: str, *, index: int | None = None, item: int | None = None,
                 line: int | None = None) -> str:
    """`FILE`, `FILE: document 2 (line 14)`, `FILE: document 1, item 3`, `FILE: line 5`.

    `index` and `item` are 0-based and shown 1-based; `line` is 1-based.
    """
    where = source
    if index is not None:
        where += f": document {index + 1}"
        if item is not None:
            where += f", item {item + 1}"
        if line is not None:
            where += f" (line {line})"
    elif line is not None:
        where += f": line {line}"
    return where


class ManifestError(Exception):
    """A manifest that cannot be read or parsed.

    `source` is the file name, URL or `<stdin>`; `index` the 0-based document index (None when
    the whole input is at fault); `item` the 0-based item of a List document; `line` 1-based;
    `message` says what is wrong in one line. `str()` gives one line for the CLI to print:
    `FILE: document 2 (line 14): mapping values are not allowed here`.
    """

    exit_code = 1

    def __init__(self, source: str, message: str, *, index: int | None = None,
                 line: int | None = None, item: int | None = None) -> None:
        self.source = source
        self.message = message
        self.index = index
        self.line = line
        self.item = item
        super().__init__(str(self))

    def __str__(self) -> str:
        where = format_where(self.source, index=self.index, item=self.item, line=self.line)
        return f"{where}: {self.message}"

    def __reduce__(self) -> tuple:
        return (_restore_error, (self.source, self.message, self.index, self.line, self.item))


def _restore_error(source: str, message: str, index: int | None, line: int | None,
                   item: int | None) -> ManifestError:
    return ManifestError(source, message, index=index, line=line, item=item)
