"""Draining a Node: which of its pods may be evicted, and evicting them until they are gone.

kubectl's drain (k8s.io/kubectl/pkg/drain): `pods_for_deletion` runs each pod through the
filters (DaemonSet pods, mirror pods, pods with emptyDir data, pods no controller owns) with
kubectl's messages; `evict_and_wait` evicts the pods it may through the Eviction subresource
(`API.evict`: a PodDisruptionBudget may refuse, TooManyRequests, and the pod is tried again
every 5 s until the budget allows it or --timeout ends the drain) and watches until every
evicted pod is gone; `delete_and_wait` deletes them directly instead (`--disable-eviction`,
and `kctl node remove`: no budget is consulted) and watches likewise. `set_unschedulable`
cordons. Called by kctl.cli.nodes (`kctl drain`, `cordon`, `uncordon`) and kctl.cli.node
(`node remove`); the API is passed in and progress is reported through callbacks, so nothing
here prints.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DAEMONSET_FATAL = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_FATAL = "Pods with local storage (use --delete-emptydir-data to override)"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_FATAL = "Pods declare no controller (use --force to override)"
UNMANAGED_WARNING = "deleting Pods that declare no controller"

#: does the DaemonSet (namespace, name) exist?
DaemonSetExists = Callable[[str, str], bool]

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


def _ignore(_key: str) -> None:
    """A progress callback that reports nothing."""


def delete_and_wait(server: API, verdicts: list[PodVerdict], *, grace_period: Optional[int], timeout: float | None,
                    on_evicting: Callable[[str], None] = _ignore, on_evicted: Callable[[str], None] = _ignore) -> None:
    """Delete each pod to evict (no budget consulted), then watch until every one is gone (DrainTimeout after
    `timeout` seconds).

    `on_evicting` gets `namespace/name` before each delete; `on_evicted` gets a pod's name once it is gone.
    """
    from kctl.machinery.errors import Gone, NotFound

    pods_rt = server.resource("pods")
    pending: dict[tuple[str, str], str] = {}
    start_rev = server.revision()
    for v in verdicts:
        if not v.delete:
            continue
        meta = v.pod["metadata"]
        on_evicting(v.key)
        try:
            server.delete(pods_rt, meta["name"], namespace=meta.get("namespace"), grace_period=grace_period)
        except NotFound:
            on_evicted(meta['name'])
            continue
        pending[(meta.get("namespace", ""), meta["name"])] = meta.get("uid", "")
    deadline = None if timeout is None else time.monotonic() + timeout

    def gone(ns: str, name: str, obj: dict | None) -> bool:
        return obj is None or obj["metadata"].get("uid") != pending[(ns, name)]

    rev: int | None = start_rev  # the watch from before the deletes sees every one of them
    while pending:
        if rev is None:  # the watch fell behind the compacted log: re-read, then watch on
            rev = server.revision()
            for (ns, name) in list(pending):
                try:
                    obj = server.get(pods_rt, name, namespace=ns)
                except NotFound:
                    obj = None
                if gone(ns, name, obj):
                    del pending[(ns, name)]
                    on_evicted(name)
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
                        on_evicted(key[1])
                    if not pending or (deadline is not None and time.monotonic() >= deadline):
                        break
        except Gone:
            rev = None


#: seconds between eviction attempts a PodDisruptionBudget refused (kubectl's 5 s)
RETRY_SECONDS = 5.0


class EvictionFailed(Exception):
    """Pods not evicted, or not gone, in kubectl's words (one per pod); `timed_out` when --timeout ended it."""

    def __init__(self, errors: list[str], *, timed_out: bool) -> None:
        super().__init__(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
        self.errors, self.timed_out = errors, timed_out


def go_duration(seconds: float) -> str:
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


def _ignore_refusal(_key: str, _message: str) -> None:
    """A refusal callback that reports nothing."""


def evict_and_wait(server: API, verdicts: list[PodVerdict], *, grace_period: Optional[int], timeout: float | None,
                   on_evicting: Callable[[str], None] = _ignore, on_evicted: Callable[[str], None] = _ignore,
                   on_refused: Callable[[str, str], None] = _ignore_refusal,
                   retry_seconds: float | None = None) -> None:
    """kubectl's evictPods: evict each pod through the API's Eviction subresource and wait until it is gone.

    Every pod is tried at once; one a PodDisruptionBudget refuses (TooManyRequests) is tried again
    `retry_seconds` (default RETRY_SECONDS) later, until it is evicted or `timeout` seconds have passed.
    `on_evicting` gets `namespace/name` before every attempt, `on_refused(namespace/name, message)` each refusal,
    `on_evicted` a pod's name once it is gone (a pod already gone at its eviction is not reported, as
    kubectl). Any other error ends that pod's eviction; the others go on. EvictionFailed at the end
    lists kubectl's error per pod that was not evicted or not gone (`timed_out` when --timeout ran out).
    """
    from kctl.machinery.errors import APIError, NotFound, TooManyRequests

    pods_rt = server.resource("pods")
    retry_seconds = RETRY_SECONDS if retry_seconds is None else retry_seconds
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    limit = go_duration(timeout) if timeout is not None else ""
    due: dict[tuple[str, str], float] = {}  # pods still to evict -> when to try next
    uids: dict[tuple[str, str], str] = {}
    for v in verdicts:
        if v.delete:
            meta = v.pod["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            due[key], uids[key] = start, meta.get("uid", "")
    waiting: set[tuple[str, str]] = set()  # evicted, not yet gone
    errors: list[str] = []
    rev: int | None = server.revision()  # a watch from before the evictions sees every pod go

    def gone(key: tuple[str, str], obj: dict | None) -> bool:
        return obj is None or obj["metadata"].get("uid") != uids[key]

    while due or waiting:
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            errors += [f'error when evicting pods/"{name}" -n "{ns}": global timeout reached: {limit}'
                       for ns, name in due]
            errors += [f'error when waiting for pod "{name}" terminating: global timeout reached: {limit}'
                       for ns, name in sorted(waiting)]
            raise EvictionFailed(errors, timed_out=True)
        for key in [k for k, when in due.items() if when <= now]:
            ns, name = key
            on_evicting(f"{ns}/{name}")
            try:
                server.evict(ns, name, grace_period=grace_period)
            except NotFound:
                del due[key]
                continue
            except TooManyRequests as exc:
                on_refused(f"{ns}/{name}", exc.message)
                due[key] = time.monotonic() + retry_seconds
                continue
            except APIError as exc:
                errors.append(f'error when evicting pods/"{name}" -n "{ns}": {exc.message}')
                del due[key]
                continue
            del due[key]
            waiting.add(key)
        wake = min(due.values(), default=None)
        if deadline is not None:
            wake = deadline if wake is None else min(wake, deadline)
        if not waiting:
            if wake is not None:
                time.sleep(max(0.0, wake - time.monotonic()))
            continue
        rev = _watch_gone(server, pods_rt, waiting, rev, wake, gone, on_evicted)
    if errors:
        raise EvictionFailed(errors, timed_out=False)


def _watch_gone(server: API, pods_rt, waiting: set[tuple[str, str]], rev: int | None, wake: float | None,
                gone: Callable[[tuple[str, str], "dict | None"], bool],
                on_evicted: Callable[[str], None]) -> int | None:
    """Watch pods from `rev` until `wake` (monotonic) or every waiting pod is gone; the revision reached
    (None: the watch fell behind the compacted log, and the next call re-reads first)."""
    from kctl.machinery.errors import Gone, NotFound
    if rev is None:
        rev = server.revision()
        for key in sorted(waiting):
            try:
                obj = server.get(pods_rt, key[1], namespace=key[0])
            except NotFound:
                obj = None
            if gone(key, obj):
                waiting.discard(key)
                on_evicted(key[1])
    if not waiting:
        return rev
    left = None if wake is None else max(0.0, wake - time.monotonic())
    try:
        for type_, obj in server.watch(pods_rt, since=rev, timeout=left):
            rev = int(obj["metadata"]["resourceVersion"])
            key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            if key in waiting and gone(key, None if type_ == "DELETED" else obj):
                waiting.discard(key)
                on_evicted(key[1])
            if not waiting or (wake is not None and time.monotonic() >= wake):
                break
    except Gone:
        return None
    return rev


def set_unschedulable(server: API, name: str, unschedulable: bool, *, dry_run: bool = False) -> bool:
    """Cordon (True) or uncordon (False) a Node; False when it already was."""
    rt = server.resource("nodes")
    node = server.get(rt, name)
    if bool((node.get("spec") or {}).get("unschedulable")) == unschedulable:
        return False
    if not dry_run:
        server.patch(rt, name, {"spec": {"unschedulable": True if unschedulable else None}}, patch_type="merge")
    return True


def pods_on_node(server: API, name: str) -> list[dict]:
    """The pods bound to Node `name`, by namespace and name."""
    from kctl.machinery.selectors import parse_field_selector

    pods, _ = server.list(server.resource("pods"),
                          field_selector=parse_field_selector(f"spec.nodeName={name}", kind="Pod"))
    return sorted(pods, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]))


def daemonset_lookup(server: API) -> DaemonSetExists:
    """A DaemonSetExists that asks `server`."""
    from kctl.machinery.errors import NotFound

    ds_rt = server.resource("daemonsets")

    def exists(namespace: str, name: str) -> bool:
        try:
            server.get(ds_rt, name, namespace=namespace)
            return True
        except NotFound:
            return False

    return exists
