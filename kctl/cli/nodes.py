"""`kctl cordon`, `uncordon` and `drain`: taking a Node out of service and back.

cordon and uncordon set spec.unschedulable (the scheduler's NodeUnschedulable plugin
honours it). drain cordons, then decides pod by pod as kubectl's drain filters do
(DaemonSet pods, mirror pods, pods with emptyDir data, pods no controller owns), evicts
the pods it may (a delete with the pod's grace period; the node agent stops them) and
watches until they are gone. Messages are kubectl's.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Annotated, Callable, Optional

import typer

from kctl.api.resources import ResourceType
from kctl.cli import connect
from kctl.cli.main import app

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DAEMONSET_FATAL = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_FATAL = "Pods with local storage (use --delete-emptydir-data to override)"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_FATAL = "Pods declare no controller (use --force to override)"
UNMANAGED_WARNING = "deleting Pods that declare no controller"

#: does the DaemonSet (namespace, name) exist?
DaemonSetExists = Callable[[str, str], bool]

NodesArg = Annotated[list[str], typer.Argument(help="Node names.")]


def _fail(message: str, *, code: int = 1) -> typer.Exit:
    from kctl.cli.wait import fail

    return fail(message, code=code)


def _node_rt() -> ResourceType:
    return connect.api().resource("nodes")


def set_unschedulable(name: str, unschedulable: bool, *, dry_run: bool = False) -> bool:
    """Cordon (True) or uncordon (False) a Node; False when it already was."""
    server = connect.api()
    rt = _node_rt()
    node = server.get(rt, name)
    if bool((node.get("spec") or {}).get("unschedulable")) == unschedulable:
        return False
    if not dry_run:
        server.patch(rt, name, {"spec": {"unschedulable": True if unschedulable else None}}, patch_type="merge")
    return True


def _cordon_all(names: list[str], unschedulable: bool, dry_run: Optional[str]) -> None:
    word = "cordoned" if unschedulable else "uncordoned"
    suffix = " (dry run)" if dry_run else ""
    for name in names:
        changed = set_unschedulable(name, unschedulable, dry_run=bool(dry_run))
        print(f"node/{name} {'' if changed else 'already '}{word}{suffix}")


@app.command()
def cordon(
    nodes: NodesArg,
    dry_run: Annotated[Optional[str], typer.Option("--dry-run", help="'client' or 'server': change nothing.")] = None,
) -> None:
    """Mark nodes unschedulable: no new pods are placed there."""
    _cordon_all(nodes, True, dry_run)


@app.command()
def uncordon(
    nodes: NodesArg,
    dry_run: Annotated[Optional[str], typer.Option("--dry-run", help="'client' or 'server': change nothing.")] = None,
) -> None:
    """Mark nodes schedulable again."""
    _cordon_all(nodes, False, dry_run)


# --- drain ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class DrainOptions:
    """The flags that decide which pods a drain may evict."""

    ignore_daemonsets: bool = False
    delete_emptydir_data: bool = False
    force: bool = False


@dataclass(frozen=True)
class PodVerdict:
    """kubectl's PodDeleteStatus: evict or not, and why (warning or error), for one pod."""

    pod: dict
    delete: bool
    reason: str = "Okay"  # Okay | Skip | Warning | Error
    message: str = ""

    @property
    def key(self) -> str:
        meta = self.pod["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}"


def _controller_ref(pod: dict) -> dict | None:
    return next((r for r in pod["metadata"].get("ownerReferences") or () if r.get("controller")), None)


def _finished(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _daemonset_filter(pod: dict, opts: DrainOptions, daemonset_exists: DaemonSetExists) -> PodVerdict:
    ref = _controller_ref(pod)
    if ref is None or ref.get("kind") != "DaemonSet" or _finished(pod):
        return PodVerdict(pod, True)
    if not daemonset_exists(pod["metadata"].get("namespace", ""), ref.get("name", "")):
        message = f'daemonsets.apps "{ref.get("name", "")}" not found'
        return PodVerdict(pod, True, "Warning", message) if opts.force else PodVerdict(pod, False, "Error", message)
    if not opts.ignore_daemonsets:
        return PodVerdict(pod, False, "Error", DAEMONSET_FATAL)
    return PodVerdict(pod, False, "Warning", DAEMONSET_WARNING)


def _mirror_filter(pod: dict, opts: DrainOptions, daemonset_exists: DaemonSetExists) -> PodVerdict:
    if MIRROR_ANNOTATION in (pod["metadata"].get("annotations") or {}):
        return PodVerdict(pod, False, "Skip")
    return PodVerdict(pod, True)


def _local_storage_filter(pod: dict, opts: DrainOptions, daemonset_exists: DaemonSetExists) -> PodVerdict:
    volumes = (pod.get("spec") or {}).get("volumes") or ()
    if not any("emptyDir" in v for v in volumes) or _finished(pod):
        return PodVerdict(pod, True)
    if not opts.delete_emptydir_data:
        return PodVerdict(pod, False, "Error", LOCAL_STORAGE_FATAL)
    return PodVerdict(pod, True, "Warning", LOCAL_STORAGE_WARNING)


def _unreplicated_filter(pod: dict, opts: DrainOptions, daemonset_exists: DaemonSetExists) -> PodVerdict:
    if _finished(pod) or _controller_ref(pod) is not None:
        return PodVerdict(pod, True)
    if opts.force:
        return PodVerdict(pod, True, "Warning", UNMANAGED_WARNING)
    return PodVerdict(pod, False, "Error", UNMANAGED_FATAL)


FILTERS = (_daemonset_filter, _mirror_filter, _local_storage_filter, _unreplicated_filter)


def pods_for_deletion(pods: list[dict], opts: DrainOptions,
                      daemonset_exists: DaemonSetExists) -> list[PodVerdict]:
    """Each pod through kubectl's filters in order; the first that refuses decides.

    Unlike kubectl, a warning from an earlier filter is not dropped by a later filter
    that has nothing to say (kubectl's own TODO in drain/filters.go).
    """
    verdicts = []
    for pod in pods:
        verdict = PodVerdict(pod, True)
        for check in FILTERS:
            found = check(pod, opts, daemonset_exists)
            if found.reason != "Okay" or verdict.reason == "Okay":
                verdict = found
            if not verdict.delete:
                break
        verdicts.append(verdict)
    return verdicts


def _grouped(verdicts: list[PodVerdict], reason: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for v in verdicts:
        if v.reason == reason:
            groups.setdefault(v.message, []).append(v.key)
    return groups


def drain_errors(verdicts: list[PodVerdict]) -> list[str]:
    """kubectl's `cannot delete MESSAGE: ns/a, ns/b`, one per distinct reason."""
    return [f"cannot delete {msg}: {', '.join(keys)}" for msg, keys in _grouped(verdicts, "Error").items()]


def drain_warnings(verdicts: list[PodVerdict]) -> str:
    return "; ".join(f"{msg}: {', '.join(keys)}" for msg, keys in _grouped(verdicts, "Warning").items())


class DrainTimeout(Exception):
    """The pods were not all gone within --timeout; `pending` names those left."""

    def __init__(self, pending: list[str]) -> None:
        super().__init__(", ".join(pending))
        self.pending = pending


class DrainFailed(Exception):
    """One node's drain stopped, in kubectl's words.

    `error` goes into the `unable to drain node` line; `final_lines` end the output as
    kubectl's error handler prints them (an aggregate's errors one per line, unprefixed;
    a single error as `error: ...`); `code` is the exit status.
    """

    def __init__(self, error: str, final_lines: list[str], code: int) -> None:
        super().__init__(error)
        self.error, self.final_lines, self.code = error, final_lines, code


def evict_and_wait(verdicts: list[PodVerdict], *, grace_period: Optional[int], timeout: float | None) -> None:
    """Delete each pod to evict (printing kubectl's lines), then watch until every one is gone."""
    from kctl.api.errors import Gone, NotFound

    server = connect.api()
    pods_rt = server.resource("pods")
    pending: dict[tuple[str, str], str] = {}
    start_rev = server.store.revision()
    for v in verdicts:
        if not v.delete:
            continue
        meta = v.pod["metadata"]
        print(f"evicting pod {v.key}", file=sys.stderr)
        try:
            server.delete(pods_rt, meta["name"], namespace=meta.get("namespace"), grace_period=grace_period)
        except NotFound:
            print(f"pod/{meta['name']} evicted")
            continue
        pending[(meta.get("namespace", ""), meta["name"])] = meta.get("uid", "")
    deadline = None if timeout is None else time.monotonic() + timeout

    def gone(ns: str, name: str, obj: dict | None) -> bool:
        return obj is None or obj["metadata"].get("uid") != pending[(ns, name)]

    rev: int | None = start_rev  # the watch from before the deletes sees every one of them
    while pending:
        if rev is None:  # the watch fell behind the compacted log: re-read, then watch on
            rev = server.store.revision()
            for (ns, name) in list(pending):
                try:
                    obj = server.get(pods_rt, name, namespace=ns)
                except NotFound:
                    obj = None
                if gone(ns, name, obj):
                    del pending[(ns, name)]
                    print(f"pod/{name} evicted")
        try:
            while pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise DrainTimeout([name for (_ns, name) in pending])
                for type_, obj in server.watch(pods_rt, since=rev, timeout=left):
                    rev = int(obj["metadata"]["resourceVersion"])
                    key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                    if key in pending and gone(*key, None if type_ == "DELETED" else obj):
                        del pending[key]
                        print(f"pod/{key[1]} evicted")
                        sys.stdout.flush()
                    if not pending or (deadline is not None and time.monotonic() >= deadline):
                        break
        except Gone:
            rev = None


def _format_duration(seconds: float) -> str:
    """Go's Duration.String: 300ms, 5s, 1.5s, 1m30s, 1h0m0s."""
    if seconds < 1:
        return f"{round(seconds * 1000, 3):g}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{round(secs, 9):g}s"
    if hours or minutes:
        text = f"{int(minutes)}m" + text
    if hours:
        text = f"{int(hours)}h" + text
    return text


@app.command()
def drain(
    nodes: NodesArg,
    ignore_daemonsets: Annotated[bool, typer.Option(help="Leave DaemonSet-managed pods alone instead of refusing.")] = False,
    delete_emptydir_data: Annotated[bool, typer.Option(
        help="Evict pods with emptyDir volumes even though their data is lost.")] = False,
    force: Annotated[bool, typer.Option(help="Also evict pods that no controller owns (they are not recreated).")] = False,
    grace_period: Annotated[int, typer.Option(
        help="Seconds each pod gets to stop (-1: the pod's own terminationGracePeriodSeconds).")] = -1,
    timeout: Annotated[str, typer.Option(help="Give up after this long (Go duration; 0: never).")] = "0s",
) -> None:
    """Cordon nodes, then evict their pods and wait until the pods are gone."""
    from kctl.cli.wait import parse_timeout, timeout_exit_code

    seconds = parse_timeout(timeout) or None
    opts = DrainOptions(ignore_daemonsets=ignore_daemonsets, delete_emptydir_data=delete_emptydir_data, force=force)
    server = connect.api()
    for name in nodes:
        server.get(_node_rt(), name)  # NotFound before anything changes
    _cordon_all(nodes, True, None)  # kubectl cordons every node before draining the first
    for i, name in enumerate(nodes):
        try:
            _drain_one(name, opts, grace_period=None if grace_period < 0 else grace_period,
                       timeout=seconds, timeout_code=timeout_exit_code())
        except DrainFailed as failure:
            _report_failure(nodes[i:], name, failure)
            raise typer.Exit(failure.code) from None
        print(f"node/{name} drained")
        sys.stdout.flush()


def _report_failure(pending_nodes: list[str], name: str, failure: DrainFailed) -> None:
    """kubectl's lines on stderr when a node's drain stops (the pending nodes, then the error)."""
    print(f'error: unable to drain node "{name}" due to error: {failure.error}, continuing command...',
          file=sys.stderr)
    print("There are pending nodes to be drained:", file=sys.stderr)
    for pending in pending_nodes:
        print(f" {pending}", file=sys.stderr)
    for line in failure.final_lines:
        print(line, file=sys.stderr)


def _drain_one(name: str, opts: DrainOptions, *, grace_period: Optional[int], timeout: float | None,
               timeout_code: int) -> None:
    """Drain one cordoned node: evict what the filters allow and wait; DrainFailed when it cannot."""
    from kctl.api.errors import NotFound
    from kctl.api.selectors import parse_field_selector

    server = connect.api()
    pods_rt, ds_rt = server.resource("pods"), server.resource("daemonsets")
    pods, _ = server.list(pods_rt, field_selector=parse_field_selector(f"spec.nodeName={name}", kind="Pod"))
    pods.sort(key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]))

    def daemonset_exists(ns: str, ds_name: str) -> bool:
        try:
            server.get(ds_rt, ds_name, namespace=ns)
            return True
        except NotFound:
            return False

    verdicts = pods_for_deletion(pods, opts, daemonset_exists)
    errors = drain_errors(verdicts)
    if errors:
        raise DrainFailed(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]", errors, 1)
    warnings = drain_warnings(verdicts)
    if warnings:
        print(f"Warning: {warnings}", file=sys.stderr)
    try:
        evict_and_wait(verdicts, grace_period=grace_period, timeout=timeout)
    except DrainTimeout as exc:
        error = f"drain did not complete within {_format_duration(timeout or 0)}"
        print(f'There are pending pods in node "{name}" when an error occurred: {error}', file=sys.stderr)
        for pod_name in exc.pending:
            print(f"pod/{pod_name}", file=sys.stderr)
        raise DrainFailed(error, [f"error: {error}"], timeout_code) from None
