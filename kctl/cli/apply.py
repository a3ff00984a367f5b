"""`kctl apply`, `create` and `diff`: manifests in, per-document result lines out.

Every document is read and parsed before anything is written; the API layer admits each
one, then commits them in one transaction (kctl.apiserver.server.APIServer.write_all).
`apply --prune` prunes only members of its apply-set (kctl.applyset): what the same
`--applyset` (or the same -f paths) applied before and the manifests no longer hold.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kctl.cli import connect

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

FileOpt = Annotated[list[str], typer.Option(
    "--filename", "-f", help="File, directory, URL or '-' (stdin) holding manifests. Repeatable.")]
RecursiveOpt = Annotated[bool, typer.Option("--recursive", "-R", help="Process directories recursively.")]
NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace for objects that name none.")]
DryRunOpt = Annotated[Optional[str], typer.Option(
    "--dry-run", help="'client' (no admission, nothing written) or 'server' (full admission, nothing written).")]

def read_documents(files: list[str], recursive: bool) -> list:
    """The documents of `-f` (files, folders, URLs, `-` for stdin); a usage error when none is given."""
    from kctl.manifests.sources import read_manifests

    if not files:
        raise typer.BadParameter("must specify one of -f or --filename", param_hint="'-f'")
    return read_manifests(files, recursive=recursive, stdin=sys.stdin.buffer)


def _dry_run_mode(value: Optional[str]) -> str:
    if value in (None, "none"):
        return ""
    if value not in ("client", "server"):
        raise typer.BadParameter(f'Invalid dry-run value ({value}). Must be "none", "server", or "client".',
                                 param_hint="'--dry-run'")
    return value


def _client_dry_run(docs, namespace: str | None):
    """What apply would do, judged on this side only: no admission, nothing written."""
    from kctl.apiserver.contract import WriteResult
    from kctl.machinery.apply import applied_object, unchanged_by_apply
    from kctl.machinery.errors import APIError

    server = connect.api()
    results = []
    for doc in docs:
        try:
            rt = server.resource_for(doc.obj)
            ns = server.namespace_of(rt, namespace, doc.obj.get("metadata") or {})
            current = server.find(rt, (doc.obj.get("metadata") or {}).get("name", ""), namespace=ns)
            if current is None:
                results.append(WriteResult(obj=doc.obj, action="created"))
            else:
                merged = applied_object(doc.obj, current, server.schema_of(rt))
                action = "unchanged" if unchanged_by_apply(merged, current) else "configured"
                results.append(WriteResult(obj=merged, action=action))
        except APIError as exc:
            results.append(WriteResult(error=exc))
    return results


def report(docs, results, *, suffix: str = "", atomic: bool = False, output: str | None = None) -> int:
    """Print one line per document (or, with -o, the objects); returns the exit status (that of the first error)."""
    server = connect.api()
    code = 0
    shown = []
    for doc, result in zip(docs, results):
        for w in result.warnings:
            connect.warn(w)
        if result.error is not None:
            print(f"error: {doc.where()}: {result.error.message}", file=sys.stderr)
            code = code or result.error.exit_code
        elif result.action and result.obj is not None:
            rt = server.resource_for(result.obj)
            if output == "name":
                print(connect.ref(rt, result.obj["metadata"]["name"]))
            elif output:
                shown.append(result.obj)
            else:
                print(f"{connect.ref(rt, result.obj['metadata']['name'])} {result.action}{suffix}")
    if shown:
        _print_objects(shown, output or "yaml")
    if atomic and code:
        print("error: --atomic: no document was written", file=sys.stderr)
    return code


def _print_objects(objs: list[dict], output: str) -> None:
    """kubectl apply -o yaml|json: the one object, or a List of them (keys sorted, as `get -o yaml`)."""
    from kctl.output.keyorder import sorted_keys
    from kctl.manifests.writer import dump_json, dump_yaml

    from kctl.output.printers import without_managed_fields

    objs = [without_managed_fields(o) for o in objs]  # as kubectl prints objects
    body = objs[0] if len(objs) == 1 else {"apiVersion": "v1", "items": objs, "kind": "List",
                                            "metadata": {"resourceVersion": ""}}
    body = sorted_keys(body)
    sys.stdout.write(dump_json(body) if output == "json" else dump_yaml(body))


def _output_format(value: Optional[str]) -> str | None:
    if value is not None and value.startswith("="):  # `-o=yaml`
        value = value[1:]
    if value in (None, ""):
        return None
    if value not in ("yaml", "json", "name"):
        raise typer.BadParameter(f"unable to match a printer suitable for the output format \"{value}\", "
                                 "allowed formats are: json, name, yaml", param_hint="'-o'")
    return value


@app.command()
def apply(
    filename: FileOpt = [],
    recursive: RecursiveOpt = False,
    namespace: NamespaceOpt = None,
    dry_run: DryRunOpt = None,
    prune: Annotated[bool, typer.Option(
        help="Delete objects this apply-set applied before that the manifests no longer hold.")] = False,
    applyset: Annotated[Optional[str], typer.Option(
        "--applyset", help="With --prune: the apply-set's parent, [secrets/|configmaps/]NAME in -n's namespace "
        "(default: one named after the -f paths).")] = None,
    selector: Annotated[Optional[str], typer.Option(
        "--selector", "-l", help="Apply (and prune) only objects with these labels.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="With --prune: prune every kind of the apply-set.")] = False,
    atomic: Annotated[bool, typer.Option(help="Write every document or none.")] = False,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", help="yaml | json | name: print the applied objects instead of result lines.")] = None,
    watch: Annotated[bool, typer.Option(
        "--watch", help="Then apply again (atomically) whenever the files change; Ctrl-C stops.")] = False,
    debounce: Annotated[str, typer.Option(
        help="With --watch: group file changes for up to this long (300ms, 1s).")] = "300ms",
    server_side: Annotated[bool, typer.Option(
        "--server-side", help="Apply on the server (managedFields, conflicts), as kubectl's --server-side.")] = False,
    force_conflicts: Annotated[bool, typer.Option(
        "--force-conflicts", help="With --server-side: take the fields other managers own.")] = False,
    field_manager: Annotated[Optional[str], typer.Option(
        "--field-manager", help="With --server-side: the field manager's name (default kctl).")] = None,
) -> None:
    """Create or update objects from manifests (kubectl's three-way merge)."""
    mode = _dry_run_mode(dry_run)
    fmt = _output_format(output)
    if server_side:
        raise typer.Exit(_server_side(filename, recursive, namespace, mode, fmt, force_conflicts, field_manager,
                                      unsupported=[flag for flag, on in (("--prune", prune), ("--watch", watch),
                                                                         ("--atomic", atomic), ("-l", selector))
                                                   if on]))
    if force_conflicts:
        raise typer.BadParameter("--force-conflicts only works with --server-side", param_hint="'--force-conflicts'")
    if applyset is not None and not prune:
        raise typer.BadParameter("--applyset requires --prune", param_hint="'--applyset'")
    if prune and not selector and not all_ and applyset is None:
        raise typer.BadParameter("all resources selected for prune without explicitly passing --all",
                                 param_hint="'--prune'")
    if not filename:
        raise typer.BadParameter("must specify one of -f or --filename", param_hint="'-f'")
    if selector:
        _label_selector(selector)  # a bad selector is refused before anything is read
    parent = _parent(applyset, filename, namespace) if prune else None
    if watch:
        from kctl.cli.watch_apply import watch_apply

        if mode:
            raise typer.BadParameter("cannot be combined with --dry-run", param_hint="'--watch'")
        if fmt:
            raise typer.BadParameter("cannot be combined with -o", param_hint="'--watch'")
        raise typer.Exit(watch_apply(filename, recursive=recursive, namespace=namespace, parent=parent,
                                     selector=selector, debounce=debounce))
    docs = read_documents(filename, recursive)
    code = apply_documents(docs, namespace=namespace, mode=mode, atomic=atomic, selector=selector,
                           parent=parent, output=fmt)
    if code:
        raise typer.Exit(code)


def _server_side(filename: list[str], recursive: bool, namespace: str | None, mode: str, fmt: str | None,
                 force: bool, field_manager: str | None, *, unsupported: list[str]) -> int:
    """kubectl apply --server-side (kctl.cli.serverside); the exit status."""
    from kctl.cli.serverside import DEFAULT_FIELD_MANAGER, apply_server_side

    if unsupported:
        raise typer.BadParameter(f"cannot be combined with {unsupported[0]}", param_hint="'--server-side'")
    if mode == "client":
        raise typer.BadParameter("--dry-run=client doesn't work with --server-side (did you mean "
                                 "--dry-run=server instead?)", param_hint="'--dry-run'")
    docs = read_documents(filename, recursive)
    results = apply_server_side(connect.api(), docs, namespace=namespace, dry_run=mode == "server", force=force,
                                field_manager=field_manager or DEFAULT_FIELD_MANAGER)
    return report(docs, results, suffix=" (server dry run)" if mode == "server" else "", output=fmt)


def _label_selector(selector: str | None):
    if not selector:
        return None  # the parser (5 ms of imports and regexes) only when there is a selector
    from kctl.machinery.selectors import parse_label_selector

    return parse_label_selector(selector)


def _parent(applyset: str | None, filename: list[str], namespace: str | None):
    """The apply-set parent of a --prune run: --applyset, else the one named after the -f paths."""
    from kctl.applyset import ApplySetError, default_parent_name, parse_parent

    try:
        name = applyset if applyset is not None else default_parent_name(filename)
        return parse_parent(name, namespace=namespace or "default")
    except ApplySetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1)


def apply_documents(docs, *, namespace: str | None, mode: str = "", atomic: bool = False,
                    selector: str | None = None, parent=None, output: str | None = None) -> int:
    """Apply `docs` (those matching -l), then prune the apply-set of `parent` if given; the exit status.

    Called by `kctl apply` and by each round of `kctl apply --watch`. With a parent, every
    applied object is labelled a member of the set, the set's record lists what was applied
    (kctl.applyset), and only recorded members the manifests no longer hold are pruned.
    """
    from kctl.applyset import ApplySetError

    server = connect.api()
    label_selector = _label_selector(selector)
    chosen = [d for d in docs if label_selector is None or label_selector.matches(_labels(d.obj))]
    if not chosen:
        print("error: no objects passed to apply", file=sys.stderr)
        return 1
    suffix = {"client": " (dry run)", "server": " (server dry run)"}.get(mode, "")
    try:
        return _apply_and_prune(server, docs, chosen, namespace=namespace, mode=mode, atomic=atomic,
                                label_selector=label_selector, parent=parent, output=output, suffix=suffix)
    except ApplySetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _labels(obj: dict) -> dict:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def _apply_and_prune(server, docs, chosen, *, namespace, mode, atomic, label_selector, parent, output,
                     suffix) -> int:
    from kctl.applyset import label_members, load, planned_entries, record
    from kctl.manifests.sources import Document

    applyset = None
    if parent is not None:
        applyset = load(server, parent)
        labelled = label_members([d.obj for d in chosen], parent.id)
        chosen = [Document(source=d.source, index=d.index, line=d.line, obj=obj, item=d.item)
                  for d, obj in zip(chosen, labelled)]
        if applyset.live is not None and not mode:
            # KEP-3659: widen the record before applying, so a crash in between leaks nothing
            applyset = record(server, applyset, applyset.inventory + planned_entries(server, labelled, namespace))
    if mode == "client":
        results = _client_dry_run(chosen, namespace)
    else:
        results = server.write_all([("apply", d.obj) for d in chosen], namespace=namespace,
                                   dry_run=mode == "server", atomic=atomic)
    code = report(chosen, results, suffix=suffix, atomic=atomic, output=output)
    if applyset is None:
        return code
    pruned: set = set()
    if not code:
        code, pruned = _prune(server, applyset, _kept_keys(server, docs, namespace), label_selector,
                              dry_run=bool(mode), suffix=suffix, to_stderr=bool(output))
    if not mode:
        _record_after(server, applyset, results, pruned)
    return code


def _kept_keys(server, docs, namespace: str | None) -> set:
    """(group/kind, namespace, name) of every object the manifests hold (also those -l left out)."""
    from kctl.machinery.errors import APIError

    kept = set()
    for doc in docs:
        meta = doc.obj.get("metadata") or {}
        try:
            rt = server.resource_for(doc.obj)
        except APIError:
            continue
        ns = (meta.get("namespace") or namespace or "default") if rt.namespaced else ""
        kept.add((rt.group_kind, ns, meta.get("name") or ""))
    return kept


def _prune(server, applyset, kept: set, label_selector, *, dry_run: bool, suffix: str,
           to_stderr: bool = False) -> tuple[int, set]:
    """Delete the set's recorded members that the manifests no longer hold; (exit status, keys pruned)."""
    from kctl.machinery.errors import APIError, NotFound
    from kctl.applyset import prune_plan
    from kctl.sync.inventory import key_of_object

    code = 0
    pruned = set()
    for rt, live in prune_plan(server, applyset, kept, label_selector=label_selector):
        meta = live["metadata"]
        try:
            server.delete(rt, meta["name"], namespace=meta.get("namespace") or None, dry_run=dry_run)
        except NotFound:
            pass
        except APIError as exc:
            print(f"error: pruning {connect.ref(rt, meta['name'])}: {exc.message}", file=sys.stderr)
            code = code or exc.exit_code
            continue
        pruned.add(key_of_object(rt, live))
        print(f"{connect.ref(rt, meta['name'])} pruned{suffix}", file=sys.stderr if to_stderr else sys.stdout)
    return code, pruned


def _record_after(server, applyset, results, pruned: set) -> None:
    """Record the set's members: what was applied now, and earlier members still there and still its own."""
    from kctl.applyset import record, remaining_members

    applied = [r.obj for r in results if r.obj is not None and r.error is None]
    record(server, applyset, remaining_members(server, applyset, applied, pruned=pruned))


@app.command()
def create(
    generator: Annotated[Optional[list[str]], typer.Argument(
        help="`namespace NAME`: create a Namespace without a manifest.", show_default=False)] = None,
    filename: FileOpt = [],
    recursive: RecursiveOpt = False,
    namespace: NamespaceOpt = None,
    dry_run: DryRunOpt = None,
    atomic: Annotated[bool, typer.Option(help="Write every document or none.")] = False,
) -> None:
    """Create objects from manifests (or `create namespace NAME`); one that exists already is an error."""
    mode = _dry_run_mode(dry_run)
    docs = _generated(generator, filename) if generator else read_documents(filename, recursive)
    if not docs:
        print("error: no objects passed to create", file=sys.stderr)
        raise typer.Exit(1)
    if mode == "client":
        from kctl.apiserver.contract import WriteResult

        results = [WriteResult(obj=d.obj, action="created") for d in docs]
    else:
        results = connect.api().write_all([("create", d.obj) for d in docs], namespace=namespace,
                                          dry_run=mode == "server", atomic=atomic)
    code = report(docs, results, suffix={"client": " (dry run)", "server": " (server dry run)"}.get(mode, ""),
                  atomic=atomic)
    if code:
        raise typer.Exit(code)


def _generated(generator: list[str], filename: list[str]) -> list:
    """`kctl create namespace NAME` as a one-document manifest."""
    from kctl.manifests.sources import Document

    if filename or len(generator) != 2 or generator[0] not in ("namespace", "namespaces", "ns"):
        print("error: use `kctl create -f FILE` or `kctl create namespace NAME`", file=sys.stderr)
        raise typer.Exit(2)
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": generator[1]}}
    return [Document(source="<command line>", index=0, line=None, obj=obj)]


@app.command()
def diff(
    filename: FileOpt = [],
    recursive: RecursiveOpt = False,
    namespace: NamespaceOpt = None,
    source: Annotated[Optional[str], typer.Option(
        "--source", help="Diff against what this GitSource's current revision would apply (and prune).")] = None,
) -> None:
    """Show what `apply` would change, as a unified diff. Exit 0: none, 1: differences, >1: error."""
    pruned: list[dict] = []
    if source:
        from kctl.cli.sync import source_documents

        docs, pruned = source_documents(source, namespace)
    else:
        docs = read_documents(filename, recursive)
    from kctl.ops.diff import diff_documents

    differs, failed = False, 0
    for entry in diff_documents(connect.api(), docs, namespace=None if source else namespace, pruned=pruned):
        if entry.error is not None:
            print(f"error: {entry.document.where()}: {entry.error.message}", file=sys.stderr)
            failed = max(failed, entry.error.exit_code + 1)
            continue
        sys.stdout.writelines(entry.lines)
        differs = differs or bool(entry.lines)
    if failed:
        raise typer.Exit(max(failed, 2))
    if differs:
        raise typer.Exit(1)
