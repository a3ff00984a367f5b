"""`kctl rollout status|history|undo|restart|pause|resume`: managing a Deployment's (DaemonSet's,
StatefulSet's) rollout.

As in kubectl, all of it happens client-side against the API: status watches the object
(kctl.cli.wait.watch_object) and reads the status the controller writes;
history and undo read the ReplicaSets the Deployment owns and their
`deployment.kubernetes.io/revision` annotations (for a StatefulSet: the ControllerRevisions it
controls); undo copies a revision's pod template back (library code: kctl.ops.rollback);
restart, pause and resume change one field. The controller
(kctl.controllers) then acts on what was written.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kctl.machinery.resources import ResourceType
from kctl.cli import connect

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

rollout_app = typer.Typer(
    name="rollout",
    help="Manage the rollout of Deployments, DaemonSets and StatefulSets: status, history, undo, restart, pause, "
         "resume.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(rollout_app)

CHANGE_CAUSE = "kubernetes.io/change-cause"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
DEPLOYMENT = "Deployment.apps"
DAEMONSET = "DaemonSet.apps"
STATEFULSET = "StatefulSet.apps"

ResourcesArg = Annotated[Optional[list[str]], typer.Argument(help="TYPE NAME... or TYPE/NAME... (deployment/web)")]
FileOpt = Annotated[list[str], typer.Option("--filename", "-f", help="The objects these manifests name.")]
NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")]
SelectorOpt = Annotated[Optional[str], typer.Option("--selector", "-l", help="Label selector.")]


def _targets(resources: Optional[list[str]], filename: list[str], namespace: Optional[str],
             selector: Optional[str]) -> list[tuple[ResourceType, dict]]:
    from kctl.cli.modify import named_objects

    if not resources and not filename:
        raise _fail("required resource not specified")
    return named_objects(resources, filename, False, namespace, selector, False)


def _fail(message: str, *, code: int = 1) -> typer.Exit:
    from kctl.cli.wait import fail

    return fail(message, code=code)


def _kind_name(rt: ResourceType) -> str:
    """kubectl's GroupKind in messages: `DaemonSet.apps`, `Pod`."""
    return rt.group_kind


# --- status -----------------------------------------------------------------------------

def deployment_status(d: dict, *, revision: int = 0) -> tuple[str, bool]:
    """kubectl's DeploymentStatusViewer: (the line to print, done); ValueError when it failed."""
    meta, spec, status = d.get("metadata") or {}, d.get("spec") or {}, d.get("status") or {}
    name = meta.get("name", "")
    if revision > 0:
        current = _revision_of(d)
        if current != revision:
            raise ValueError(f"desired revision ({revision}) is different from the running revision ({current})")
    if meta.get("generation", 0) > status.get("observedGeneration", 0):
        return "Waiting for deployment spec update to be observed...", False
    progressing = next((c for c in status.get("conditions") or () if c.get("type") == "Progressing"), None)
    if progressing and progressing.get("reason") == "ProgressDeadlineExceeded":
        raise ValueError(f'deployment "{name}" exceeded its progress deadline')
    replicas = spec.get("replicas", 1)
    updated = status.get("updatedReplicas", 0)
    if updated < replicas:
        return (f'Waiting for deployment "{name}" rollout to finish: {updated} out of {replicas} '
                "new replicas have been updated..."), False
    total = status.get("replicas", 0)
    if total > updated:
        return (f'Waiting for deployment "{name}" rollout to finish: {total - updated} old replicas '
                "are pending termination..."), False
    available = status.get("availableReplicas", 0)
    if available < updated:
        return (f'Waiting for deployment "{name}" rollout to finish: {available} of {updated} '
                "updated replicas are available..."), False
    return f'deployment "{name}" successfully rolled out', True


def daemonset_status(ds: dict, *, revision: int = 0) -> tuple[str, bool]:
    """kubectl's DaemonSetStatusViewer: (the line to print, done); ValueError when it cannot say."""
    meta, spec, status = ds.get("metadata") or {}, ds.get("spec") or {}, ds.get("status") or {}
    name = meta.get("name", "")
    if ((spec.get("updateStrategy") or {}).get("type") or "RollingUpdate") != "RollingUpdate":
        raise ValueError("rollout status is only available for RollingUpdate strategy type")
    if meta.get("generation", 0) > status.get("observedGeneration", 0):
        return "Waiting for daemon set spec update to be observed...", False
    desired = status.get("desiredNumberScheduled", 0)
    updated = status.get("updatedNumberScheduled", 0)
    if updated < desired:
        return (f'Waiting for daemon set "{name}" rollout to finish: {updated} out of {desired} '
                "new pods have been updated..."), False
    available = status.get("numberAvailable", 0)
    if available < desired:
        return (f'Waiting for daemon set "{name}" rollout to finish: {available} of {desired} '
                "updated pods are available..."), False
    return f'daemon set "{name}" successfully rolled out', True


def statefulset_status(sts: dict, *, revision: int = 0) -> tuple[str, bool]:
    """kubectl's StatefulSetStatusViewer: (the line to print, done); ValueError when it cannot say."""
    meta, spec, status = sts.get("metadata") or {}, sts.get("spec") or {}, sts.get("status") or {}
    strategy = spec.get("updateStrategy") or {}
    if (strategy.get("type") or "RollingUpdate") != "RollingUpdate":
        raise ValueError("rollout status is only available for RollingUpdate strategy type")
    if not status.get("observedGeneration") or meta.get("generation", 0) > status.get("observedGeneration", 0):
        return "Waiting for statefulset spec update to be observed...", False
    replicas = spec.get("replicas", 1)
    ready = status.get("readyReplicas", 0)
    if replicas is not None and ready < replicas:
        return f"Waiting for {replicas - ready} pods to be ready...", False
    rolling = strategy.get("rollingUpdate")
    if (strategy.get("type") or "RollingUpdate") == "RollingUpdate" and isinstance(rolling, dict):
        partition = rolling.get("partition")
        updated = status.get("updatedReplicas", 0)
        if replicas is not None and partition is not None and updated < replicas - partition:
            return (f"Waiting for partitioned roll out to finish: {updated} out of {replicas - partition} "
                    "new pods have been updated..."), False
        return f"partitioned roll out complete: {updated} new pods have been updated...", True
    if status.get("updateRevision") != status.get("currentRevision"):
        return (f"waiting for statefulset rolling update to complete {status.get('updatedReplicas', 0)} pods at "
                f"revision {status.get('updateRevision', '')}..."), False
    return (f"statefulset rolling update complete {status.get('currentReplicas', 0)} pods at revision "
            f"{status.get('currentRevision', '')}..."), True


STATUS_VIEWERS = {DEPLOYMENT: deployment_status, DAEMONSET: daemonset_status, STATEFULSET: statefulset_status}


@rollout_app.command()
def status(
    resources: ResourcesArg = None,
    filename: FileOpt = [],
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
    watch: Annotated[bool, typer.Option("--watch/--no-watch", "-w", help="Watch until the rollout ends (--no-watch: "
                                        "print the status once).")] = True,
    revision: Annotated[int, typer.Option(help="Pin to this revision (0: the latest).")] = 0,
    timeout: Annotated[str, typer.Option(help="How long to watch before giving up (Go duration; 0: forever).")] = "0s",
) -> None:
    """Show the status of a rollout, watching it until it finishes, fails or times out."""
    from kctl.cli.durations import parse_timeout
    from kctl.cli.wait import timeout_exit_code, watch_object

    seconds = parse_timeout(timeout) or None
    for rt, obj in _targets(resources, filename, namespace, selector):
        viewer = STATUS_VIEWERS.get(rt.group_kind)
        if viewer is None:
            raise _fail(f"no status viewer has been implemented for {_kind_name(rt)}")
        last: list[str] = []

        def check(current: dict | None) -> bool:
            if current is None:
                raise LookupError("object has been deleted")
            line, done = viewer(current, revision=revision)
            if not last or last[-1] != line:  # kubectl repeats a line per event; once is enough
                print(line)
                sys.stdout.flush()
                last.append(line)
            return done or not watch

        meta = obj["metadata"]
        try:
            finished = watch_object(rt, meta["name"], meta.get("namespace"), check, timeout=seconds)
        except (ValueError, LookupError) as exc:
            raise _fail(str(exc)) from None
        if not finished:
            raise _fail("timed out waiting for the condition", code=timeout_exit_code())


# --- history and undo -------------------------------------------------------------------

def _revision_of(obj: dict) -> int:
    from kctl.ops.rollback import revision_of

    return revision_of(obj)


def owned_replica_sets(deployment: dict) -> list[dict]:
    """The ReplicaSets whose controller is `deployment` (by uid), oldest revision first."""
    from kctl.ops.rollback import owned_replica_sets as owned

    return owned(connect.api(), deployment)


def _require_deployment(rt: ResourceType, what: str) -> None:
    if rt.group_kind not in (DEPLOYMENT, STATEFULSET):
        raise _fail(f"no {what} has been implemented for {_kind_name(rt)}")


def _history(obj: dict, rt: ResourceType) -> dict[int, tuple[str, dict]]:
    """revision -> (change cause, pod template) of a Deployment's ReplicaSets or a StatefulSet's revisions."""
    if rt.group_kind == STATEFULSET:
        from kctl.controllers.statefulset.revisions import number, template_of_revision
        from kctl.ops.rollback import owned_revisions

        return {number(r): ((r["metadata"].get("annotations") or {}).get(CHANGE_CAUSE) or "<none>",
                            template_of_revision(r))
                for r in owned_revisions(connect.api(), obj)}
    return {_revision_of(rs): ((rs["metadata"].get("annotations") or {}).get(CHANGE_CAUSE) or "<none>",
                               (rs.get("spec") or {}).get("template") or {})
            for rs in owned_replica_sets(obj) if _revision_of(rs) > 0}


@rollout_app.command()
def history(
    resources: ResourcesArg = None,
    filename: FileOpt = [],
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
    revision: Annotated[int, typer.Option(help="Show the pod template of this revision.")] = 0,
) -> None:
    """List a Deployment's or StatefulSet's revisions with their change causes (or one revision's pod template)."""
    from kctl.output.describe import PrefixWriter, describe_pod_template

    for rt, obj in _targets(resources, filename, namespace, selector):
        _require_deployment(rt, "history viewer")
        by_revision = _history(obj, rt)
        ref = connect.ref(rt, obj["metadata"]["name"])
        if revision > 0:
            chosen = by_revision.get(revision)
            if chosen is None:
                raise _fail(f"unable to find the specified revision {revision}")
            w = PrefixWriter()
            describe_pod_template(w, chosen[1])
            print(f"{ref} with revision #{revision}")
            print(w.text())
            continue
        if not by_revision:
            print(f"{ref} \nNo rollout history found.")
            continue
        width = max(len("REVISION"), *(len(str(r)) for r in by_revision)) + 2
        rows = ["REVISION".ljust(width) + "CHANGE-CAUSE"]
        for rev in sorted(by_revision):
            rows.append(f"{str(rev).ljust(width)}{by_revision[rev][0]}")
        print(f"{ref} ")
        print("\n".join(rows) + "\n")


@rollout_app.command()
def undo(
    resources: ResourcesArg = None,
    filename: FileOpt = [],
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
    to_revision: Annotated[int, typer.Option(help="The revision to go back to (0: the previous one).")] = 0,
    dry_run: Annotated[Optional[str], typer.Option("--dry-run", help="'server' or 'client': change nothing.")] = None,
) -> None:
    """Roll a Deployment or StatefulSet back to an earlier revision's pod template."""
    from kctl.ops.rollback import RollbackError, rollback, rollback_statefulset

    server = connect.api()
    for rt, obj in _targets(resources, filename, namespace, selector):
        _require_deployment(rt, "rollbacker")
        ref = connect.ref(rt, obj["metadata"]["name"])
        try:
            roll = rollback_statefulset if rt.group_kind == STATEFULSET else rollback
            result = roll(server, rt, obj, to_revision=to_revision, dry_run=dry_run)
        except RollbackError as exc:
            raise _fail(str(exc)) from None
        if not result.rolled_back:
            print(f"{ref} skipped rollback (current template already matches revision {result.revision})")
        else:
            print(f"{ref} rolled back{' (dry run)' if dry_run == 'client' else ' (server dry run)' if dry_run else ''}")


# --- restart, pause, resume ---------------------------------------------------------------

def _restarted_at() -> str:
    """Go's time.RFC3339 in the local zone, as kubectl writes restartedAt."""
    from datetime import datetime

    text = datetime.now().astimezone().isoformat(timespec="seconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


@rollout_app.command()
def restart(
    resources: ResourcesArg = None,
    filename: FileOpt = [],
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
) -> None:
    """Restart every pod of a Deployment, DaemonSet or StatefulSet through a rollout (restartedAt annotation)."""
    server = connect.api()
    for rt, obj in _targets(resources, filename, namespace, selector):
        if rt.group_kind not in (DEPLOYMENT, DAEMONSET, STATEFULSET):
            raise _fail(f"{connect.ref(rt, obj['metadata']['name'])}: restarting is not supported")
        if rt.group_kind == DEPLOYMENT and (obj.get("spec") or {}).get("paused"):
            raise _fail("can't restart paused deployment (run rollout resume first)")
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: _restarted_at()}}}}}
        server.patch(rt, obj["metadata"]["name"], patch, patch_type="merge", namespace=obj["metadata"].get("namespace"))
        print(f"{connect.ref(rt, obj['metadata']['name'])} restarted")


def _set_paused(resources: Optional[list[str]], filename: list[str], namespace: Optional[str],
                selector: Optional[str], paused: bool) -> None:
    server = connect.api()
    verb = "paused" if paused else "resumed"
    for rt, obj in _targets(resources, filename, namespace, selector):
        ref = connect.ref(rt, obj["metadata"]["name"])
        if rt.group_kind != DEPLOYMENT:
            raise _fail(f"{ref}: {'pausing' if paused else 'resuming'} is not supported")
        if bool((obj.get("spec") or {}).get("paused")) == paused:
            print(f"{ref} already {verb}")
            continue
        server.patch(rt, obj["metadata"]["name"], {"spec": {"paused": True if paused else None}},
                     patch_type="merge", namespace=obj["metadata"].get("namespace"))
        print(f"{ref} {verb}")


@rollout_app.command()
def pause(
    resources: ResourcesArg = None,
    filename: FileOpt = [],
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
) -> None:
    """Pause a Deployment: template changes wait until it is resumed."""
    _set_paused(resources, filename, namespace, selector, True)


@rollout_app.command()
def resume(
    resources: ResourcesArg = None,
    filename: FileOpt = [],
    namespace: NamespaceOpt = None,
    selector: SelectorOpt = None,
) -> None:
    """Resume a paused Deployment."""
    _set_paused(resources, filename, namespace, selector, False)
