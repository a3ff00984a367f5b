"""`kctl autoscale`: a HorizontalPodAutoscaler for a Deployment, ReplicaSet or StatefulSet.

Reads the target through the API (TYPE NAME, TYPE/NAME or -f), asks kctl.ops.autoscale for
the HPA kubectl's generator makes, then creates it (the daemon's horizontal-pod-autoscaler
controller acts on it) or, with --dry-run=client, prints it as kubectl does without writing.
Prints `horizontalpodautoscaler.autoscaling/NAME autoscaled`, or the object with -o yaml|json|name.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kctl.cli import connect

#: this module's commands; kctl.cli.root mounts them (COMMANDS)
app = typer.Typer()

REF = "horizontalpodautoscaler.autoscaling"


def _fail(message: str, *, code: int = 1) -> typer.Exit:
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(code)


def _print(obj: dict, output: str, *, ordered: bool = False) -> None:
    from kctl.manifests.writer import dump_json, dump_yaml
    from kctl.output.keyorder import sorted_keys
    from kctl.output.printers import without_managed_fields

    obj = without_managed_fields(obj)  # as kubectl prints objects
    if output == "json":
        sys.stdout.write(dump_json(obj if ordered else sorted_keys(obj)))
    else:
        sys.stdout.write(dump_yaml(sorted_keys(obj)))


@app.command()
def autoscale(
    resource: Annotated[Optional[list[str]], typer.Argument(
        help="TYPE NAME or TYPE/NAME (deployment, replicaset, statefulset).")] = None,
    max_replicas: Annotated[Optional[int], typer.Option(
        "--max", help="The most pods the autoscaler may set. Required.")] = None,
    min_replicas: Annotated[int, typer.Option(
        "--min", help="The fewest pods the autoscaler may set (not given or negative: the server's default, 1).")] = -1,
    cpu_percent: Annotated[int, typer.Option(
        "--cpu-percent", help="Target average cpu use over all the pods, in percent of their cpu requests "
                              "(not given or negative: the server's default, 80).")] = -1,
    name: Annotated[Optional[str], typer.Option("--name", help="The HPA's name (default: the target's).")] = None,
    filename: Annotated[list[str], typer.Option(
        "--filename", "-f", help="The object this manifest names (instead of TYPE NAME).")] = [],
    namespace: Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")] = None,
    dry_run: Annotated[Optional[str], typer.Option(
        "--dry-run", help="'client' (print, write nothing) or 'server' (admitted, not stored).")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="yaml | json | name.")] = None,
) -> None:
    """Create a HorizontalPodAutoscaler that scales a Deployment, ReplicaSet or StatefulSet to its pods' cpu use.

    The autoscaler keeps the target between --min and --max pods, aiming at --cpu-percent of
    the pods' cpu requests (the daemon's horizontal-pod-autoscaler controller acts on it, from
    the usage the node agents sample: see docs/metrics.md).
    """
    from kctl.cli.modify import named_objects
    from kctl.ops.autoscale import (AutoscaleError, as_printed, check_options, check_target,
                                    horizontal_pod_autoscaler)

    if max_replicas is None:
        raise _fail('required flag(s) "max" not set')
    if dry_run not in (None, "none", "client", "server"):
        raise _fail(f'Invalid dry-run value ({dry_run}). Must be "none", "server", or "client".', code=2)
    fmt = (output or "").lstrip("=") or None
    if fmt not in (None, "yaml", "json", "name"):
        raise _fail(f'unable to match a printer suitable for the output format "{fmt}", allowed formats are: '
                    "json, name, yaml", code=2)
    words = list(resource or [])
    if not words and not filename:
        raise _fail("You must provide the resource to autoscale as TYPE NAME or TYPE/NAME, e.g. deployment web",
                    code=2)
    try:
        check_options(min_replicas=min_replicas, max_replicas=max_replicas)
    except AutoscaleError as exc:
        raise _fail(str(exc)) from None
    api = connect.api()
    targets = named_objects(words, filename, False, namespace, None, False)
    if not targets:
        raise _fail("no objects passed to autoscale")
    for rt, obj in targets:
        try:
            check_target(rt)
        except AutoscaleError as exc:
            raise _fail(str(exc)) from None
        hpa = horizontal_pod_autoscaler(rt, obj["metadata"]["name"], name=name, min_replicas=min_replicas,
                                        max_replicas=max_replicas, cpu_percent=cpu_percent, namespace=namespace)
        ref = f"{REF}/{hpa['metadata']['name']}"
        if dry_run == "client":
            if fmt == "name":
                print(ref)
            elif fmt:
                _print(as_printed(hpa), fmt, ordered=True)
            else:
                print(f"{ref} created (dry run)")
            continue
        created = api.create(hpa, namespace=obj["metadata"].get("namespace") or namespace,
                             dry_run=dry_run == "server")
        if fmt == "name":
            print(ref)
        elif fmt:
            _print(created, fmt)
        else:
            print(f"{ref} autoscaled" + (" (server dry run)" if dry_run == "server" else ""))


__all__ = ["app", "autoscale"]
