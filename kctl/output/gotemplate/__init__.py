"""Go's text/template, the subset `kubectl -o go-template=` users write, over decoded JSON.

Parsing (`parse`) covers text and `{{actions}}` with `{{-`/`-}}` trim markers and
`{{/* comments */}}`; fields `.a.b`, `$var.a`, `$`, `(pipeline).a`; literals (strings,
raw strings, numbers, true/false/nil); pipelines with `|`; `$x := ...` / `$x = ...`;
`if`/`else if`/`else`/`end`, `range` (with `$i, $e :=`, `else`, `break`, `continue`),
`with`/`else`. Functions: Go's `and or not len index print printf println eq ne lt le
gt ge`, and kubectl's `base64decode` and `exists`. Values follow kubectl's unstructured
objects: JSON integers are int64, other numbers float64, objects `map[string]interface {}`
(printed `map[k:v]`, ranged in key order), a missing key prints `<no value>`.

Errors carry Go's wording (`template: output:1: unclosed action`, `template:
output:1:2: executing "output" at <.x>: ...`) so the CLI can print them as kubectl does.
Modules: `parser` (lexer and parser) builds the tree of `nodes`, `execute` runs it, `funcs` is the
function library, `values` Go's value model and fmt, `errors` the error types. This module holds
the package's entry point, `parse`. Called by kctl.output.formats (checking `-o go-template=`) and
kctl.output.printers; imported only when a go-template output is asked for.
"""

from __future__ import annotations

from kctl.output.gotemplate.errors import NAME, ExecError, ParseError, TemplateError
from kctl.output.gotemplate.execute import GoTemplate
from kctl.output.gotemplate.parser import Parser

__all__ = ["TemplateError", "ParseError", "ExecError", "GoTemplate", "parse"]


def parse(source: str) -> GoTemplate:
    """Parse a Go template; ParseError with Go's message if it is not one."""
    try:
        return GoTemplate(source, Parser(source).parse())
    except RecursionError:
        raise ParseError(f"template: {NAME}: nesting too deep") from None
