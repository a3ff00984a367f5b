"""YAML's character classes: the characters a YAML stream may hold, its special line breaks and its flow
indicators, with `LazyPattern` for the Unicode classes that are slow to compile.

Used by kctl.manifests.yamlio (refusing control characters, choosing the reader), the fast reader
(keys with flow indicators) and kctl.manifests.writer (what must be quoted or escaped).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["LazyPattern", "ASCII_CONTROL", "NON_PRINTABLE", "SPECIAL_BREAKS", "FLOW_INDICATOR"]


class LazyPattern:
    """A regex compiled on first use: these Unicode classes take milliseconds to compile,
    and most commands (`kctl get`, `kctl apply` of plain text) never need them."""

    __slots__ = ("_source", "_compiled")

    def __init__(self, source: str) -> None:
        self._source = source
        self._compiled: re.Pattern[str] | None = None

    def _pattern(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source)
        return self._compiled

    def search(self, text: str) -> re.Match[str] | None:
        return self._pattern().search(text)

    def sub(self, replacement: Any, text: str) -> str:
        return self._pattern().sub(replacement, text)


ASCII_CONTROL = re.compile("[^\t\n\r\x20-\x7e]")  # NON_PRINTABLE for ASCII text, quick to compile
NON_PRINTABLE = LazyPattern("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
SPECIAL_BREAKS = ("\r", "\x85", "\u2028", "\u2029", "\ufeff")
JSON_SPACE = re.compile(r"[ \t\r\n]*")
#: a flow indicator: a key holding one is not read by the fast reader, and is quoted by the writer
FLOW_INDICATOR = re.compile(r"[,\[\]{}]")
