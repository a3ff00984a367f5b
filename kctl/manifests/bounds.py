"""The safety bounds of reading manifests (size, depth, nodes, aliases) and the errors for passing them.

Readers look them up as `bounds.MAX_...` when they run (so a test may lower one); `too_many_nodes`
and `too_deep` are the ManifestErrors they raise. Used by kctl.manifests.yamlio and the readers
under it, kctl.manifests.sources (input size) and kctl.manifests.writer (depth).
"""

from __future__ import annotations

from kctl.manifests.errors import ManifestError

__all__ = ["MAX_INPUT_BYTES", "MAX_DEPTH", "MAX_NODES", "MAX_ALIASES", "too_many_nodes", "too_deep"]

MAX_INPUT_BYTES = 32 * 1024 * 1024
"""Largest input read, in UTF-8 bytes; checked before parsing (and before reading a file)."""

MAX_DEPTH = 100
"""Deepest nesting: nodes on the longest path from a document's root to a leaf, the leaf
counted (`a: b` is 2 deep, `[[]]` is 2 deep). Reading stops at the first node deeper."""

MAX_NODES = 1_000_000
"""Most nodes (every key, value and item) in one input after alias expansion: a "billion
laughs" YAML bomb is measured on its node graph, never expanded, and refused."""

MAX_ALIASES = 10_000
"""Most alias uses (`*name`) in one input."""


def too_many_nodes(source: str, index: int | None, line: int | None) -> ManifestError:
    """The error for an input with more than MAX_NODES nodes (after alias expansion)."""
    return ManifestError(source, f"more than {MAX_NODES:,} nodes after expanding aliases: "
                                 f"refusing it (a YAML bomb?)", index=index, line=line)


def too_deep(source: str, index: int | None, line: int | None) -> ManifestError:
    """The error for a document nested deeper than MAX_DEPTH."""
    return ManifestError(source, f"nested deeper than {MAX_DEPTH} levels", index=index,
                         line=line)
