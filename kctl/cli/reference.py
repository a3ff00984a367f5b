"""`kctl explain`, `api-resources`, `version` and `completion` (its script from kctl.cli.completion):
what kctl knows."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kctl.cli import connect

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()


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


#: kubectl's "all" category (`kctl get all`)
_ALL_CATEGORY = frozenset({"Pod", "ReplicationController", "Service", "DaemonSet.apps", "Deployment.apps",
                           "ReplicaSet.apps", "StatefulSet.apps", "HorizontalPodAutoscaler.autoscaling",
                           "Job.batch", "CronJob.batch"})
_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


def _verbs(rt) -> tuple[str, ...]:
    """The verbs kctl serves for a kind (Namespaces have no deletecollection, as in Kubernetes)."""
    return tuple(v for v in _VERBS if not (v == "deletecollection" and rt.group_kind == "Namespace"))


def _categories(rt, crd_categories: dict[str, list[str]]) -> list[str]:
    if rt.is_custom:
        return crd_categories.get(rt.group_kind, [])
    return ["all"] if rt.group_kind in _ALL_CATEGORY else []


@app.command("api-resources")
def api_resources(
    namespaced: Annotated[Optional[bool], typer.Option(
        help="Only namespaced (true) or cluster-scoped (false) kinds.")] = None,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", help="'wide' adds VERBS and CATEGORIES; 'name' prints names only.")] = None,
    api_group: Annotated[Optional[str], typer.Option(
        "--api-group", help="Only kinds of this API group ('' for the core group).")] = None,
    verbs: Annotated[list[str], typer.Option("--verbs", help="Only kinds that support these verbs.")] = [],
    sort_by: Annotated[Optional[str], typer.Option("--sort-by", help="'name' or 'kind'.")] = None,
    no_headers: Annotated[bool, typer.Option(help="Omit the header line.")] = False,
) -> None:
    """List the kinds kctl serves, built-in and from CustomResourceDefinitions."""
    from kctl.machinery.errors import ClientSideError

    if output not in (None, "", "wide", "name"):
        raise ClientSideError(f'--output {output} is not available')
    if sort_by not in (None, "", "name", "kind"):
        raise ClientSideError(f'"{sort_by}" is not a valid sort-by field; use "name" or "kind"')
    server = connect.api()
    wanted_verbs = {v for spec in verbs for v in spec.split(",") if v}
    crd_categories: dict[str, list[str]] = {}
    if output == "wide":
        crds, _ = server.list(server.resource("customresourcedefinitions"))
        for crd in crds:
            spec = crd.get("spec") or {}
            names = spec.get("names") or {}
            crd_categories[f"{names.get('kind')}.{spec.get('group')}"] = list(names.get("categories") or [])
    chosen = []
    for rt in server.registry:
        if namespaced is not None and rt.namespaced != namespaced:
            continue
        if api_group is not None and rt.group != api_group:
            continue
        if wanted_verbs and not wanted_verbs <= set(_verbs(rt)):
            continue
        chosen.append(rt)
    if sort_by:
        chosen.sort(key=lambda rt: rt.plural if sort_by == "name" else rt.kind)
    if output == "name":
        for rt in chosen:
            print(rt.group_resource)
        return
    header = ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    if output == "wide":
        header += ["VERBS", "CATEGORIES"]
    rows = [] if no_headers else [header]
    for rt in chosen:
        row = [rt.plural, ",".join(rt.short_names), rt.api_version, str(rt.namespaced).lower(), rt.kind]
        if output == "wide":
            row += [",".join(_verbs(rt)), ",".join(_categories(rt, crd_categories))]
        rows.append(row)
    if rows:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print("   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


@app.command()
def version(
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="'json' for scripts.")] = None,
) -> None:
    """Print kctl's version, the Kubernetes API its schemas follow, and the store."""
    from kctl.cli.version import print_version  # kctl.cli.main answers a plain `kctl version` with it too

    print_version(connect.api(), output=output)


@app.command()
def completion(
    shell: Annotated[str, typer.Argument(help="bash, zsh, fish or powershell")],
) -> None:
    """Print a shell completion script: `source <(kctl completion bash)`.

    It completes commands, flags, resource types (CustomResourceDefinitions' too), the names
    of objects of the type typed (from the store, in the -n namespace), namespaces and nodes.
    """
    import click

    from kctl.cli.completion import COMPLETE_VAR, script

    try:
        text = script(click.get_current_context().find_root().command, shell, complete_var=COMPLETE_VAR)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    print(text.rstrip("\n"))
