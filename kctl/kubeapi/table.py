"""meta.k8s.io/v1 Table responses: the columns `kubectl get` prints, computed by the server as kube-apiserver does.

kctl.kubeapi.resources (get, list) and kctl.kubeapi.watch (one row per event) call `to_table` when
the Accept header asks for `as=Table;v=v1;g=meta.k8s.io`. The columns and cells are kctl's own
printers' (kctl.output.tables: a kind's headers, `-o wide`'s extra headers as priority-1 columns,
its row function; a custom kind's `additionalPrinterColumns` through kctl.output.crdcolumns), so
kubectl prints through the HTTPS API what `kctl get` prints for the same store. Each row carries
the object as `includeObject` asks: None, Metadata (a PartialObjectMetadata, the default) or the
whole Object. A custom kind's columns come from its CRD: pass `columns` (`printer_columns(api, rt)`
gives them), else they are looked up in the catalog kctl.kubeapi.discovery.catalog has cached for the kind.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable

from kctl.machinery.resources import ResourceType

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.output.crdcolumns import PrinterColumn

__all__ = ["column_name", "printer_columns", "to_table"]

INCLUDE_VALUES = ("None", "Metadata", "Object")
_NAME_DESCRIPTION = ("Name must be unique within a namespace. Is required when creating resources, although some "
                     "resources may allow a client to request the generation of an appropriate name automatically. "
                     "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
                     "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/"
                     "names#names")
_AGE_DESCRIPTION = ("CreationTimestamp is a timestamp representing the server time when this object was created. "
                    "It is not guaranteed to be set in happens-before order across separate operations. Clients "
                    "may not set this value. It is represented in RFC3339 form and is in UTC.")
#: Kubernetes' spelling of headers that title case gets wrong (kubectl upper-cases them all again)
_NAMES = {"UP-TO-DATE": "Up-to-date", "PORT(S)": "Port(s)", "CLUSTER-IP": "Cluster-IP", "EXTERNAL-IP": "External-IP",
          "INTERNAL-IP": "Internal-IP", "OS-IMAGE": "OS-Image", "IP": "IP", "CIDRS": "CIDRs",
          "PARENTREF": "ParentRef", "ADDRESSTYPE": "AddressType", "POD-SELECTOR": "Pod-Selector"}


def column_name(header: str) -> str:
    """A Table column's name from kctl's header: `READY` -> `Ready`, `NOMINATED NODE` -> `Nominated Node`."""
    return _NAMES.get(header) or header.title()


def _definition(header: str, *, priority: int) -> dict:
    name = column_name(header)
    definition = {"name": name, "type": "string", "format": "", "description": "", "priority": priority}
    if header == "NAME":
        definition.update(format="name", description=_NAME_DESCRIPTION)
    elif header in ("AGE", "CREATED AT"):
        definition["description"] = _AGE_DESCRIPTION
    return definition


def _row_object(obj: dict, include_object: str) -> dict | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}


def printer_columns(api: API, rt: ResourceType) -> tuple[PrinterColumn, ...] | None:
    """A custom kind's printer columns from its CRD (None for a built-in kind); blocking, cached per catalog."""
    if not rt.is_custom:
        return None
    from kctl.kubeapi.discovery.catalog import catalog_of

    return _columns_in(catalog_of(api).find(rt.group, rt.version, rt.kind), rt)


def _columns_in(served: object, rt: ResourceType) -> tuple[PrinterColumn, ...]:
    from kctl.output.crdcolumns import crd_columns

    crd = getattr(served, "crd", None)
    return crd_columns(crd or {}, rt.version)


def _cached_columns(rt: ResourceType) -> tuple[PrinterColumn, ...]:
    from kctl.kubeapi.discovery.catalog import cached_resource

    return _columns_in(cached_resource(rt), rt)


#: a layout's cells of one object at a time
Cells = Callable[[dict, datetime], list]


def _builtin_layout(rt: ResourceType) -> tuple[list[dict], Cells]:
    """(column definitions, cells function) of a built-in kind, from kctl.output.tables."""
    from kctl.output.tables import GENERIC, TABLES

    table = TABLES.get(rt.group_kind, GENERIC)
    if table.wide_replaces:
        definitions = [_definition(h, priority=0 if h in table.headers else 1) for h in table.wide_headers]
    else:
        definitions = ([_definition(h, priority=0) for h in table.headers]
                       + [_definition(h, priority=1) for h in table.wide_headers])

    def cells(obj: dict, now: datetime) -> list:
        return table.row(obj, True, now)

    return definitions, cells


def _custom_layout(columns: tuple[PrinterColumn, ...]) -> tuple[list[dict], Cells]:
    """(column definitions, cells function) of a custom kind: Name, then its printer columns."""
    from kctl.output.crdcolumns import crd_cell

    definitions = [_definition("NAME", priority=0)]
    for column in columns:
        definitions.append({"name": column.name, "type": column.type, "format": column.format,
                            "description": "", "priority": column.priority})

    def cells(obj: dict, now: datetime) -> list:
        return [(obj.get("metadata") or {}).get("name", "")] + [crd_cell(c, obj, now) for c in columns]

    return definitions, cells


def to_table(rt: ResourceType, objs: list[dict], *, list_meta: dict, include_object: str,
             columns: tuple[PrinterColumn, ...] | None = None, now: datetime | None = None) -> dict:
    """The meta.k8s.io/v1 Table of objs (of kind rt): every column (wide ones at priority 1), one row each.

    include_object: "None", "Metadata" (PartialObjectMetadata) or "Object"; columns: a custom kind's
    printer columns (looked up when not given); now: the time ages are computed at (default: now).
    """
    if rt.is_custom:
        definitions, cells = _custom_layout(columns if columns is not None else _cached_columns(rt))
    else:
        definitions, cells = _builtin_layout(rt)
    when = now or datetime.now(timezone.utc)
    rows = []
    for obj in objs:
        row: dict = {"cells": cells(obj, when)}
        included = _row_object(obj, include_object)
        if included is not None:
            row["object"] = included
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": dict(list_meta),
            "columnDefinitions": definitions, "rows": rows}
