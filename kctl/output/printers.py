"""Output of `kctl get`: objects written as kubectl's tables (`-o wide`) or -o yaml/json/name/jsonpath/custom-columns/
go-template, all at once (`print_objects`) or one watch event at a time (`WatchPrinter`, `get -w`).

Tables: one per run of objects of one kind, with the columns of kctl.output.tables (a custom
kind's from kctl.output.crdcolumns), NAMESPACE/EVENT/label columns added, aligned as Go's
tabwriter. YAML, JSON and templates see every mapping's keys sorted, as kubectl prints what an
API server sends. The format comes from kctl.output.formats.parse_output. Called by the `get`
and `sync` commands (kctl.cli); pure functions except for writing to the given streams. Kept
cheap to import: the tables, YAML/JSON writers, jsonpath and the Go template interpreter load
only when used.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Iterable, TextIO

from kctl.machinery.errors import ClientSideError
from kctl.machinery.resources import BUILTIN, ResourceType

if TYPE_CHECKING:
    from kctl.output.crdcolumns import PrinterColumn
    from kctl.output.formats import OutputFormat
    from kctl.output.tables import Table

__all__ = ["print_objects", "WatchPrinter", "align_columns"]

#: kubectl's formatEventType: the EVENT column of `get -w --output-watch-events`
_EVENT_CELLS = {"ADDED": "ADDED   ", "MODIFIED": "MODIFIED", "DELETED": "DELETED ", "ERROR": "ERROR   "}
_BUILTIN_SCOPE = {rt.group_kind: rt.namespaced for rt in BUILTIN}


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(timezone.utc)
    return now if now.tzinfo else now.replace(tzinfo=timezone.utc)


def _group_kind(obj: dict, rt: ResourceType | None) -> tuple[str, str]:
    """(group, Kind) from the object's apiVersion/kind, else from rt."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if isinstance(kind, str) and kind and isinstance(api_version, str):
        group = api_version.rpartition("/")[0] if "/" in api_version else ""
        return group, kind
    if rt is not None:
        return rt.group, rt.kind
    return "", str(kind or "")


def _kind_prefix(group: str, kind: str) -> str:
    """kubectl's `kind.group/` (lower-cased kind): `pod/`, `deployment.apps/`."""
    return f"{kind.lower()}.{group}/" if group else f"{kind.lower()}/"


def align_columns(rows: list[list[str]], out: TextIO) -> None:
    """Go's tabwriter as kubectl sets it up (min width 6, padding 3); last column unpadded."""
    if not rows:
        return
    ncols = len(rows[0])
    widths = []
    for col in range(ncols - 1):
        width = 3 + max(len(r[col]) for r in rows)
        widths.append(width if width > 6 else 6)
    lines = []
    for r in rows:
        lines.append("".join([c.ljust(w) for c, w in zip(r, widths)]) + r[-1])
    out.write("\n".join(lines) + "\n")


def print_objects(objs: list[dict], rt: ResourceType | None, fmt: OutputFormat, out: TextIO, *,
                  err: TextIO | None = None, namespace: str | None = None,
                  all_namespaces: bool = False, show_kind: bool = False, no_headers: bool = False,
                  show_labels: bool = False, label_columns: Iterable[str] = (),
                  now: datetime | None = None, force_list: bool = False,
                  columns: tuple[PrinterColumn, ...] | None = None, show_managed_fields: bool = False) -> None:
    """Write `objs` to `out` in `fmt`, as `kubectl get` does.

    rt: the kind listed (None: take each object's apiVersion/kind; mixed kinds print one
    table per kind). err: where "No resources found" goes (default stderr); namespace:
    named in that message. force_list: for yaml/json/jsonpath/go-template, wrap even a
    single object in a `kind: List`, as kubectl does for a list query (`get pods`, not
    `get pod NAME`); without it one object prints as itself and any other number as a List.
    columns: a CRD's printer columns for rt's kind (`crd_columns`). show_managed_fields: keep
    metadata.managedFields in yaml/json/jsonpath/go-template (kubectl leaves them out by default).
    """
    name = fmt.kind
    if name in ("table", "wide"):
        _print_tables(objs, rt, name == "wide", out, err if err is not None else sys.stderr,
                      namespace=namespace, all_namespaces=all_namespaces, show_kind=show_kind,
                      no_headers=no_headers, show_labels=show_labels,
                      label_columns=list(label_columns), now=_now(now), columns=columns)
    elif name == "name":
        out.write("".join(_name_line(o, rt) + "\n" for o in objs))
    elif name == "custom-columns":
        _print_custom_columns(objs, fmt.columns, out, no_headers=no_headers)
    else:
        if not show_managed_fields:
            objs = [without_managed_fields(o) for o in objs]
        out.write(_render_data(_as_data(objs, force_list), fmt))


def without_managed_fields(obj: dict) -> dict:
    """obj without metadata.managedFields (a shallow copy when it had them), as kubectl prints objects."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _name_line(obj: dict, rt: ResourceType | None) -> str:
    return _kind_prefix(*_group_kind(obj, rt)) + ((obj.get("metadata") or {}).get("name") or "")


def _render_data(data: dict, fmt: OutputFormat, *, event: str | None = None) -> str:
    """yaml/json/jsonpath/go-template text of one object or List, keys sorted; with `event`, of
    the watch event `{"type": event, "object": data}` (JSON keeps metav1.WatchEvent's field order)."""
    if fmt.kind == "json" and event is None:
        text = _fast_json(data)
        if text is not None:
            return text
    from kctl.output.keyorder import sorted_keys

    data = sorted_keys(data)
    if event is not None:
        data = {"type": event, "object": data} if fmt.kind == "json" else {"object": data, "type": event}
    if fmt.kind == "jsonpath":
        from kctl.output.jsonpath import parse_template
        return parse_template(fmt.template).render(data)
    if fmt.kind == "go-template":
        from kctl.output import gotemplate
        try:
            return gotemplate.parse(fmt.template).execute(data)
        except gotemplate.TemplateError as exc:
            # kubectl also dumps the object to stdout here; kctl does not (it may hold secrets)
            raise ClientSideError(f"error executing template {_go_quoted(fmt.template)}: {exc}") from None
    from kctl.manifests import writer
    text = writer.dump_yaml(data) if fmt.kind == "yaml" else writer.dump_json(data)
    return text if text.endswith("\n") else text + "\n"


#: number tokens orjson writes otherwise than json (floats below 1e-4: `1e-7` for `1e-07`, `0.00001` for `1e-05`),
#: as they end a line of its indented output (a JSON string cannot end one)
_ORJSON_OWN_NUMBERS = (r"e-[0-9]+,?\n", r"0\.0000[0-9]*,?\n")


def _fast_json(data: dict) -> str | None:
    """`data` as -o json prints it (keys sorted, indented by 4: kctl.manifests.writer.dump_json after
    sorted_keys), written by orjson: sorted and indented by 2 in C, then each line's indent doubled,
    a quarter of the time for 1,000 objects. None where orjson would write other text than json: the
    caller writes it the slow way (integers beyond 64 bits, floats below 1e-4)."""
    import re

    import orjson

    try:
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits
        return None
    if any(re.search(pattern, text) for pattern in _ORJSON_OWN_NUMBERS):
        return None
    return "\n".join([line[:len(line) - len(line.lstrip(" "))] + line for line in text.split("\n")])


def _go_quoted(text: str) -> str:
    import json
    return json.dumps(text, ensure_ascii=False)


class WatchPrinter:
    """Prints objects one at a time as `kubectl get -w` does (called by the get command).

    Tables print their header with the first row only (and `EVENT` first with
    `events`); YAML documents after the first are preceded by `---`; with `events`
    the yaml/json/template formats print `{"type": ..., "object": ...}` watch events
    and `-o name` prefixes the event type.
    """

    def __init__(self, rt: ResourceType, fmt: OutputFormat, out: TextIO, *, events: bool = False,
                 all_namespaces: bool = False, no_headers: bool = False, show_labels: bool = False,
                 label_columns: Iterable[str] = (), columns: tuple[PrinterColumn, ...] | None = None,
                 show_managed_fields: bool = False) -> None:
        self.rt, self.fmt, self.out, self.events = rt, fmt, out, events
        self.show_managed_fields = show_managed_fields
        self.all_namespaces, self.no_headers = all_namespaces, no_headers
        self.show_labels, self.label_columns = show_labels, list(label_columns)
        self.columns = columns
        self.count = 0

    def print_list(self, objs: list[dict], *, now: datetime | None = None) -> None:
        """The list a watch starts from: one aligned table, or one document per object (ADDED)."""
        if not objs:
            return
        if self.fmt.kind in ("table", "wide"):
            self._rows(objs, "ADDED", now)
            self.count += len(objs)
            self.out.flush()
            return
        for obj in objs:
            self.print("ADDED", obj, now=now)

    def _rows(self, objs: list[dict], event: str, now: datetime | None) -> None:
        wide = self.fmt.kind == "wide"
        table, namespaced = _table_for(objs[0], self.rt, wide, self.columns)
        _print_table(objs, table, wide, self.out, with_namespace=self.all_namespaces and namespaced,
                     kind_prefix="", no_headers=self.no_headers or self.count > 0, show_labels=self.show_labels,
                     label_columns=self.label_columns, now=_now(now),
                     event_type=event if self.events else None)

    def print(self, event: str, obj: dict, *, now: datetime | None = None) -> None:
        """Print one object that the watch reported as `event` (ADDED, MODIFIED, DELETED)."""
        kind = self.fmt.kind
        if kind in ("table", "wide"):
            self._rows([obj], event, now)
            self.count += 1
            self.out.flush()
            return
        self.count += 1
        if kind == "name":
            self.out.write((f"{event} " if self.events else "") + _name_line(obj, self.rt) + "\n")
        elif kind == "custom-columns":
            _print_custom_columns([obj], self.fmt.columns, self.out, no_headers=self.no_headers or self.count > 1)
        else:
            if kind == "yaml" and self.count > 1:
                self.out.write("---\n")
            if not self.show_managed_fields:
                obj = without_managed_fields(obj)
            self.out.write(_render_data(obj, self.fmt, event=event if self.events else None))
        self.out.flush()


def _as_data(objs: list[dict], force_list: bool) -> dict:
    if len(objs) == 1 and not force_list:
        return objs[0]
    return {"apiVersion": "v1", "items": list(objs), "kind": "List", "metadata": {"resourceVersion": ""}}


def _print_custom_columns(objs: list[dict], columns: tuple[tuple[str, str], ...], out: TextIO, *,
                          no_headers: bool) -> None:
    from kctl.output.jsonpath import go_sprint, parse_template

    templates = [parse_template(t) for _, t in columns]
    rows = [] if no_headers else [[h for h, _ in columns]]
    for obj in objs:
        row = []
        for template in templates:
            values = template.values(obj)
            row.append(",".join(go_sprint(v) for v in values) if values else "<none>")
        rows.append(row)
    align_columns(rows, out)


def _table_for(obj: dict, rt: ResourceType | None, wide: bool,
               columns: tuple[PrinterColumn, ...] | None) -> tuple[Table, bool]:
    """The table of one object's kind, and whether that kind is namespaced."""
    from kctl.output.tables import GENERIC, TABLES

    group, kind = _group_kind(obj, rt)
    group_kind = f"{kind}.{group}" if group else kind
    if rt is not None and rt.group_kind == group_kind:
        namespaced = rt.namespaced
        if columns is not None:
            from kctl.output.crdcolumns import crd_table

            return crd_table(columns, wide), namespaced
    elif group_kind in _BUILTIN_SCOPE:
        namespaced = _BUILTIN_SCOPE[group_kind]
    else:
        namespaced = bool((obj.get("metadata") or {}).get("namespace"))
    return TABLES.get(group_kind, GENERIC), namespaced


def _print_tables(objs: list[dict], rt: ResourceType | None, wide: bool, out: TextIO, err: TextIO, *,
                  namespace: str | None, all_namespaces: bool, show_kind: bool, no_headers: bool,
                  show_labels: bool, label_columns: list[str], now: datetime,
                  columns: tuple[PrinterColumn, ...] | None = None) -> None:
    if not objs:
        namespaced = rt.namespaced if rt is not None else bool(namespace)
        if namespaced and not all_namespaces and namespace:
            err.write(f"No resources found in {namespace} namespace.\n")
        else:
            err.write("No resources found\n")
        return
    # One table per run of objects of one kind, as kubectl prints `get pods,deploy`.
    groups: list[tuple[tuple[str, str], list[dict]]] = []
    for obj in objs:
        key = _group_kind(obj, rt)
        if groups and groups[-1][0] == key:
            groups[-1][1].append(obj)
        else:
            groups.append((key, [obj]))
    for index, ((group, kind), members) in enumerate(groups):
        if index and not no_headers:
            out.write("\n")
        group_kind = f"{kind}.{group}" if group else kind
        table, namespaced = _table_for(members[0], rt, wide, columns)
        if not (rt is not None and rt.group_kind == group_kind) and group_kind not in _BUILTIN_SCOPE:
            namespaced = any((o.get("metadata") or {}).get("namespace") for o in members)
        _print_table(members, table, wide, out,
                     with_namespace=all_namespaces and namespaced,
                     kind_prefix=_kind_prefix(group, kind) if show_kind else "",
                     no_headers=no_headers, show_labels=show_labels, label_columns=label_columns,
                     now=now)


def _print_table(objs: list[dict], table: Table, wide: bool, out: TextIO, *, with_namespace: bool,
                 kind_prefix: str, no_headers: bool, show_labels: bool, label_columns: list[str],
                 now: datetime, event_type: str | None = None) -> None:
    """One table: `table`'s header (unless no_headers) and one row per object, with the NAMESPACE, EVENT
    and label columns asked for."""
    from kctl.output.cells import format_labels

    headers = list(table.header(wide=wide))
    if with_namespace:
        headers.insert(0, "NAMESPACE")
    if event_type is not None:
        headers.insert(0, "EVENT")
    headers += [key.rsplit("/", 1)[-1].upper() for key in label_columns]
    if show_labels:
        headers.append("LABELS")
    rows = [] if no_headers else [headers]
    row_fn = table.row
    extras = bool(label_columns) or show_labels
    for obj in objs:
        row = row_fn(obj, wide, now)
        if kind_prefix:
            row[0] = kind_prefix + row[0]
        meta = obj.get("metadata") or {}
        if with_namespace:
            row.insert(0, meta.get("namespace") or "")
        if event_type is not None:
            row.insert(0, _EVENT_CELLS.get(event_type, event_type))
        if extras:
            labels = meta.get("labels") or {}
            row += [labels.get(key, "") for key in label_columns]
            if show_labels:
                row.append(format_labels(labels))
        rows.append(row)
    align_columns(rows, out)
