"""The errors of kctl's Go template engine, worded as Go's text/template words them.

`ParseError` (raised by kctl.output.gotemplate.parser) and `ExecError` (by
kctl.output.gotemplate.execute) are both `TemplateError`s; the CLI prints their message as
kubectl does. `NAME` is the template's name in those messages (kubectl's is "output").
"""

from __future__ import annotations

__all__ = ["NAME", "TemplateError", "ParseError", "ExecError"]

#: the template's name in Go's messages (kubectl names its template "output")
NAME = "output"


class TemplateError(Exception):
    """A template that cannot be parsed or executed; the message is Go's."""


class ParseError(TemplateError):
    """`template: output:LINE: ...` as text/template's parser says it."""


class ExecError(TemplateError):
    """`template: output:LINE:COL: executing "output" at <NODE>: ...`."""
