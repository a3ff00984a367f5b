"""`kctl expose`: a Service for a Deployment, ReplicaSet, Pod, Service or ReplicationController.

Reads the object through the API, asks kctl.ops.expose for the Service kubectl would make,
then creates it (the API layer allocates its ClusterIP and node ports) or, with
--dry-run=client, prints it as kubectl does without writing. Prints `service/NAME exposed`,
or the object with -o yaml|json|name.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kctl.cli import connect

#: this module's commands; kctl.cli.root mounts them (COMMANDS)
app = typer.Typer()


def _fail(message: str, *, code: int = 1) -> typer.Exit:
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(code)


def _target(resource: list[str]) -> tuple[str, str]:
    """(type, name) from `TYPE NAME` or `TYPE/NAME`."""
    if len(resource) == 1 and "/" in resource[0]:
        kind, _, name = resource[0].partition("/")
        if kind and name:
            return kind, name
    if len(resource) == 2 and "/" not in resource[0]:
        return resource[0], resource[1]
    raise _fail("You must provide the resource to expose as TYPE NAME or TYPE/NAME, e.g. deployment web",
                code=2)


def _print(obj: dict, output: str) -> None:
    from kctl.manifests.writer import dump_json, dump_yaml
    from kctl.output.keyorder import sorted_keys

    from kctl.output.printers import without_managed_fields

    body = sorted_keys(without_managed_fields(obj))
    sys.stdout.write(dump_json(body) if output == "json" else dump_yaml(body))


@app.command()
def expose(
    resource: Annotated[list[str], typer.Argument(help="TYPE NAME or TYPE/NAME (deployment, replicaset, pod, "
                                                       "service, replicationcontroller).")],
    port: Annotated[Optional[str], typer.Option(
        "--port", help="The port the Service serves on (default: the object's ports; several: 80,443).")] = None,
    target_port: Annotated[Optional[str], typer.Option(
        "--target-port", help="Name or number of the port on the pods traffic goes to (default: --port).")] = None,
    protocol: Annotated[Optional[str], typer.Option(
        "--protocol", help="TCP, UDP or SCTP (default: each container port's own, else TCP).")] = None,
    type_: Annotated[Optional[str], typer.Option(
        "--type", help="ClusterIP (default), NodePort, LoadBalancer or ExternalName.")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="The Service's name (default: the object's).")] = None,
    selector: Annotated[Optional[str], typer.Option(
        "--selector", help="Pod selector k=v[,k=v] (default: the object's; a Pod's labels).")] = None,
    labels: Annotated[Optional[str], typer.Option(
        "--labels", "-l", help="The Service's labels k=v[,k=v] (default: the object's labels).")] = None,
    cluster_ip: Annotated[Optional[str], typer.Option(
        "--cluster-ip", help="The ClusterIP to ask for; 'None' makes a headless Service.")] = None,
    external_ip: Annotated[Optional[str], typer.Option(
        "--external-ip", help="An external IP the Service also answers on.")] = None,
    session_affinity: Annotated[Optional[str], typer.Option(
        "--session-affinity", help="None or ClientIP.")] = None,
    namespace: Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")] = None,
    dry_run: Annotated[Optional[str], typer.Option(
        "--dry-run", help="'client' (print, write nothing) or 'server' (admitted and allocated, not stored).")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="yaml | json | name.")] = None,
) -> None:
    """Create a Service that sends traffic to the pods of a Deployment, ReplicaSet, Pod or Service.

    The selector, ports and labels come from the object unless given; the API layer
    allocates the ClusterIP (and node ports for NodePort and LoadBalancer), as
    kube-apiserver does.
    """
    from kctl.ops.expose import ExposeError, ExposeOptions, service_for

    if dry_run not in (None, "none", "client", "server"):
        raise _fail(f'Invalid dry-run value ({dry_run}). Must be "none", "server", or "client".', code=2)
    fmt = (output or "").lstrip("=") or None
    if fmt not in (None, "yaml", "json", "name"):
        raise _fail(f'unable to match a printer suitable for the output format "{fmt}", allowed formats are: '
                    "json, name, yaml", code=2)
    kind, target = _target(resource)
    api = connect.api()
    rt = api.resource(kind)
    obj = api.get(rt, target, namespace=namespace)  # NotFound: the CLI's edge prints it
    options = ExposeOptions(port=port, target_port=target_port, protocol=protocol, type=type_, name=name,
                            selector=selector, labels=labels, cluster_ip=cluster_ip, external_ip=external_ip,
                            session_affinity=session_affinity)
    try:
        service = service_for(obj, rt.group_kind, options)
    except ExposeError as exc:
        raise _fail(str(exc)) from None
    ref = f"service/{service['metadata']['name']}"
    if dry_run == "client":
        if namespace:
            service["metadata"]["namespace"] = namespace
        service["metadata"]["creationTimestamp"] = None
        service["status"] = {"loadBalancer": {}}
        if fmt == "name":
            print(ref)
        elif fmt:
            _print(service, fmt)
        else:
            print(f"{ref} exposed (dry run)")
        return
    created = api.create(service, namespace=namespace, dry_run=dry_run == "server")
    if fmt == "name":
        print(ref)
    elif fmt:
        _print(created, fmt)
    else:
        print(f"{ref} exposed" + (" (server dry run)" if dry_run == "server" else ""))


__all__ = ["app", "expose"]
