"""The parse tree of a Go template: text, actions, pipelines, commands and their operands, branches.

Built by kctl.output.gotemplate.parser and walked by kctl.output.gotemplate.execute. Every node
keeps its offset in the source (`pos`) for Go's `LINE:COL` in error messages, and prints as the
source it came from (Go's `<.a.b>` in "executing ... at <NODE>").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Node", "Text", "Field", "Literal", "Ident", "Command", "Pipeline", "Action", "Branch", "Loop"]


@dataclass
class Node:
    """Any node: `pos` is its offset in the template source."""

    pos: int


@dataclass
class Text(Node):
    """Text outside actions, printed as is."""

    text: str


@dataclass
class Field(Node):
    """`.a.b` (names empty: `.`); on a variable: `$x.a`; on a parenthesised pipeline: `(p).a`."""

    names: tuple[str, ...]
    var: str | None = None
    base: Any = None

    def __str__(self) -> str:
        tail = "".join("." + n for n in self.names)
        if self.base is not None:
            return f"({self.base}){tail}"
        if self.var is not None:
            return self.var + tail
        return tail or "."


@dataclass
class Literal(Node):
    """A constant: string, raw string, character, number, true/false or nil (`source` as written)."""

    value: Any
    source: str

    def __str__(self) -> str:
        return self.source


@dataclass
class Ident(Node):
    """A function name (`len`, `printf`, ...)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass
class Command(Node):
    """One command of a pipeline: a function with its arguments, or a single operand."""

    args: list

    def __str__(self) -> str:
        return " ".join(f"({a})" if isinstance(a, Pipeline) else str(a) for a in self.args)


@dataclass
class Pipeline(Node):
    """Commands joined by `|`, with the variables it declares (`$x :=`) or assigns (`$x =`)."""

    decl: list[str] = field(default_factory=list)
    assign: bool = False
    cmds: list[Command] = field(default_factory=list)

    def __str__(self) -> str:
        text = " | ".join(str(c) for c in self.cmds)
        if self.decl:
            text = ", ".join(self.decl) + (" = " if self.assign else " := ") + text
        return text


@dataclass
class Action(Node):
    """`{{pipeline}}`: its value is printed unless it declares a variable."""

    pipe: Pipeline


@dataclass
class Branch(Node):
    """`if`, `range` or `with`: `body` when the pipeline is true (non-empty), else `other` (`{{else}}`)."""

    kind: str  # if | range | with
    pipe: Pipeline
    body: list
    other: list | None


@dataclass
class Loop(Node):
    """`{{break}}` or `{{continue}}` inside a range."""

    kind: str  # break | continue
