"""`kctl apply`, `create` and `diff`: manifests in, per-document result lines out.

Every document is read and parsed before anything is written; the API layer admits each
one, then commits them in one transaction (kctl.api.apiserver.APIServer.write_all).
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kctl.cli import connect
from kctl.cli.main import app

FileOpt = Annotated[list[str], typer.Option(
    "--filename", "-f", help="File, directory, URL or '-' (stdin) holding manifests. Repeatable.")]
RecursiveOpt = Annotated[bool, typer.Option("--recursive", "-R", help="Process directories recursively.")]
NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace for objects that name none.")]
DryRunOpt = Annotated[Optional[str], typer.Option(
    "--dry-run", help="'client' (no admission, nothing written) or 'server' (full admission, nothing written).")]

#: kinds `apply --prune` may delete (kubectl's default allowlist, as far as kctl has them)
PRUNE_KINDS = ("ConfigMap", "Endpoints", "Namespace", "Pod", "Secret", "Service", "Job.batch", "CronJob.batch",
               "DaemonSet.apps", "Deployment.apps", "ReplicaSet.apps")


def _read(files: list[str], recursive: bool):
    from kctl.cli.manifests import read_manifests

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
    from kctl.api.apiserver import WriteResult
    from kctl.api.apply import applied_object, unchanged_by_apply
    from kctl.api.errors import APIError

    server = connect.api()
    results = []
    for doc in docs:
        try:
            rt = server.resource_for(doc.obj)
            ns = server._namespace_of(rt, namespace, doc.obj.get("metadata") or {})
            current = server.store.get(rt.group_kind, ns, (doc.obj.get("metadata") or {}).get("name", ""))
            if current is None:
                results.append(WriteResult(obj=doc.obj, action="created"))
            else:
                merged = applied_object(doc.obj, current, server._schema(rt))
                action = "unchanged" if unchanged_by_apply(merged, current) else "configured"
                results.append(WriteResult(obj=merged, action=action))
        except APIError as exc:
            results.append(WriteResult(error=exc))
    return results


def report(docs, results, *, suffix: str = "", atomic: bool = False) -> int:
    """Print one line per document; returns the exit status (that of the first error)."""
    server = connect.api()
    code = 0
    for doc, result in zip(docs, results):
        for w in result.warnings:
            connect.warn(w)
        if result.error is not None:
            print(f"error: {doc.where()}: {result.error.message}", file=sys.stderr)
            code = code or result.error.exit_code
        elif result.action and result.obj is not None:
            rt = server.resource_for(result.obj)
            print(f"{connect.ref(rt, result.obj['metadata']['name'])} {result.action}{suffix}")
    if atomic and code:
        print("error: --atomic: no document was written", file=sys.stderr)
    return code


@app.command()
def apply(
    filename: FileOpt = [],
    recursive: RecursiveOpt = False,
    namespace: NamespaceOpt = None,
    dry_run: DryRunOpt = None,
    prune: Annotated[bool, typer.Option(help="Delete previously applied objects (matching -l) not in the manifests.")] = False,
    selector: Annotated[Optional[str], typer.Option("--selector", "-l", help="Label selector for --prune.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="With --prune: prune every previously applied object.")] = False,
    atomic: Annotated[bool, typer.Option(help="Write every document or none.")] = False,
    watch: Annotated[bool, typer.Option(
        "--watch", help="Then apply again (atomically) whenever the files change; Ctrl-C stops.")] = False,
    debounce: Annotated[str, typer.Option(
        help="With --watch: group file changes for up to this long (300ms, 1s).")] = "300ms",
) -> None:
    """Create or update objects from manifests (kubectl's three-way merge)."""
    mode = _dry_run_mode(dry_run)
    if prune and not selector and not all_:
        raise typer.BadParameter("all resources selected for prune without explicitly passing --all",
                                 param_hint="'--prune'")
    if watch:
        from kctl.cli.watch_apply import watch_apply

        if mode:
            raise typer.BadParameter("cannot be combined with --dry-run", param_hint="'--watch'")
        raise typer.Exit(watch_apply(filename, recursive=recursive, namespace=namespace, prune=prune,
                                     selector=selector, debounce=debounce))
    docs = _read(filename, recursive)
    if mode == "client":
        results = _client_dry_run(docs, namespace)
    else:
        results = connect.api().write_all([("apply", d.obj) for d in docs], namespace=namespace,
                                          dry_run=mode == "server", atomic=atomic)
    suffix = {"client": " (dry run)", "server": " (server dry run)"}.get(mode, "")
    code = report(docs, results, suffix=suffix, atomic=atomic)
    if prune and not code:
        code = _prune(results, namespace, selector, dry_run=bool(mode), suffix=suffix)
    if code:
        raise typer.Exit(code)


def _prune(results, namespace: str | None, selector: str | None, *, dry_run: bool, suffix: str) -> int:
    """kubectl apply --prune: delete applied-before objects that the manifests no longer hold."""
    from kctl.api.apply import LAST_APPLIED
    from kctl.api.errors import APIError, NotFound
    from kctl.api.selectors import parse_label_selector

    server = connect.api()
    label_selector = parse_label_selector(selector) if selector else None
    kept = set()
    namespaces = {namespace or "default"}
    for r in results:
        if r.obj is not None:
            rt = server.resource_for(r.obj)
            ns = r.obj["metadata"].get("namespace", "")
            kept.add((rt.group_kind, ns, r.obj["metadata"]["name"]))
            if rt.namespaced:
                namespaces.add(ns)
    code = 0
    for group_kind in PRUNE_KINDS:
        rt = server.registry.by_group_kind(group_kind)
        scopes = sorted(namespaces) if rt.namespaced else [None]
        for ns in scopes:
            items, _ = server.list(rt, namespace=ns, label_selector=label_selector)
            for obj in items:
                meta = obj["metadata"]
                key = (rt.group_kind, meta.get("namespace", ""), meta["name"])
                if key in kept or LAST_APPLIED not in (meta.get("annotations") or {}):
                    continue
                if meta.get("deletionTimestamp"):
                    continue
                try:
                    server.delete(rt, meta["name"], namespace=ns, dry_run=dry_run)
                    print(f"{connect.ref(rt, meta['name'])} pruned{suffix}")
                except NotFound:
                    pass
                except APIError as exc:
                    print(f"error: pruning {connect.ref(rt, meta['name'])}: {exc.message}", file=sys.stderr)
                    code = code or exc.exit_code
    return code


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
    docs = _generated(generator, filename) if generator else _read(filename, recursive)
    if mode == "client":
        from kctl.api.apiserver import WriteResult

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
    from kctl.cli.manifests import Document

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
        docs = _read(filename, recursive)
    server = connect.api()
    results = server.write_all([("apply", d.obj) for d in docs], namespace=None if source else namespace,
                               dry_run=True)
    differs, failed = False, 0
    for doc, result in zip(docs, results):
        if result.error is not None:
            print(f"error: {doc.where()}: {result.error.message}", file=sys.stderr)
            failed = max(failed, result.error.exit_code + 1)
            continue
        if result.action == "unchanged":
            continue
        rt = server.resource_for(result.obj)
        meta = result.obj["metadata"]
        live = server.store.get(rt.group_kind, meta.get("namespace", ""), meta["name"])
        differs = _write_diff(_diff_label(rt, meta), live, result.obj) or differs
    for live in pruned:  # what the source would prune: the live object against nothing
        differs = _write_diff(_diff_label(server.resource_for(live), live["metadata"]), live, None) or differs
    if failed:
        raise typer.Exit(max(failed, 2))
    if differs:
        raise typer.Exit(1)


def _write_diff(label: str, live: dict | None, merged: dict | None) -> bool:
    """Print the unified diff of the live object (None: absent) against the merged one (None: pruned)."""
    import difflib

    from kctl.cli.yamlio import dump_yaml

    before = dump_yaml(_masked(live)).splitlines(keepends=True) if live else []
    after = dump_yaml(_masked(merged)).splitlines(keepends=True) if merged else []
    lines = list(difflib.unified_diff(before, after, f"LIVE/{label}", f"MERGED/{label}"))
    sys.stdout.writelines(lines)
    return bool(lines)


def _diff_label(rt, meta: dict) -> str:
    """kubectl diff's file name of an object: `apps.v1.Deployment.default.web`."""
    return ".".join(p for p in (rt.group, rt.version, rt.kind, meta.get("namespace", ""), meta["name"]) if p)


def _masked(obj: dict) -> dict:
    """Drop what changes on every write (resourceVersion) so the diff shows real changes."""
    obj = dict(obj)
    obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return obj
