"""`kctl audit`: the audit log of the store's writes, as a table or as JSON.

Reads the log kctl.apiserver.audit writes beside the store (with its rotated files), filters
it (--since, --user, --verb, --kind, -n) and prints one row per write, oldest first; or
an `audit.k8s.io/v1` EventList with `-o json`. With --server the command runs on the
control host over SSH, where the log is.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Annotated, Optional

import typer

from kctl.cli import connect

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

HEADERS = ("TIME", "USER", "VERB", "NAMESPACE", "OBJECT", "RV", "CODE", "CLIENT")


def _fail(message: str) -> typer.Exit:
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(1)


def _resource_matcher(kind: str):
    """A test on an event's objectRef for --kind (plural, singular, short name or Kind)."""
    from kctl.machinery.errors import APIError
    from kctl.machinery.resources import builtin_registry

    rt = None
    try:
        rt = builtin_registry().lookup(kind)
    except APIError:
        try:
            rt = connect.api().resource(kind)  # a custom kind, from the store's CRDs
        except Exception:  # noqa: BLE001 - an unknown kind still filters by its name
            rt = None
    if rt is not None:
        return lambda ref: ref.get("resource") == rt.plural and (ref.get("apiGroup") or "") == rt.group
    wanted = kind.lower()
    return lambda ref: wanted in (ref.get("resource", ""), ref.get("resource", "").rstrip("s"))


def _since_cutoff(since: str) -> str:
    from kctl.machinery.times import parse_duration

    try:
        seconds = parse_duration(since)
    except ValueError as exc:
        raise _fail(f"invalid argument \"{since}\" for \"--since\" flag: {exc}") from None
    if seconds < 0:
        raise _fail('--since must be a positive duration')
    cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=seconds)
    return cutoff.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _object(ref: dict) -> str:
    resource = ref.get("resource", "")
    group = ref.get("apiGroup") or ""
    kind = f"{resource}.{group}" if group else resource
    if ref.get("subresource"):
        kind += f"/{ref['subresource']}"
    return f"{kind}/{ref.get('name', '')}" if ref.get("name") else kind


def _row(record: dict) -> list[str]:
    ref = record.get("objectRef") or {}
    status = record.get("responseStatus") or {}
    when = str(record.get("requestReceivedTimestamp", ""))[:19].replace("T", " ")
    code = str(status.get("code", ""))
    if status.get("reason"):
        code += f" {status['reason']}"
    return [when, str((record.get("user") or {}).get("username", "")), str(record.get("verb", "")),
            ref.get("namespace") or "", _object(ref), str(ref.get("resourceVersion") or ""), code,
            str(record.get("userAgent", ""))]


def _print_table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    for row in rows:
        print("   ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


@app.command()
def audit(
    since: Annotated[Optional[str], typer.Option("--since", help="Only writes newer than a duration: 10m, 1h.")] = None,
    user: Annotated[Optional[str], typer.Option("--user", help="Only writes by this user.")] = None,
    verb: Annotated[Optional[str], typer.Option(
        "--verb", help="Only this verb: create, update, patch or delete.")] = None,
    kind: Annotated[Optional[str], typer.Option("--kind", help="Only this kind (plural, short name or Kind).")] = None,
    namespace: Annotated[Optional[str], typer.Option("--namespace", "-n", help="Only this namespace.")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Output format: json (default: a table).")]
    = None,
) -> None:
    """Show the audit log: who wrote what, when, from which client, and the answer (never object data)."""
    if output not in (None, "json", "table"):
        raise _fail(f'unable to match a printer suitable for the output format "{output}", allowed formats '
                    'are: json,table')
    if connect.current().https:
        raise _fail("the audit log is kept beside the store on the control host; the Kubernetes API does not serve "
                    "it: run `kctl audit` there (or with --server ssh://...)")
    if connect.current().server_url:
        _on_server(since, user, verb, kind, namespace, output)
    from kctl.apiserver import audit as audit_log

    path = audit_log.path_for_store(connect.local_path())
    if path is None:
        raise _fail("the audit log is off (KCTL_AUDIT_LOG=off)")
    cutoff = _since_cutoff(since) if since else None
    matches_kind = _resource_matcher(kind) if kind else None
    selected = []
    for record in audit_log.read_events(path):
        ref = record.get("objectRef") or {}
        if cutoff and str(record.get("requestReceivedTimestamp", "")) < cutoff:
            continue
        if user is not None and (record.get("user") or {}).get("username") != user:
            continue
        if verb is not None and record.get("verb") != verb.lower():
            continue
        if namespace is not None and (ref.get("namespace") or "") != namespace:
            continue
        if matches_kind is not None and not matches_kind(ref):
            continue
        selected.append(record)
    if output == "json":
        print(json.dumps({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "metadata": {}, "items": selected},
                         indent=4, ensure_ascii=False))
        return
    if not selected:
        print("No audit events found.", file=sys.stderr)
        return
    _print_table([list(HEADERS), *(_row(r) for r in selected)])


def _on_server(since, user, verb, kind, namespace, output) -> None:
    """With --server: the log is on the control host; run `kctl audit` there over SSH."""
    import subprocess

    from kctl.apiserver.remote import ssh_kctl_command

    args = ["audit"]
    for flag, value in (("--since", since), ("--user", user), ("--verb", verb), ("--kind", kind),
                        ("--namespace", namespace), ("--output", output)):
        if value is not None:
            args += [flag, value]
    argv = ssh_kctl_command(connect.current().server_url, args, identity=connect.current().identity)
    raise typer.Exit(subprocess.run(argv).returncode)
