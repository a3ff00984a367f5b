"""A CustomResourceDefinition's `additionalPrinterColumns`: the table `kubectl get` prints for a custom kind.

`crd_columns` reads a CRD version's columns (Age when it declares none, as the API server
serves); `crd_table` is the table of those columns, whose cells `crd_cell` computes as the
apiextensions table convertor does. Called by the `get` command (for the columns) and by
kctl.output.printers (for the table).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kctl.machinery.errors import ClientSideError
from kctl.machinery.times import parse_time
from kctl.output.cells import age
from kctl.output.tables import Table

__all__ = ["PrinterColumn", "crd_columns", "crd_cell", "crd_table"]


@dataclass(frozen=True)
class PrinterColumn:
    """One of a CRD version's `additionalPrinterColumns`."""

    name: str
    type: str
    json_path: str
    priority: int = 0
    format: str = ""


#: what the API server serves for a CRD version that declares no columns
_DEFAULT_CRD_COLUMNS = (PrinterColumn("Age", "date", ".metadata.creationTimestamp"),)


def crd_columns(crd: dict, version: str) -> tuple[PrinterColumn, ...]:
    """The printer columns of `version` of a CustomResourceDefinition, Age if it declares none."""
    for v in (crd.get("spec") or {}).get("versions") or ():
        if v.get("name") != version:
            continue
        columns = []
        for c in v.get("additionalPrinterColumns") or ():
            if not isinstance(c, dict) or not c.get("name") or not c.get("jsonPath"):
                continue
            priority = c.get("priority") or 0
            columns.append(PrinterColumn(str(c["name"]), str(c.get("type") or "string"), str(c["jsonPath"]),
                                         priority if isinstance(priority, int) else 0, str(c.get("format") or "")))
        return tuple(columns) or _DEFAULT_CRD_COLUMNS
    return _DEFAULT_CRD_COLUMNS


def crd_cell(column: PrinterColumn, obj: dict, now: datetime) -> str:
    """The apiextensions table convertor's cell (cellForJSONValue), as kubectl prints it."""
    from kctl.output.jsonpath import format_value, go_sprint, parse_template

    try:
        values = parse_template("{" + column.json_path + "}").values(obj)
    except ClientSideError:
        return ""
    if not values or values[0] is None:
        return ""
    value = values[0]
    kind = column.type
    if kind == "string":
        return format_value(value)
    if kind == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(int(value))
    if kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return go_sprint(float(value))
    if kind == "boolean" and isinstance(value, bool):
        return "true" if value else "false"
    if kind == "date" and isinstance(value, str):
        return age(value, now) if parse_time(value) is not None else "<invalid>"
    return ""


def crd_table(columns: tuple[PrinterColumn, ...], wide: bool) -> Table:
    """The table of a custom kind: NAME, then its columns (those with a priority only with `-o wide`)."""
    shown = [c for c in columns if wide or not c.priority]

    def row(obj: dict, _wide: bool, now: datetime) -> list[str]:
        return [(obj.get("metadata") or {}).get("name", "")] + [crd_cell(c, obj, now) for c in shown]

    return Table(("NAME",) + tuple(c.name.upper() for c in shown), (), row)
