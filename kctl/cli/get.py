"""`kctl get` and `kctl describe`: reading objects, as tables or any `-o` format.

`get -w` lists, then prints each change from the API watch; when the change log was
compacted past it (or the store restored) it re-lists and prints what changed in between,
deletes included, so a watch never has a silent gap. The path of `kctl get` is kept
light: no YAML, JSON Schema or sqlite-utils import unless the chosen output needs it. The
annotations are evaluated once, when the module loads (no `from __future__ import annotations`):
Typer reads the commands' parameters from them, and strings would be evaluated again on each of
its four reads (a millisecond or two of every `kctl get`).
"""

import sys
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from kctl.cli import connect

if TYPE_CHECKING:
    from kctl.machinery.resources import ResourceType
    from kctl.output.crdcolumns import PrinterColumn
    from kctl.output.formats import OutputFormat

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")]
AllNsOpt = Annotated[bool, typer.Option("--all-namespaces", "-A", help="List across all namespaces.")]
SelectorOpt = Annotated[Optional[str], typer.Option("--selector", "-l", help="Label selector (a=b,c in (x,y),!d).")]
FieldSelOpt = Annotated[Optional[str], typer.Option(
    "--field-selector", help="Field selector (metadata.name, metadata.namespace, spec.nodeName, status.phase...).")]


def _selectors(rt, selector: Optional[str], field_selector: Optional[str]):
    """The parsed -l and --field-selector (None each when not given: their parser is not even imported)."""
    if not selector and not field_selector:
        return None, None
    from kctl.machinery.selectors import parse_field_selector, parse_label_selector

    labels = parse_label_selector(selector) if selector else None
    fields = parse_field_selector(field_selector, kind=rt.kind) if field_selector else None
    return labels, fields


def collect(rt, names: list[str], *, namespace: Optional[str], all_namespaces: bool, selector: Optional[str],
            field_selector: Optional[str], ignore_not_found: bool = False,
            missing: list | None = None) -> tuple[list[dict], int]:
    """The objects a get/describe/delete names: by name, or by listing with selectors.

    A named object that does not exist raises NotFound, or (with `missing`) is added to it.
    """
    from kctl.machinery.errors import NotFound

    server = connect.api()
    ns = None if all_namespaces else connect.namespace_arg(namespace)
    if names:
        found = []
        for name in names:
            try:
                found.append(server.get(rt, name, namespace=ns or "default"))
            except NotFound as exc:
                if missing is not None and not ignore_not_found:
                    missing.append(exc)
                elif not ignore_not_found:
                    raise
        return found, server.revision()
    labels, fields = _selectors(rt, selector, field_selector)
    return server.list(rt, namespace=ns, label_selector=labels, field_selector=fields)


#: what `get all` lists, in kubectl's order (the kinds of its "all" category kctl serves)
ALL_CATEGORY = ("pods", "replicationcontrollers", "services", "daemonsets", "deployments", "replicasets",
                "statefulsets", "horizontalpodautoscalers", "jobs", "cronjobs")


def _expand_all(args: list[str]) -> list[str]:
    """`all` inside a comma list (`get all,cm`) becomes kubectl's "all" category, each kind once."""
    from kctl.machinery.errors import APIError

    if not args or "/" in args[0] or "all" not in args[0].split(","):
        return args
    server = connect.api()
    crds, _ = server.list(server.resource("customresourcedefinitions"))
    category = list(ALL_CATEGORY) + [
        f"{(c.get('spec') or {}).get('names', {}).get('plural')}.{(c.get('spec') or {}).get('group')}"
        for c in crds if "all" in (((c.get("spec") or {}).get("names") or {}).get("categories") or ())]
    kinds: list[str] = []
    for word in args[0].split(","):
        for kind in (category if word == "all" else (word,)):
            if word == "all":
                try:
                    server.resource(kind)
                except APIError:  # a kind of the category that kctl does not serve
                    continue
            if kind and kind not in kinds:
                kinds.append(kind)
    return [",".join(kinds), *args[1:]]


def _crd_columns(rt: "ResourceType") -> "tuple[PrinterColumn, ...] | None":
    """A custom kind's printer columns, from its CustomResourceDefinition (None for built-ins)."""
    if not rt.is_custom:
        return None
    from kctl.machinery.errors import NotFound
    from kctl.output.crdcolumns import crd_columns

    server = connect.api()
    try:
        crd = server.get(server.resource("customresourcedefinitions"), f"{rt.plural}.{rt.group}")
    except NotFound:
        return None
    return crd_columns(crd, rt.version)


@app.command()
def get(
    resources: Annotated[list[str], typer.Argument(help="TYPE[,TYPE] [NAME...] or TYPE/NAME...")] = None,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", help="wide|yaml|json|name|jsonpath=T|jsonpath-file=F|go-template=T|go-template-file=F|"
                               "custom-columns=SPEC|custom-columns-file=F")] = None,
    namespace: NamespaceOpt = None,
    all_namespaces: AllNsOpt = False,
    selector: SelectorOpt = None,
    field_selector: FieldSelOpt = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="After listing, print changes as they happen.")] = False,
    watch_only: Annotated[bool, typer.Option(
        "--watch-only", help="Print changes as they happen, without the list first.")] = False,
    output_watch_events: Annotated[bool, typer.Option(
        "--output-watch-events", help="With -w: print each event's type (ADDED/MODIFIED/DELETED) too.")] = False,
    resource_version: Annotated[Optional[str], typer.Option(
        "--resource-version", help="With -w: print the changes after this resourceVersion (no list first).")] = None,
    sort_by: Annotated[Optional[str], typer.Option(
        "--sort-by", help="Sort the list by a JSONPath ('{.metadata.name}' or '.metadata.name').")] = None,
    show_labels: Annotated[bool, typer.Option(help="Add a LABELS column.")] = False,
    label_columns: Annotated[list[str], typer.Option("--label-columns", "-L", help="Add a column per label key.")] = [],
    no_headers: Annotated[bool, typer.Option(help="Omit table headers.")] = False,
    ignore_not_found: Annotated[bool, typer.Option(help="A named object that does not exist is not an error.")] = False,
    show_managed_fields: Annotated[bool, typer.Option(
        help="Keep metadata.managedFields in yaml/json/jsonpath/go-template output.")] = False,
) -> None:
    """Display one or many objects."""
    from kctl.machinery.errors import ClientSideError
    from kctl.output.formats import parse_output
    from kctl.output.printers import print_objects

    fmt = parse_output(output)
    watching = watch or watch_only or resource_version is not None
    if resource_version is not None and not (watch or watch_only):
        raise ClientSideError("--resource-version is only supported with --watch or --watch-only")
    if output_watch_events and not watching:
        raise ClientSideError("--output-watch-events is only supported with --watch or --watch-only")
    since = _resource_version(resource_version) if resource_version is not None else None
    groups = connect.targets(_expand_all(resources or []))
    several = len(groups) > 1
    if watching and several:
        raise ClientSideError("you may only specify a single resource type with --watch")
    listed = []
    missing: list = []  # named objects that do not exist: reported after the others print (kubectl)
    for rt, names in groups:
        objs, rev = collect(rt, names, namespace=namespace, all_namespaces=all_namespaces, selector=selector,
                            field_selector=field_selector, ignore_not_found=ignore_not_found, missing=missing)
        if sort_by:
            from kctl.output.sorting import sort_objects

            objs = sort_objects(objs, sort_by)
        listed.append((rt, names, objs, rev))
    if missing and (watching or not any(objs for _, _, objs, _ in listed)):
        for exc in missing[:-1]:
            print(f"Error from server ({exc.reason}): {exc.message}", file=sys.stderr)
        raise missing[-1]
    if watching:
        rt, names, objs, rev = listed[0]
        _watch(rt, names, objs, rev, fmt, since=since, print_list=not watch_only and since is None,
               events=output_watch_events, namespace=namespace, all_namespaces=all_namespaces, selector=selector,
               field_selector=field_selector, show_labels=show_labels, label_columns=label_columns,
               no_headers=no_headers, show_managed_fields=show_managed_fields)
        return
    if several and not any(objs for _, _, objs, _ in listed):
        print(f"No resources found in {connect.namespace_arg(namespace)} namespace.", file=sys.stderr)
    elif several and fmt.kind in ("yaml", "json", "jsonpath", "go-template"):
        print_objects([o for _, _, objs, _ in listed for o in objs], None, fmt, sys.stdout, err=sys.stderr,
                      force_list=True, show_managed_fields=show_managed_fields)
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
                          force_list=(not names or len(names) > 1)  # kubectl: a List unless one name
                          and fmt.kind in ("yaml", "json", "jsonpath", "go-template"),
                          columns=_crd_columns(rt) if fmt.kind in ("table", "wide") else None,
                          show_managed_fields=show_managed_fields)
    if missing:  # some named objects were shown: the others' errors, and kubectl's exit status 1
        sys.stdout.flush()
        for exc in missing:
            print(f"Error from server ({exc.reason}): {exc.message}", file=sys.stderr)
        sys.exit(1)


def _resource_version(text: str) -> int:
    from kctl.machinery.errors import ClientSideError

    if not text.isdigit():
        raise ClientSideError(f'invalid --resource-version "{text}": a resourceVersion is a number')
    return int(text)


def _key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


def _changes_between(shown: dict, objs: list[dict]) -> list[tuple[str, dict]]:
    """The events that turn the objects a watch has shown into a fresh list (by uid + resourceVersion).

    Objects gone from the list (or replaced by one with another uid) are DELETED, showing
    their last known state; new ones ADDED; those at another resourceVersion MODIFIED.
    """
    fresh = {_key(o): o for o in objs}
    events: list[tuple[str, dict]] = []
    for key, old in shown.items():
        new = fresh.get(key)
        if new is None or new["metadata"].get("uid") != old["metadata"].get("uid"):
            events.append(("DELETED", old))
    for key, new in fresh.items():
        old = shown.get(key)
        if old is None or new["metadata"].get("uid") != old["metadata"].get("uid"):
            events.append(("ADDED", new))
        elif new["metadata"].get("resourceVersion") != old["metadata"].get("resourceVersion"):
            events.append(("MODIFIED", new))
    return events


def _watch(rt: "ResourceType", names: list[str], objs: list[dict], rev: int, fmt: "OutputFormat", *, since: int | None,
           print_list: bool, events: bool, namespace: Optional[str], all_namespaces: bool, selector: Optional[str],
           field_selector: Optional[str], show_labels: bool, label_columns: list[str], no_headers: bool,
           show_managed_fields: bool = False) -> None:
    """Print the list (unless --watch-only), then every change, never with a silent gap.

    When the change log was compacted past the watch (or the store restored), the watch
    re-lists and prints what changed between what it had shown and the new list, deleted
    objects included, then goes on from the new list's revision. With --resource-version
    the caller asked for an exact point: if that is compacted away, it is an error.
    """
    import gc

    from kctl.machinery.errors import Gone
    from kctl.output.printers import WatchPrinter

    if not gc.isenabled():  # kctl.cli.main paused collection for a `get`; a watch runs for long: collect its
        gc.freeze()  # garbage cycles, never scanning again what start-up and the list made
        gc.enable()
    server = connect.api()
    labels, fields = _selectors(rt, selector, field_selector)
    ns = None if all_namespaces else connect.namespace_arg(namespace)
    printer = WatchPrinter(rt, fmt, sys.stdout, events=events, all_namespaces=all_namespaces, no_headers=no_headers,
                           show_labels=show_labels, label_columns=label_columns,
                           columns=_crd_columns(rt) if fmt.kind in ("table", "wide") else None,
                           show_managed_fields=show_managed_fields)

    def wanted(obj: dict) -> bool:
        return not names or obj["metadata"]["name"] in names

    # `shown`: the objects as the reader of our output knows them (the list, then every event)
    shown = {_key(o): o for o in objs if wanted(o)}
    if print_list:
        printer.print_list(list(shown.values()))
    if since is not None:
        # --resource-version: first the changes between it and the list, exactly, or a clear error
        try:
            for event, obj in server.watch(rt, namespace=ns, since=since, label_selector=labels, field_selector=fields,
                                           known=None, timeout=0):
                if int(obj["metadata"]["resourceVersion"]) > rev:
                    break
                if wanted(obj):
                    printer.print(event, obj)
        except Gone as exc:
            raise Gone(f"the resourceVersion {since} is too old to watch from ({exc.message}); "
                       "list again and watch from the list's resourceVersion") from None
        rev = max(rev, since)
    known = set(shown) if not names else {_key(o) for o in objs}
    while True:
        try:
            for event, obj in server.watch(rt, namespace=ns, since=rev, label_selector=labels, field_selector=fields,
                                           known=known):
                rev = max(rev, int(obj["metadata"]["resourceVersion"]))
                if event == "DELETED":
                    known.discard(_key(obj))
                else:
                    known.add(_key(obj))
                if not wanted(obj):
                    continue
                if event == "DELETED":
                    shown.pop(_key(obj), None)
                else:
                    shown[_key(obj)] = obj
                printer.print(event, obj)
            return
        except Gone:
            fresh, rev = server.list(rt, namespace=ns, label_selector=labels, field_selector=fields)
            known = {_key(o) for o in fresh}
            fresh = [o for o in fresh if wanted(o)]
            for event, obj in _changes_between(shown, fresh):
                printer.print(event, obj)
            shown = {_key(o): o for o in fresh}


@app.command()
def describe(
    resources: Annotated[list[str], typer.Argument(help="TYPE [NAME_PREFIX...] or TYPE/NAME...")] = None,
    namespace: NamespaceOpt = None,
    all_namespaces: AllNsOpt = False,
    selector: SelectorOpt = None,
) -> None:
    """Show details of objects, with their events."""
    from kctl.machinery.errors import NotFound
    from kctl.output.describe import describe as render

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
            replica_sets = endpoint_slices = None
            if rt.group_kind == "Deployment.apps":
                replica_sets, _ = server.list(server.resource("replicasets"), namespace=ns)
            if rt.group_kind == "Service":
                from kctl.machinery.selectors import parse_label_selector

                endpoint_slices, _ = server.list(
                    server.resource("endpointslices.discovery.k8s.io"), namespace=ns,
                    label_selector=parse_label_selector(f"kubernetes.io/service-name={obj['metadata']['name']}"))
            pods = None
            if rt.group_kind in ("StatefulSet.apps", "PersistentVolumeClaim"):
                pods, _ = server.list(server.resource("pods"), namespace=ns)
            out.append(render(obj, rt, events, replica_sets=replica_sets, endpoint_slices=endpoint_slices, pods=pods))
    if not out:
        print(f"No resources found in {connect.namespace_arg(namespace)} namespace.", file=sys.stderr)
        return
    print("\n\n".join(s.rstrip("\n") for s in out))
