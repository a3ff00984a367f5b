"""kubectl's `-o` flag: which output format, with its template or custom columns, checked before any output.

`parse_output` turns `-o wide|yaml|json|name|jsonpath=...|go-template=...|custom-columns=...`
(and the `-file=PATH` forms) into an `OutputFormat`, with kubectl's error wording for a bad
one; `relaxed_jsonpath` is kubectl's RelaxedJSONPathExpression (custom columns, --sort-by,
`wait --for=jsonpath`). Called by the CLI (`get`, `sync`, `wait`) before it prints with
kctl.output.printers. The template engines load only when a template format is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

from kctl.machinery.errors import ClientSideError

__all__ = ["OutputFormat", "parse_output", "relaxed_jsonpath"]

_FORMATS = ("custom-columns", "custom-columns-file", "go-template", "go-template-file", "json", "jsonpath",
            "jsonpath-file", "name", "template", "templatefile", "wide", "yaml")


@dataclass(frozen=True)
class OutputFormat:
    """A parsed `-o` value.

    `kind` is one of table, wide, yaml, json, name, jsonpath, custom-columns, go-template;
    `template` is the jsonpath or Go template; `columns` the custom columns as (header, template).
    """

    kind: str = "table"
    template: str = ""
    columns: tuple[tuple[str, str], ...] = ()

    @property
    def is_table(self) -> bool:
        """kubectl's human-readable printers (the ones that say "No resources found")."""
        return self.kind in ("table", "wide")


def parse_output(spec: str | None) -> OutputFormat:
    """kubectl's `-o` value -> OutputFormat; ClientSideError with kubectl's wording if unknown."""
    if spec is not None and spec.startswith("="):  # `-o=json`: click leaves the "="
        spec = spec[1:]
    if spec is None or spec == "":
        return OutputFormat("table")
    if spec in ("wide", "yaml", "json", "name"):
        return OutputFormat(spec)
    kind, sep, arg = spec.partition("=")
    if kind in ("jsonpath-file", "go-template-file", "templatefile", "custom-columns-file"):
        if not arg:
            raise ClientSideError("template format specified but no template given")
        arg = _read_template_file(arg)
        kind = {"jsonpath-file": "jsonpath", "custom-columns-file": "custom-columns-file"}.get(kind, "go-template")
    if kind == "jsonpath":
        if not arg:
            raise ClientSideError("template format specified but no template given")
        from kctl.output.jsonpath import parse_template
        parse_template(arg)
        return OutputFormat("jsonpath", template=arg)
    if kind in ("go-template", "template"):
        if not arg:
            raise ClientSideError("template format specified but no template given")
        from kctl.output import gotemplate
        try:
            gotemplate.parse(arg)
        except gotemplate.TemplateError as exc:
            raise ClientSideError(f"error parsing template {arg}, {exc}") from None
        return OutputFormat("go-template", template=arg)
    if kind == "custom-columns-file":
        return OutputFormat("custom-columns", columns=_custom_columns_file(arg))
    if kind == "custom-columns":
        if not arg:
            raise ClientSideError("custom-columns format specified but no custom columns given")
        return OutputFormat("custom-columns", columns=_parse_custom_columns(arg))
    raise ClientSideError(f'unable to match a printer suitable for the output format "{spec}", '
                     f'allowed formats are: {",".join(_FORMATS)}')


def _read_template_file(path: str) -> str:
    """The text of a `-o ...-file=PATH` template; one clear error line if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ClientSideError(f"error reading template {path}: {reason}") from None


def _custom_columns_file(text: str) -> tuple[tuple[str, str], ...]:
    """kubectl's custom-columns-file: a line of headers, then a line of JSONPath expressions."""
    from kctl.output.jsonpath import parse_template

    lines = [line.split() for line in text.splitlines() if line.strip()]
    if len(lines) != 2 or len(lines[0]) != len(lines[1]):
        raise ClientSideError("custom-columns-file must hold two lines: the headers and as many expressions")
    columns = []
    for header, expr in zip(lines[0], lines[1]):
        template = relaxed_jsonpath(expr)
        parse_template(template)
        columns.append((header, template))
    return tuple(columns)


def _parse_custom_columns(spec: str) -> tuple[tuple[str, str], ...]:
    """kubectl's `-o custom-columns=HEADER:EXPR,...` -> (header, JSONPath template) pairs."""
    from kctl.output.jsonpath import parse_template

    columns = []
    for part in spec.split(","):
        header, sep, expr = part.partition(":")
        if not sep:
            raise ClientSideError(f"unexpected custom-columns spec: {part}, "
                             "expected <header>:<json-path-expr>")
        template = relaxed_jsonpath(expr)
        parse_template(template)
        columns.append((header, template))
    return tuple(columns)


def relaxed_jsonpath(expr: str) -> str:
    """kubectl's RelaxedJSONPathExpression: `a.b`, `.a.b`, `{a.b}`, `{.a.b}` -> `{.a.b}`."""
    if not expr:
        return expr
    inner = expr[1:-1] if expr.startswith("{") and expr.endswith("}") else expr
    if not inner.lstrip(".") or "{" in inner or "}" in inner:
        raise ClientSideError("unexpected path string, expected a 'name1.name2' or '.name1.name2' "
                         "or '{name1.name2}' or '{.name1.name2}'")
    return "{." + (inner[1:] if inner.startswith(".") else inner) + "}"
