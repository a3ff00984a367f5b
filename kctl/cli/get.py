"""`kctl get` and `kctl describe`: reading objects, as tables or any `-o` format.

The path of `kctl get` is kept light: no YAML, JSON Schema or sqlite-utils import unless
the chosen output needs it.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kctl.cli import connect
from kctl.cli.main import app

NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")]
AllNsOpt = Annotated[bool, typer.Option("--all-namespaces", "-A", help="List across all namespaces.")]
SelectorOpt = Annotated[Optional[str], typer.Option("--selector", "-l", help="Label selector (a=b,c in (x,y),!d).")]
FieldSelOpt = Annotated[Optional[str], typer.Option(
    "--field-selector", help="Field selector (metadata.name, metadata.namespace, spec.nodeName, status.phase...).")]


def _selectors(rt, selector: Optional[str], field_selector: Optional[str]):
    from kctl.api.selectors import parse_field_selector, parse_label_selector

    labels = parse_label_selector(selector) if selector else None
    fields = parse_field_selector(field_selector, kind=rt.kind) if field_selector else None
    return labels, fields


def collect(rt, names: list[str], *, namespace: Optional[str], all_namespaces: bool, selector: Optional[str],
            field_selector: Optional[str], ignore_not_found: bool = False) -> tuple[list[dict], int]:
    """The objects a get/describe/delete names: by name, or by listing with selectors."""
    from kctl.api.errors import NotFound

    server = connect.api()
    ns = None if all_namespaces else connect.namespace_arg(namespace)
    if names:
        found = []
        for name in names:
            try:
                found.append(server.get(rt, name, namespace=ns or "default"))
            except NotFound:
                if not ignore_not_found:
                    raise
        return found, server.store.revision()
    labels, fields = _selectors(rt, selector, field_selector)
    return server.list(rt, namespace=ns, label_selector=labels, field_selector=fields)


@app.command()
def get(
    resources: Annotated[list[str], typer.Argument(help="TYPE[,TYPE] [NAME...] or TYPE/NAME...")] = None,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", help="wide|yaml|json|name|jsonpath=TEMPLATE|custom-columns=SPEC")] = None,
    namespace: NamespaceOpt = None,
    all_namespaces: AllNsOpt = False,
    selector: SelectorOpt = None,
    field_selector: FieldSelOpt = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="After listing, print changes as they happen.")] = False,
    show_labels: Annotated[bool, typer.Option(help="Add a LABELS column.")] = False,
    label_columns: Annotated[list[str], typer.Option("--label-columns", "-L", help="Add a column per label key.")] = [],
    no_headers: Annotated[bool, typer.Option(help="Omit table headers.")] = False,
    ignore_not_found: Annotated[bool, typer.Option(help="A named object that does not exist is not an error.")] = False,
) -> None:
    """Display one or many objects."""
    from kctl.cli.printers import parse_output, print_objects

    fmt = parse_output(output)
    groups = connect.targets(resources or [])
    several = len(groups) > 1
    listed = []
    for i, (rt, names) in enumerate(groups):
        objs, rev = collect(rt, names, namespace=namespace, all_namespaces=all_namespaces, selector=selector,
                            field_selector=field_selector, ignore_not_found=ignore_not_found)
        listed.append((rt, names, objs, rev))
    if several and not any(objs for _, _, objs, _ in listed):
        print(f"No resources found in {connect.namespace_arg(namespace)} namespace.", file=sys.stderr)
    elif several and fmt.kind in ("yaml", "json"):
        print_objects([o for _, _, objs, _ in listed for o in objs], None, fmt, sys.stdout, err=sys.stderr,
                      force_list=True)
    else:
        printed = False
        for rt, names, objs, rev in listed:
            if several and not objs:
                continue
            if printed and fmt.kind in ("table", "wide"):
                print()
            printed = True
            print_objects(objs, rt, fmt, sys.stdout, err=sys.stderr, all_namespaces=all_namespaces,
                          show_kind=several, no_headers=no_headers, show_labels=show_labels,
                          label_columns=label_columns, namespace=connect.namespace_arg(namespace),
                          force_list=not names and fmt.kind in ("yaml", "json", "jsonpath"))
    if watch:
        if several:
            raise typer.BadParameter("you may only specify a single resource type with --watch")
        rt, names, objs, rev = listed[0]
        sys.stdout.flush()
        _watch(rt, names, objs, rev, fmt, namespace=namespace, all_namespaces=all_namespaces, selector=selector,
               field_selector=field_selector, show_labels=show_labels, label_columns=label_columns)


def _watch(rt, names, objs, rev, fmt, *, namespace, all_namespaces, selector, field_selector, show_labels,
           label_columns) -> None:
    from kctl.api.errors import Gone
    from kctl.cli.printers import print_objects

    server = connect.api()
    labels, fields = _selectors(rt, selector, field_selector)
    ns = None if all_namespaces else connect.namespace_arg(namespace)
    known = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objs}
    while True:
        try:
            for _type, obj in server.watch(rt, namespace=ns, since=rev, label_selector=labels,
                                           field_selector=fields, known=known):
                if names and obj["metadata"]["name"] not in names:
                    continue
                print_objects([obj], rt, fmt, sys.stdout, err=sys.stderr, all_namespaces=all_namespaces,
                              no_headers=True, show_labels=show_labels, label_columns=label_columns)
                sys.stdout.flush()
                rev = int(obj["metadata"]["resourceVersion"])
            return
        except Gone:
            objs, rev = server.list(rt, namespace=ns, label_selector=labels, field_selector=fields)
            known = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objs}


@app.command()
def describe(
    resources: Annotated[list[str], typer.Argument(help="TYPE [NAME_PREFIX...] or TYPE/NAME...")] = None,
    namespace: NamespaceOpt = None,
    all_namespaces: AllNsOpt = False,
    selector: SelectorOpt = None,
) -> None:
    """Show details of objects, with their events."""
    from kctl.api.errors import NotFound
    from kctl.cli.describe import describe as render

    server = connect.api()
    event_rt = server.resource("events")
    out = []
    for rt, names in connect.targets(resources or []):
        objs, _ = collect(rt, [], namespace=namespace, all_namespaces=all_namespaces, selector=selector,
                          field_selector=None)
        if names:
            chosen = [o for o in objs if any(o["metadata"]["name"] == n for n in names)] or \
                     [o for o in objs if any(o["metadata"]["name"].startswith(n) for n in names)]
            if not chosen:
                raise NotFound(rt.group_resource, names[0])
            objs = chosen
        for obj in objs:
            events = []
            uid = obj["metadata"].get("uid")
            ns = obj["metadata"].get("namespace")
            if uid:
                evs, _ = server.list(event_rt, namespace=ns or "default") if ns else server.list(event_rt)
                events = [e for e in evs if (e.get("involvedObject") or {}).get("uid") == uid]
            replica_sets = None
            if rt.group_kind == "Deployment.apps":
                replica_sets, _ = server.list(server.resource("replicasets"), namespace=ns)
            out.append(render(obj, rt, events, replica_sets=replica_sets))
    if not out:
        print(f"No resources found in {connect.namespace_arg(namespace)} namespace.", file=sys.stderr)
        return
    print("\n\n".join(s.rstrip("\n") for s in out))
