"""`kctl sync URL|PATH`, `kctl sync status`, `kctl sync delete`: git repositories as the source of truth.

`kctl sync URL` stores a GitSource (kctl.io/v1alpha1) from its flags, reconciles it at
once in this process with kctl.sync.reconcile.reconcile (the function the daemon's
GitSource controller runs), and prints one line per object as `kctl apply` does, then
`synced NAME at BRANCH@SHA12`. Without --once the daemon keeps the source in sync every
interval; with --once it is stored suspended, only to hold its inventory for the next
prune. `status` prints the sources (a table, or -o json|yaml for scripts); `delete`
deletes one, pruning its objects here and now when it prunes. `kctl diff --source NAME`
(kctl.cli.apply) uses `source_documents` below.

Heavy imports (git, rendering, the API) happen inside the commands: `kctl get` stays fast.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from typer.core import TyperGroup

from kctl.cli import connect

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.machinery.resources import ResourceType

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

RUN_COMMAND = "run"
#: spec fields an update leaves as they are when their flag is not given
KEPT_UNLESS_GIVEN = ("interval", "maxPrunePercent", "timeout")


class _SyncGroup(TyperGroup):
    """`kctl sync URL ...` means `kctl sync run URL ...`; `status` and `delete` are subcommands."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = [RUN_COMMAND, *args]
        return super().parse_args(ctx, args)


sync_app = typer.Typer(
    name="sync",
    cls=_SyncGroup,
    help="Keep the objects of a git repository (or folder) of manifests applied: `kctl sync URL|PATH [options]` "
         "(the `run` command), `kctl sync status`, `kctl sync delete NAME`.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(sync_app)

NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n",
                                                     help="Namespace of the GitSource (default: default).")]
_URL_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)
_SCP_LIKE = re.compile(r"^[^/:@]+@[^/:]+:")  # git@host:org/repo.git


def _fail(message: str, code: int = 1) -> typer.Exit:
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(code)


def is_remote(url: str) -> bool:
    """A URL git fetches over the network (or file://), rather than a local path."""
    return bool(_URL_SCHEME.match(url) or _SCP_LIKE.match(url))


def source_name(url: str) -> str:
    """A DNS-1123 name from the last part of a URL or path: `https://h/org/web-app.git` -> `web-app`."""
    last = re.split(r"[/:]", url.rstrip("/"))[-1]
    last = last[:-4] if last.endswith(".git") else last
    name = re.sub(r"[^a-z0-9-]+", "-", last.lower()).strip("-")[:63].strip("-")
    return name or "source"


def _spec(url: str, *, branch, revision, path, interval, prune, secret, mode, once, allow_empty, force,
          max_prune_percent, timeout) -> dict:
    """The spec fields `kctl sync` sets; None removes a field (false flags and defaults are left out)."""
    return {"url": url, "branch": branch or None, "revision": revision or None,
            "path": path if path not in (None, "", ".") else None, "interval": interval,
            "prune": True if prune else None, "secretRef": {"name": secret} if secret else None,
            "mode": mode if mode != "Apply" else None, "suspend": True if once else None,
            "allowEmpty": True if allow_empty else None, "force": True if force else None,
            "maxPrunePercent": max_prune_percent, "timeout": timeout}


def _store(api: API, rt: ResourceType, name: str, namespace: str, spec: dict) -> dict:
    """Create the GitSource, or merge the flags' spec into the existing one (other fields kept)."""
    from kctl.machinery.errors import NotFound

    try:
        current = api.get(rt, name, namespace=namespace)
    except NotFound:
        obj = {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": {"name": name, "namespace": namespace},
               "spec": {k: v for k, v in spec.items() if v is not None}}
        return api.create(obj)
    if current["metadata"].get("deletionTimestamp"):
        raise _fail(f'gitsource "{name}" is being deleted (its objects are being pruned): wait for it, or use '
                    f"another --name")
    present = {k: v for k, v in spec.items() if v is not None or k not in KEPT_UNLESS_GIVEN}
    return api.patch(rt, name, {"spec": present}, patch_type="merge", namespace=namespace)


def print_results(result, *, suffix: str = "") -> None:
    """One line per object, as `kctl apply` prints them; errors on stderr."""
    for r in result.results:
        if r.action == "error":
            print(f"error: {r.ref}: {r.message}", file=sys.stderr)
        elif r.action in ("skipped", "drifted") and r.message:
            print(f"{r.ref} {r.action} ({r.message}){suffix}")
        else:
            print(f"{r.ref} {r.action}{suffix}")


@sync_app.command(RUN_COMMAND)
def run(
    url: Annotated[str, typer.Argument(help="Repository URL (https://, ssh://, git@host:path, file://) or a local "
                                            "path: a git repository or a plain folder of manifests.")],
    name: Annotated[Optional[str], typer.Option(
        "--name", help="GitSource name (default: from the URL's last part).")] = None,
    namespace: NamespaceOpt = None,
    branch: Annotated[Optional[str], typer.Option(help="Branch to follow (default: the repository's HEAD).")] = None,
    revision: Annotated[Optional[str], typer.Option(
        help="Pin a commit or tag instead of following the branch.")] = None,
    path: Annotated[str, typer.Option("--path", help="Folder inside the repository to apply.")] = ".",
    prune: Annotated[bool, typer.Option(help="Delete what this source applied before and no longer holds.")] = False,
    interval: Annotated[Optional[str], typer.Option(
        help="How often the daemon re-syncs (30s, 1m, 1h; default 1m).")] = None,
    once: Annotated[bool, typer.Option(
        help="Sync now only; the daemon leaves the source alone (stored suspended).")] = False,
    secret: Annotated[Optional[str], typer.Option(
        help="Secret with username/password or identity/known_hosts.")] = None,
    mode: Annotated[str, typer.Option(help="Apply, or Report: only report drift, write nothing.")] = "Apply",
    allow_empty: Annotated[bool, typer.Option(help="Accept a revision that renders no object.")] = False,
    force: Annotated[bool, typer.Option(help="Allow this revision to prune more than maxPrunePercent (once).")] = False,
    max_prune_percent: Annotated[Optional[int], typer.Option(
        help="Refuse a revision that prunes more than this share of the inventory (default 50).")] = None,
    timeout: Annotated[Optional[str], typer.Option(help="How long fetching may take (default 2m).")] = None,
) -> None:
    """Store a GitSource for URL|PATH and sync it now; exit 1 with FILE:LINE: message when the revision fails."""
    from kctl.machinery.times import parse_duration
    from kctl.sync.controller import cache_dir_for
    from kctl.sync.reconcile import reconcile, short_revision

    if mode not in ("Apply", "Report"):
        raise typer.BadParameter(f'"{mode}": use Apply or Report', param_hint="'--mode'")
    for flag, value in (("--interval", interval), ("--timeout", timeout)):
        try:
            if value is not None:
                parse_duration(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=f"'{flag}'") from None
    if not is_remote(url):
        if not os.path.isdir(url):
            raise _fail(f"{url}: no such directory (and not a URL)")
        url = os.path.abspath(url)
    api = connect.api()
    rt = api.resource("gitsources")
    ns = connect.namespace_arg(namespace)
    name = name or source_name(url)
    _store(api, rt, name, ns, _spec(url, branch=branch, revision=revision, path=path, interval=interval,
                                    prune=prune, secret=secret, mode=mode, once=once, allow_empty=allow_empty,
                                    force=force, max_prune_percent=max_prune_percent, timeout=timeout))
    result = reconcile(api, f"{ns}/{name}", cache_dir=cache_dir_for(api))
    print_results(result)
    where = short_revision(result.revision) if result.revision else ""
    if mode == "Report" and result.reason in ("DriftDetected", "NoDrift"):
        print(f"{'drift in' if result.reason == 'DriftDetected' else 'no drift in'} {name} at {where}")
        if result.reason == "DriftDetected":
            raise typer.Exit(1)
        return
    if not result.ready:
        raise _fail(f"{name}: {result.error_line()}" if result.reason == "DependencyNotReady"
                    else result.error_line())
    print(f"synced {name} at {where}")


@sync_app.command("status")
def status(
    name: Annotated[Optional[str], typer.Argument(help="A GitSource (default: all of them).")] = None,
    namespace: NamespaceOpt = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Across all namespaces.")] = False,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", help="json|yaml: the sources' status, for scripts.")] = None,
) -> None:
    """Show each source: URL, the revision applied, Ready, its message (or the failure) and age."""
    api = connect.api()
    rt = api.resource("gitsources")
    ns = None if all_namespaces else connect.namespace_arg(namespace)
    sources = [api.get(rt, name, namespace=ns or "default")] if name else api.list(rt, namespace=ns)[0]
    if output in ("json", "yaml"):
        from kctl.manifests import writer

        data = [status_summary(s) for s in sources]
        text = writer.dump_json(data) if output == "json" else writer.dump_yaml(data)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    if output not in (None, "", "wide"):
        raise typer.BadParameter(f'"{output}": use json or yaml', param_hint="'-o'")
    from kctl.output.formats import parse_output
    from kctl.output.printers import print_objects

    print_objects(sources, rt, parse_output(output), sys.stdout, namespace=ns, all_namespaces=all_namespaces)


def status_summary(source: dict) -> dict:
    """What scripts want of a source: where it points, whether it is Ready, what it applied, any error."""
    from kctl.sync.reconcile import condition

    meta, spec, status = source["metadata"], source.get("spec") or {}, source.get("status") or {}
    ready = condition(status.get("conditions"), "Ready") or {}
    out = {"name": meta["name"], "namespace": meta.get("namespace"), "url": spec.get("url"),
           "branch": spec.get("branch"), "revision": spec.get("revision"), "path": spec.get("path") or ".",
           "suspended": bool(spec.get("suspend")), "ready": ready.get("status") == "True",
           "reason": ready.get("reason"), "message": ready.get("message"),
           "generation": meta.get("generation"), "observedGeneration": status.get("observedGeneration")}
    for key in ("lastAppliedRevision", "lastAppliedTime", "lastAttemptedRevision", "error", "results"):
        if key in status:
            out[key] = status[key]
    out["inventoryCount"] = len(status.get("inventory") or ())
    return out


@sync_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="The GitSource to delete.")],
    namespace: NamespaceOpt = None,
    keep: Annotated[bool, typer.Option(help="Leave the objects it applied in place, even when it prunes.")] = False,
) -> None:
    """Delete a GitSource; one with prune: true first deletes every object it applied (here, now)."""
    from kctl.sync.controller import cache_dir_for
    from kctl.sync.inventory import PRUNE_FINALIZER
    from kctl.sync.reconcile import reconcile

    api = connect.api()
    rt = api.resource("gitsources")
    ns = connect.namespace_arg(namespace)
    source = api.get(rt, name, namespace=ns)
    finalizers = source["metadata"].get("finalizers") or []
    if keep and PRUNE_FINALIZER in finalizers:
        rest = [f for f in finalizers if f != PRUNE_FINALIZER]
        api.patch(rt, name, {"metadata": {"finalizers": rest or None}}, patch_type="merge", namespace=ns)
    api.delete(rt, name, namespace=ns)
    if not keep and PRUNE_FINALIZER in finalizers:
        result = reconcile(api, f"{ns}/{name}", cache_dir=cache_dir_for(api))
        print_results(result)
        if result.reason == "PruneFailed":
            raise _fail(f"{name}: {result.message}")
    print(f"gitsource.kctl.io/{name} deleted")


def source_documents(name: str, namespace: Optional[str]):
    """(documents as the source's current revision would apply them, live objects it would prune), for diff."""
    from dataclasses import replace

    from kctl.sync.controller import cache_dir_for
    from kctl.sync.reconcile import SourceError, desired_objects

    api = connect.api()
    source = api.get(api.resource("gitsources"), name, namespace=connect.namespace_arg(namespace))
    try:
        desired = desired_objects(api, source, cache_dir=cache_dir_for(api))
    except SourceError as exc:
        raise _fail(f"{name}: {exc}", code=2) from None
    return [replace(item, obj=obj) for item, obj in desired.documents], desired.pruned
