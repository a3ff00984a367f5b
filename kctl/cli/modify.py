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
from kctl.cli.durations import DURATION

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")]
SelectorOpt = Annotated[Optional[str], typer.Option("--selector", "-l", help="Label selector.")]
AllOpt = Annotated[bool, typer.Option("--all", help="Every object of the type in the namespace.")]
DryRunOpt = Annotated[Optional[str], typer.Option("--dry-run", help="'server' or 'client': change nothing.")]
ResourcesArg = Annotated[Optional[list[str]], typer.Argument(help="TYPE NAME... or TYPE/NAME...")]

CASCADE = {"background": "Background", "true": "Background", "foreground": "Foreground", "orphan": "Orphan",
           "false": "Orphan"}


def named_objects(resources, filename, recursive, namespace, selector, all_, all_namespaces=False,
             ignore_not_found=False):
    """(rt, obj) pairs named by TYPE NAME, TYPE/NAME, -f, -l or --all; the first missing name raises."""
    found, missing = _find(resources, filename, recursive, namespace, selector, all_, all_namespaces,
                           ignore_not_found)
    if missing:
        raise missing[0]
    return found


def _find(resources, filename, recursive, namespace, selector, all_, all_namespaces=False,
          ignore_not_found=False):
    """(found (rt, obj) pairs in order, NotFound errors of the names that do not exist)."""
    from kctl.machinery.errors import NotFound

    server = connect.api()
    found, missing = [], []
    if filename:
        from kctl.manifests.sources import read_manifests

        for doc in read_manifests(filename, recursive=recursive, stdin=sys.stdin.buffer):
            rt = server.resource_for(doc.obj)
            meta = doc.obj.get("metadata") or {}
            try:
                found.append((rt, server.get(rt, meta.get("name", ""), namespace=meta.get("namespace") or namespace)))
            except NotFound as exc:
                if not ignore_not_found:
                    missing.append(exc)
        return found, missing
    for rt, names in connect.targets(resources or []):
        if not names and not selector and not all_:
            raise typer.BadParameter(f'resource(s) were provided, but no name was specified for "{rt.plural}"; '
                                     "give names, -l SELECTOR or --all")
        ns = None if all_namespaces else connect.namespace_arg(namespace)
        if names:
            for name in names:
                try:
                    found.append((rt, server.get(rt, name, namespace=ns or "default")))
                except NotFound as exc:
                    if not ignore_not_found:
                        missing.append(exc)
            continue
        from kctl.machinery.selectors import parse_label_selector

        labels = parse_label_selector(selector) if selector else None
        objs, _ = server.list(rt, namespace=ns, label_selector=labels)
        found.extend((rt, o) for o in objs)
    return found, missing


def _report_missing(missing: list, done: int) -> int:
    """Print each missing name's error; the exit status: 1 when others succeeded (kubectl), else the error's."""
    for exc in missing:
        print(f"Error from server ({exc.reason}): {exc.message}", file=sys.stderr)
    if not missing:
        return 0
    return 1 if done else missing[0].exit_code


@app.command()
def delete(
    resources: ResourcesArg = None,
    filename: Annotated[list[str], typer.Option("--filename", "-f", help="Delete what these manifests name.")] = [],
    recursive: Annotated[bool, typer.Option("--recursive", "-R", help="Process directories recursively.")] = False,
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
    all_: AllOpt = False,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A",
                                                 help="With -l/--all: every namespace.")] = False,
    cascade: Annotated[str, typer.Option(
        help="background | foreground | orphan: what happens to dependents.")] = "background",
    wait: Annotated[bool, typer.Option(help="Wait until the objects are gone (finalizers done).")] = True,
    timeout: Annotated[float, typer.Option(
        click_type=DURATION, help="How long to wait with --wait (Go duration: 30s, 1m; 0: forever).")] = 0,
    grace_period: Annotated[Optional[int], typer.Option(help="Seconds a pod gets to stop (0: at once).")] = None,
    force: Annotated[bool, typer.Option(
        help="With --grace-period=0: remove pods without waiting for their node.")] = False,
    ignore_not_found: Annotated[bool, typer.Option(help="Not-found is not an error.")] = False,
    dry_run: DryRunOpt = None,
) -> None:
    """Delete objects by name, manifest, label selector or --all."""
    from kctl.machinery.errors import NotFound, Timeout

    if cascade not in CASCADE:
        raise typer.BadParameter("must be background, foreground or orphan", param_hint="'--cascade'")
    if force and grace_period is None:
        grace_period = 0
    server = connect.api()
    dry = dry_run not in (None, "none")
    suffix = " (dry run)" if dry_run == "client" else " (server dry run)" if dry else ""
    pending = []
    found, missing = _find(resources, filename, recursive, namespace, selector, all_, all_namespaces,
                           ignore_not_found)
    for rt, obj in found:
        meta = obj["metadata"]
        try:
            if dry_run != "client":
                server.delete(rt, meta["name"], namespace=meta.get("namespace"), propagation=CASCADE[cascade],
                              grace_period=grace_period, dry_run=dry)
        except NotFound as exc:
            if not ignore_not_found:
                missing.append(exc)
            continue
        print(f'{rt.kind.lower()}{"." + rt.group if rt.group else ""} "{meta["name"]}" deleted{suffix}')
        pending.append((rt, meta))
    code = _report_missing(missing, len(pending))
    if wait and not dry:
        deadline = time.monotonic() + timeout if timeout else None
        for rt, meta in pending:
            while server.find(rt, meta["name"], namespace=meta.get("namespace") or None) is not None:
                if deadline and time.monotonic() > deadline:
                    raise Timeout(f'timed out waiting for {connect.ref(rt, meta["name"])} to be deleted')
                time.sleep(0.05)
    if code:
        raise typer.Exit(code)


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
    from kctl.manifests.yamlio import load_documents

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
    from kctl.machinery.errors import ClientSideError

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
    found, missing = _find(targets_, [], False, namespace, selector, all_)
    for rt, obj in found:
        current = obj["metadata"].get(which) or {}
        for k, v in sets.items():
            if k in current and current[k] != v and not overwrite:
                raise ClientSideError(f"'{k}' already has a value ({current[k]}), and --overwrite is false")
        patch_body = {"metadata": {which: {**{k: v for k, v in sets.items()}, **{k: None for k in removes}}}}
        server.patch(rt, obj["metadata"]["name"], patch_body, patch_type="merge",
                     namespace=obj["metadata"].get("namespace"), dry_run=dry_run not in (None, "none"))
        print(f"{connect.ref(rt, obj['metadata']['name'])} {verb}")
    code = _report_missing(missing, len(found))
    if code:
        raise typer.Exit(code)


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


#: what kubectl edit writes above the object (lines starting with '#' are dropped when read back)
EDIT_HEADER = ("# Please edit the object below. Lines beginning with a '#' will be ignored,\n"
               "# and an empty file will abort the edit. If an error occurs while saving this file will be\n"
               "# reopened with the relevant failures.\n"
               "#\n")


@app.command()
def edit(
    resources: ResourcesArg = None,
    namespace: NamespaceOpt = None,
    output: Annotated[str, typer.Option("--output", "-o", help="yaml or json in the editor.")] = "yaml",
) -> None:
    """Edit an object in $KUBE_EDITOR / $EDITOR (default vi) and store the result.

    A refused edit (bad YAML, a change the API rejects) reopens the editor with the error
    on top and the edits kept; saving it again unchanged gives up and keeps a copy.
    """
    import os
    import shlex

    if output not in ("yaml", "json"):
        raise typer.BadParameter("must be yaml or json", param_hint="'-o'")
    editor = shlex.split(os.environ.get("KUBE_EDITOR") or os.environ.get("EDITOR") or "vi")
    server = connect.api()
    for rt, obj in named_objects(resources, [], False, namespace, None, False):
        code = _edit_one(server, rt, obj, output=output, editor=editor)
        if code:
            raise typer.Exit(code)


def _edit_one(server, rt, obj: dict, *, output: str, editor: list[str]) -> int:
    """kubectl's edit loop for one object; the exit status (0: saved or cancelled)."""
    import os
    import tempfile

    from kctl.output.keyorder import sorted_keys
    from kctl.manifests.writer import dump_json, dump_yaml

    from kctl.output.printers import without_managed_fields

    shown = sorted_keys(without_managed_fields(obj))  # kubectl's order and fields, as `get -o yaml`
    original = dump_json(shown) if output == "json" else dump_yaml(shown)
    content, errors, last_failed = original, [], None
    fd, path = tempfile.mkstemp(prefix="kctl-edit-", suffix="." + output)
    os.close(fd)
    keep = False
    try:
        while True:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(EDIT_HEADER + "".join(f"# {line}\n" for error in errors for line in error.splitlines())
                         + ("#\n" if errors else "") + content)
            status = _run_editor(editor, path)
            with open(path, encoding="utf-8") as fh:
                edited = _without_comments(fh.read())
            if status != 0:
                print(f"error: editor {editor[0]} exited with status {status}; nothing changed", file=sys.stderr)
                keep = edited != original and _preserve(path)
                return 1
            if last_failed is not None and edited == last_failed:
                keep = _preserve(path)
                print("error: Edit cancelled, no valid changes were saved.", file=sys.stderr)
                return 1
            if not edited.strip() or edited == original:
                print("Edit cancelled, no changes made.")
                return 0
            errors = _save_edit(server, rt, obj, edited)
            if not errors:
                print(f"{connect.ref(rt, obj['metadata']['name'])} edited")
                return 0
            content, last_failed = edited, edited
    finally:
        if not keep:
            os.unlink(path)


def _run_editor(editor: list[str], path: str) -> int:
    import subprocess

    try:
        return subprocess.run([*editor, path]).returncode
    except OSError as exc:
        print(f"error: cannot run editor {editor[0]}: {exc.strerror}", file=sys.stderr)
        return 127


def _without_comments(text: str) -> str:
    """The file as the user left it, without kubectl's comment lines."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("#"))


def _preserve(path: str) -> bool:
    print(f'A copy of your changes has been stored to "{path}"', file=sys.stderr)
    return True


def _save_edit(server, rt, obj: dict, edited: str) -> list[str]:
    """Store the edited text as a merge patch on the live object; on failure, the lines saying why."""
    from kctl.machinery.errors import APIError, Invalid
    from kctl.machinery.patch import create_merge_patch
    from kctl.manifests.errors import ManifestError
    from kctl.manifests.yamlio import load_documents

    meta = obj["metadata"]
    try:
        docs = load_documents(edited, source="the edited file")
    except ManifestError as exc:
        return [f"The edited file had a syntax error: {exc}"]
    if len(docs) != 1 or not isinstance(docs[0][2], dict):
        return ["The edited file had a syntax error: it must hold exactly one object"]
    new = docs[0][2]
    new_meta = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
    if (new.get("apiVersion"), new.get("kind"), new_meta.get("name")) != \
            (obj.get("apiVersion"), obj.get("kind"), meta.get("name")):
        return ["error: At least one of apiVersion, kind and name was changed"]
    patch = create_merge_patch(obj, new)
    try:
        server.patch(rt, meta["name"], patch, patch_type="merge", namespace=meta.get("namespace") or None)
    except APIError as exc:
        causes = [str(c) for c in exc.causes] if isinstance(exc, Invalid) else [exc.message]
        return [f'{rt.group_resource} "{meta["name"]}" was not valid:'] + [f"* {c}" for c in causes]
    return []
