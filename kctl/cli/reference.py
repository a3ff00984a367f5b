"""`kctl explain`, `api-resources`, `version` and `completion`: what kctl knows."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kctl import __version__
from kctl.cli import connect
from kctl.cli.main import app


@app.command()
def explain(
    field: Annotated[str, typer.Argument(help="KIND or KIND.field.path, e.g. deployment.spec.strategy")],
    recursive: Annotated[bool, typer.Option(help="Show every field below, not only the first level.")] = False,
) -> None:
    """Describe a kind's fields, from its schema."""
    from kctl.admission.explain import explain as render

    kind, *path = field.split(".")
    server = connect.api()
    rt = server.resource(kind)
    print(render(rt, path, recursive=recursive).rstrip("\n"))


@app.command("api-resources")
def api_resources(
    namespaced: Annotated[Optional[bool], typer.Option(help="Only namespaced (true) or cluster (false) kinds.")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="'name' for names only.")] = None,
) -> None:
    """List the kinds kctl serves, built-in and from CustomResourceDefinitions."""
    rows = [("NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND")]
    for rt in connect.api().registry:
        if namespaced is not None and rt.namespaced != namespaced:
            continue
        if output == "name":
            print(rt.group_resource)
            continue
        rows.append((rt.plural, ",".join(rt.short_names), rt.api_version, str(rt.namespaced).lower(), rt.kind))
    if output != "name":
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for r in rows:
            print("   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


@app.command()
def version(
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="'json' for scripts.")] = None,
) -> None:
    """Print kctl's version, the Kubernetes API its schemas follow, and the store."""
    import json

    server = connect.api()
    info = {"clientVersion": {"gitVersion": f"v{__version__}"},
            "kubernetesAPI": "1.37",
            "store": {"path": str(server.store.path), "revision": server.store.revision()}}
    if output == "json":
        print(json.dumps(info, indent=2))
        return
    print(f"Client Version: v{__version__}")
    print("Kubernetes API: 1.37 (schemas)")
    print(f"Store: {server.store.path} (revision {server.store.revision()})")


@app.command()
def completion(
    shell: Annotated[str, typer.Argument(help="bash, zsh, fish or powershell")],
) -> None:
    """Print a shell completion script: `source <(kctl completion bash)`."""
    from typer._completion_shared import get_completion_script

    if shell not in ("bash", "zsh", "fish", "powershell"):
        print(f'error: unsupported shell type "{shell}"', file=sys.stderr)
        raise typer.Exit(1)
    print(get_completion_script(prog_name="kctl", complete_var="_KCTL_COMPLETE", shell=shell))
