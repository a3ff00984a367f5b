"""`kctl scale` and `kctl set image`: the two quick spec edits of a workload.

scale writes spec.replicas of Deployments, ReplicaSets and StatefulSets (with kubectl's
--current-replicas and --resource-version preconditions); set image changes container
images in anything that holds a pod template (or a Pod). Both write through the API
layer with a resourceVersion precondition; the controllers do the rest.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from kctl.machinery.resources import ResourceType
from kctl.cli import connect

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

SCALABLE = ("Deployment.apps", "ReplicaSet.apps", "StatefulSet.apps")
#: where each kind keeps its pod spec
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment.apps": ("spec", "template", "spec"),
    "ReplicaSet.apps": ("spec", "template", "spec"),
    "DaemonSet.apps": ("spec", "template", "spec"),
    "StatefulSet.apps": ("spec", "template", "spec"),
    "Job.batch": ("spec", "template", "spec"),
    "CronJob.batch": ("spec", "jobTemplate", "spec", "template", "spec"),
}
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
#: attempts of a set image write that keeps hitting Conflict (each on a fresh read)
RETRIES = 5

NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")]
SelectorOpt = Annotated[Optional[str], typer.Option("--selector", "-l", help="Label selector.")]
AllOpt = Annotated[bool, typer.Option("--all", help="Every object of the type in the namespace.")]
FileOpt = Annotated[list[str], typer.Option("--filename", "-f", help="The objects these manifests name.")]
DryRunOpt = Annotated[Optional[str], typer.Option("--dry-run", help="'server' or 'client': change nothing.")]


def _fail(message: str, *, code: int = 1) -> typer.Exit:
    from kctl.cli.wait import fail

    return fail(message, code=code)


def _suffix(dry_run: Optional[str]) -> str:
    return " (dry run)" if dry_run == "client" else " (server dry run)" if dry_run not in (None, "none") else ""


@app.command()
def scale(
    resources: Annotated[Optional[list[str]], typer.Argument(help="TYPE NAME... or TYPE/NAME...")] = None,
    replicas: Annotated[Optional[int], typer.Option(help="The new number of replicas.")] = None,
    current_replicas: Annotated[Optional[int], typer.Option(
        help="Only scale when the current replicas are this many.")] = None,
    resource_version: Annotated[Optional[str], typer.Option(
        help="Only scale when the object's resourceVersion is this.")] = None,
    filename: FileOpt = [],
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
    all_: AllOpt = False,
    dry_run: DryRunOpt = None,
) -> None:
    """Set the number of replicas of Deployments, ReplicaSets and StatefulSets."""
    from kctl.cli.modify import named_objects

    if replicas is None or replicas < 0:
        raise _fail("The --replicas=COUNT flag is required, and COUNT must be greater than or equal to 0")
    server = connect.api()
    targets = named_objects(resources, filename, False, namespace, selector, all_)
    if len(targets) > 1 and (current_replicas is not None or resource_version):
        raise _fail("precondition is not supported for multiple objects")
    for rt, obj in targets:
        meta = obj["metadata"]
        ref = connect.ref(rt, meta["name"])
        if rt.group_kind not in SCALABLE:
            raise _fail(f"{ref}: cannot scale {rt.group_resource}: only deployments, replicasets and statefulsets "
                        "have replicas")
        actual = (obj.get("spec") or {}).get("replicas", 1)
        if current_replicas is not None and actual != current_replicas:
            raise _fail(f"Expected replicas to be {current_replicas}, was {actual}")
        if resource_version and meta["resourceVersion"] != resource_version:
            raise _fail(f"Expected resourceVersion to be {resource_version}, was {meta['resourceVersion']}")
        patch: dict = {"spec": {"replicas": replicas}}
        if current_replicas is not None or resource_version:
            patch["metadata"] = {"resourceVersion": meta["resourceVersion"]}  # pinned: a change in between conflicts
        if dry_run != "client":
            server.patch(rt, meta["name"], patch, patch_type="merge", namespace=meta.get("namespace"),
                         dry_run=dry_run not in (None, "none"))
        print(f"{ref} scaled{_suffix(dry_run)}")


# --- set image ------------------------------------------------------------------------------

set_app = typer.Typer(
    name="set",
    help="Set specific features on objects (set image).",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(set_app)


def pod_spec_of(rt: ResourceType, obj: dict) -> dict | None:
    """The pod spec inside `obj` (a Pod's own spec, or its template's), None for other kinds."""
    path = POD_SPEC_PATHS.get(rt.group_kind)
    if path is None:
        return None
    node = obj
    for key in path:
        node = node.setdefault(key, {}) if isinstance(node, dict) else {}
    return node


def with_images(rt: ResourceType, obj: dict, images: dict[str, str]) -> tuple[dict, list[str]]:
    """(a copy of obj with the images set, names matching no container); `*` means every container."""
    new = copy.deepcopy(obj)
    spec = pod_spec_of(rt, new)
    missing = []
    for name, image in images.items():
        found = False
        for list_name in CONTAINER_LISTS:
            for container in spec.get(list_name) or ():
                if name == "*" or container.get("name") == name:
                    container["image"] = image
                    found = True
        if not found:
            missing.append(name)
    return new, missing


def _split_args(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """`TYPE NAME c=img` / `TYPE/NAME c=img`: the resource words and the container=image pairs."""
    words = [a for a in args if "=" not in a]
    images: dict[str, str] = {}
    for pair in (a for a in args if "=" in a):
        name, _, image = pair.partition("=")
        if not name or not image:
            raise _fail(f"invalid image update {pair!r}: use CONTAINER=IMAGE")
        images[name] = image
    return words, images


def _set_images(server: API, rt: ResourceType, obj: dict, images: dict[str, str], *,
                dry_run: Optional[str]) -> list[str]:
    """Write `images` into obj, re-reading it on a Conflict (retry_on_conflict, RETRIES in all); names not found.

    Prints "<ref> image updated" when written; nothing (and no write) when no container
    is missing and the images are already set.
    """
    from kctl.client.retry import retry_on_conflict

    first = True

    def attempt() -> list[str]:
        nonlocal first
        current = obj
        if not first:
            current = server.get(rt, obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
        first = False
        new, missing = with_images(rt, current, images)
        if missing or new == current:
            return missing  # nothing to change: kubectl prints nothing either
        if dry_run != "client":
            server.update(new, dry_run=dry_run not in (None, "none"))
        print(f"{connect.ref(rt, obj['metadata']['name'])} image updated{_suffix(dry_run)}")
        return []

    return retry_on_conflict(attempt, attempts=RETRIES)


@set_app.command("image")
def set_image(
    args: Annotated[Optional[list[str]], typer.Argument(
        help="TYPE NAME CONTAINER=IMAGE... or TYPE/NAME CONTAINER=IMAGE... (`*=IMAGE`: every container)")] = None,
    filename: FileOpt = [],
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
    all_: AllOpt = False,
    dry_run: DryRunOpt = None,
) -> None:
    """Update the image of containers in Pods, Deployments, ReplicaSets, DaemonSets, StatefulSets, Jobs and CronJobs."""
    from kctl.cli.modify import named_objects

    words, images = _split_args(list(args or []))
    if not images:
        raise _fail("at least one image update is required")
    server = connect.api()
    errors = []
    for rt, obj in named_objects(words, filename, False, namespace, selector, all_):
        ref = connect.ref(rt, obj["metadata"]["name"])
        if rt.group_kind not in POD_SPEC_PATHS:
            errors.append(f"{ref}: setting images is not supported for {rt.group_resource}")
            continue
        missing = _set_images(server, rt, obj, images, dry_run=dry_run)
        errors.extend(f'unable to find container named "{name}"' for name in missing)
    if errors:
        raise _fail("\n".join(errors) if len(errors) == 1 else "[" + ", ".join(errors) + "]")
