"""`kctl delete`, `patch`, `edit`, `label` and `annotate`: changing objects in place.

Each goes through the API layer with a resourceVersion precondition (patch, label and
annotate retry on Conflict there; edit reports it), so concurrent writers lose nothing.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated, Optional

import typer

from kctl.cli import connect
from kctl.cli.get import collect
from kctl.cli.main import app

NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")]
SelectorOpt = Annotated[Optional[str], typer.Option("--selector", "-l", help="Label selector.")]
AllOpt = Annotated[bool, typer.Option("--all", help="Every object of the type in the namespace.")]
DryRunOpt = Annotated[Optional[str], typer.Option("--dry-run", help="'server' or 'client': change nothing.")]
ResourcesArg = Annotated[Optional[list[str]], typer.Argument(help="TYPE NAME... or TYPE/NAME...")]

CASCADE = {"background": "Background", "true": "Background", "foreground": "Foreground", "orphan": "Orphan",
           "false": "Orphan"}


def _objects(resources, filename, recursive, namespace, selector, all_, all_namespaces=False,
             ignore_not_found=False):
    """(rt, obj) pairs named by TYPE NAME, TYPE/NAME, -f, -l or --all."""
    server = connect.api()
    if filename:
        from kctl.api.errors import NotFound
        from kctl.cli.manifests import read_manifests

        out = []
        for doc in read_manifests(filename, recursive=recursive, stdin=sys.stdin.buffer):
            rt = server.resource_for(doc.obj)
            meta = doc.obj.get("metadata") or {}
            try:
                out.append((rt, server.get(rt, meta.get("name", ""), namespace=meta.get("namespace") or namespace)))
            except NotFound:
                if not ignore_not_found:
                    raise
        return out
    out = []
    for rt, names in connect.targets(resources or []):
        if not names and not selector and not all_:
            raise typer.BadParameter(f'resource(s) were provided, but no name was specified for "{rt.plural}"; '
                                     "give names, -l SELECTOR or --all")
        objs, _ = collect(rt, names, namespace=namespace, all_namespaces=all_namespaces, selector=selector,
                          field_selector=None, ignore_not_found=ignore_not_found)
        out.extend((rt, o) for o in objs)
    return out


@app.command()
def delete(
    resources: ResourcesArg = None,
    filename: Annotated[list[str], typer.Option("--filename", "-f", help="Delete what these manifests name.")] = [],
    recursive: Annotated[bool, typer.Option("--recursive", "-R", help="Process directories recursively.")] = False,
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
    all_: AllOpt = False,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="With -l/--all: every namespace.")] = False,
    cascade: Annotated[str, typer.Option(help="background | foreground | orphan: what happens to dependents.")] = "background",
    wait: Annotated[bool, typer.Option(help="Wait until the objects are gone (finalizers done).")] = True,
    timeout: Annotated[float, typer.Option(help="Seconds to wait with --wait (0: forever).")] = 0,
    grace_period: Annotated[Optional[int], typer.Option(help="Seconds a pod gets to stop (0: at once).")] = None,
    force: Annotated[bool, typer.Option(help="With --grace-period=0: remove pods without waiting for their node.")] = False,
    ignore_not_found: Annotated[bool, typer.Option(help="Not-found is not an error.")] = False,
    dry_run: DryRunOpt = None,
) -> None:
    """Delete objects by name, manifest, label selector or --all."""
    from kctl.api.errors import NotFound, Timeout

    if cascade not in CASCADE:
        raise typer.BadParameter("must be background, foreground or orphan", param_hint="'--cascade'")
    if force and grace_period is None:
        grace_period = 0
    server = connect.api()
    dry = dry_run not in (None, "none")
    suffix = " (dry run)" if dry_run == "client" else " (server dry run)" if dry else ""
    pending = []
    for rt, obj in _objects(resources, filename, recursive, namespace, selector, all_, all_namespaces,
                            ignore_not_found):
        meta = obj["metadata"]
        try:
            if dry_run != "client":
                server.delete(rt, meta["name"], namespace=meta.get("namespace"), propagation=CASCADE[cascade],
                              grace_period=grace_period, dry_run=dry)
        except NotFound:
            if ignore_not_found:
                continue
            raise
        print(f'{rt.kind.lower()}{"." + rt.group if rt.group else ""} "{meta["name"]}" deleted{suffix}')
        pending.append((rt, meta))
    if wait and not dry:
        deadline = time.monotonic() + timeout if timeout else None
        for rt, meta in pending:
            while server.store.get(rt.group_kind, meta.get("namespace", ""), meta["name"]) is not None:
                if deadline and time.monotonic() > deadline:
                    raise Timeout(f'timed out waiting for {connect.ref(rt, meta["name"])} to be deleted')
                time.sleep(0.05)


@app.command()
def patch(
    resources: ResourcesArg = None,
    patch_: Annotated[str, typer.Option("--patch", "-p", help="The patch, as JSON or YAML.")] = "",
    type_: Annotated[str, typer.Option("--type", help="strategic | merge | json")] = "strategic",
    namespace: NamespaceOpt = None,
    subresource: Annotated[Optional[str], typer.Option(help="'status' to patch the status.")] = None,
    dry_run: DryRunOpt = None,
) -> None:
    """Change fields of an object with a strategic-merge, JSON-merge or JSON patch."""
    from kctl.cli.yamlio import load_documents

    if not patch_:
        raise typer.BadParameter("must specify -p to patch", param_hint="'-p'")
    if type_ not in ("strategic", "merge", "json"):
        raise typer.BadParameter("must be strategic, merge or json", param_hint="'--type'")
    docs = load_documents(patch_, source="--patch")
    if len(docs) != 1:
        raise typer.BadParameter("must be one JSON or YAML document", param_hint="'-p'")
    body = docs[0][2]
    server = connect.api()
    for rt, names in connect.targets(resources or []):
        for name in names:
            before = server.get(rt, name, namespace=connect.namespace_arg(namespace))
            after = server.patch(rt, name, body, patch_type=type_, namespace=connect.namespace_arg(namespace),
                                 subresource=subresource, dry_run=dry_run not in (None, "none"))
            word = "patched" if after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"] \
                or dry_run else "patched (no change)"
            print(f"{connect.ref(rt, name)} {word}")


def _set_map(which: str, resources, pairs_and_names, namespace, selector, all_, overwrite, dry_run):
    """label/annotate: `k=v` sets, `k-` removes; an existing value needs --overwrite."""
    from kctl.api.errors import BadRequest

    args = list(resources or []) + list(pairs_and_names or [])
    changes = [a for a in args if "=" in a or (a.endswith("-") and "/" not in a and len(a) > 1)]
    targets_ = [a for a in args if a not in changes]
    if not changes:
        raise typer.BadParameter(f"at least one {which[:-1]} update is required")
    sets = {}
    removes = []
    for c in changes:
        if "=" in c:
            k, _, v = c.partition("=")
            sets[k] = v
        else:
            removes.append(c[:-1])
    server = connect.api()
    verb = "labeled" if which == "labels" else "annotated"
    for rt, obj in _objects(targets_, [], False, namespace, selector, all_):
        current = obj["metadata"].get(which) or {}
        for k, v in sets.items():
            if k in current and current[k] != v and not overwrite:
                raise BadRequest(f"'{k}' already has a value ({current[k]}), and --overwrite is false")
        patch_body = {"metadata": {which: {**{k: v for k, v in sets.items()}, **{k: None for k in removes}}}}
        server.patch(rt, obj["metadata"]["name"], patch_body, patch_type="merge",
                     namespace=obj["metadata"].get("namespace"), dry_run=dry_run not in (None, "none"))
        print(f"{connect.ref(rt, obj['metadata']['name'])} {verb}")


@app.command()
def label(
    resources: Annotated[list[str], typer.Argument(help="TYPE NAME k=v k2- ... or TYPE/NAME k=v")] = None,
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
    all_: AllOpt = False,
    overwrite: Annotated[bool, typer.Option(help="Allow changing an existing label.")] = False,
    dry_run: DryRunOpt = None,
) -> None:
    """Add, change (--overwrite) or remove (key-) labels."""
    _set_map("labels", resources, [], namespace, selector, all_, overwrite, dry_run)


@app.command()
def annotate(
    resources: Annotated[list[str], typer.Argument(help="TYPE NAME k=v k2- ... or TYPE/NAME k=v")] = None,
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
    all_: AllOpt = False,
    overwrite: Annotated[bool, typer.Option(help="Allow changing an existing annotation.")] = False,
    dry_run: DryRunOpt = None,
) -> None:
    """Add, change (--overwrite) or remove (key-) annotations."""
    _set_map("annotations", resources, [], namespace, selector, all_, overwrite, dry_run)


@app.command()
def edit(
    resources: ResourcesArg = None,
    namespace: NamespaceOpt = None,
    output: Annotated[str, typer.Option("--output", "-o", help="yaml or json in the editor.")] = "yaml",
) -> None:
    """Edit an object in $KUBE_EDITOR / $EDITOR (default vi) and store the result."""
    import os
    import shlex
    import subprocess
    import tempfile

    from kctl.cli.yamlio import dump_json, dump_yaml, load_documents

    server = connect.api()
    for rt, obj in _objects(resources, [], False, namespace, None, False):
        editor = shlex.split(os.environ.get("KUBE_EDITOR") or os.environ.get("EDITOR") or "vi")
        text = dump_json(obj) if output == "json" else dump_yaml(obj)
        fd, path = tempfile.mkstemp(prefix="kctl-edit-", suffix="." + output)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            status = subprocess.run([*editor, path]).returncode
            if status != 0:
                print(f"error: editor {editor[0]} exited with status {status}; nothing changed", file=sys.stderr)
                raise typer.Exit(1)
            with open(path, encoding="utf-8") as fh:
                edited = fh.read()
        finally:
            os.unlink(path)
        if edited == text:
            print("Edit cancelled, no changes made.")
            continue
        docs = load_documents(edited, source=path)
        if len(docs) != 1 or not isinstance(docs[0][2], dict):
            print("error: the edited file must hold exactly one object; nothing changed", file=sys.stderr)
            raise typer.Exit(6)
        new = docs[0][2]
        new.setdefault("metadata", {})["resourceVersion"] = obj["metadata"]["resourceVersion"]
        server.update(new, namespace=obj["metadata"].get("namespace"))
        print(f"{connect.ref(rt, obj['metadata']['name'])} edited")
