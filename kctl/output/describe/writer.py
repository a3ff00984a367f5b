"""The text writer of `kctl describe`: Go's text/tabwriter and kubectl's PrefixWriter over it.

Cells are separated by tabs and aligned exactly as kubectl describe's tabwriter aligns them
(padding 2, the last cell of a line free). Used by every describer in this package and by
`kctl rollout history --revision` (kctl.cli.rollout), which prints a pod template with it.
"""

from __future__ import annotations

__all__ = ["PrefixWriter", "tabwrite"]


def tabwrite(text: str, *, minwidth: int = 0, padding: int = 2) -> str:
    """Align tab-separated cells as Go's text/tabwriter does (column blocks, last cell free)."""
    lines = [line.split("\t") for line in text.split("\n")]
    widths: list[int] = []
    out: list[str] = []

    def write_lines(line0: int, line1: int) -> None:
        for cells in lines[line0:line1]:
            parts = [c.ljust(widths[j]) if j < len(widths) else c for j, c in enumerate(cells[:-1])]
            parts.append(cells[-1])
            out.append("".join(parts))

    def fmt(line0: int, line1: int) -> None:
        column = len(widths)
        this = line0
        while this < line1:
            if column >= len(lines[this]) - 1:
                this += 1
                continue
            write_lines(line0, this)
            line0 = this
            width = minwidth
            while this < line1 and column < len(lines[this]) - 1:
                width = max(width, len(lines[this][column]) + padding)
                this += 1
            widths.append(width)
            fmt(line0, this)
            widths.pop()
            line0 = this
        write_lines(line0, line1)

    fmt(0, len(lines))
    return "\n".join(out)


class PrefixWriter:
    """kubectl's PrefixWriter over a tabwriter: `write(level, text)` indents by two spaces a level."""

    def __init__(self) -> None:
        self._done: list[str] = []
        self._buf: list[str] = []

    def write(self, level: int, text: str) -> None:
        """Add `text` (tab-separated cells, ending lines with `\\n`) indented by `level` steps."""
        self._buf.append("  " * level + text)

    def flush(self) -> None:
        """Align what was written since the last flush as one block (a new table starts after it)."""
        if self._buf:
            self._done.append(tabwrite("".join(self._buf)))
            self._buf = []

    def text(self) -> str:
        """Everything written, aligned."""
        self.flush()
        return "".join(self._done)
