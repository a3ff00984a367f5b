"""A Pod's status computed from what the runtime shows, as the kubelet's generateAPIPodStatus.

The pod logic calls `pod_status` at the end of every sync_pod and terminate_pod (kctl.agent.syncstate)
with the pod's Podman pod (sandbox), all its container instances, the probe results and
the waiting reasons it met (ErrImagePull, CrashLoopBackOff, ...). The status is
recomputed each time from those, never patched: only `startTime`, the conditions'
`lastTransitionTime` (while their status is unchanged) and a terminal phase are carried
over from the previous status.

Phase follows the kubelet's getPhase: Pending while initialising or while a container
waits without having run; Running while one runs (or will be restarted); Succeeded when
all exited 0 and none will restart; Failed otherwise; Succeeded and Failed never change.
"""

from __future__ import annotations

import datetime as dt
from typing import Collection, Iterable, Mapping, Sequence

from kctl.agent.containers import KIND_APP, KIND_INIT
from kctl.agent.probes import ProbeManager
from kctl.machinery.quantity import parse_quantity
from kctl.runtime.interface import LABEL_CONTAINER, LABEL_CONTAINER_KIND, LABEL_RESTART, ContainerState, PodSandbox

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
TERMINAL_PHASES = (SUCCEEDED, FAILED)
Waiting = tuple[str, str]  # (reason, message)


def rfc3339(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def restart_of(state: ContainerState) -> int:
    try:
        return int(state.labels.get(LABEL_RESTART, "0"))
    except ValueError:
        return 0


def instances(containers: Iterable[ContainerState], kind: str, name: str) -> list[ContainerState]:
    """The instances of one container of the pod, newest (highest restart count) first."""
    found = [c for c in containers if c.labels.get(LABEL_CONTAINER) == name
             and c.labels.get(LABEL_CONTAINER_KIND, KIND_APP) == kind]
    rank = {"running": 2, "created": 1, "exited": 0}
    return sorted(found, key=lambda c: (restart_of(c), rank.get(c.state, 0), c.started_at), reverse=True)


def terminated_reason(state: ContainerState) -> str:
    if state.oom_killed:
        return "OOMKilled"
    if state.error:
        return "StartError"
    return "Completed" if state.exit_code == 0 else "Error"


def terminated_state(state: ContainerState) -> dict:
    out = {"exitCode": state.exit_code if state.exit_code is not None else 0, "reason": terminated_reason(state),
           "startedAt": state.started_at or None, "finishedAt": state.finished_at or None,
           "containerID": f"podman://{state.id}"}
    if state.error:
        out["message"] = state.error
    return out


def _waiting(reason: str, message: str = "") -> dict:
    return {"waiting": {"reason": reason, **({"message": message} if message else {})}}


# -- one container -------------------------------------------------------------------------------

def container_status(pod: dict, container: dict, *, kind: str, found: Sequence[ContainerState],
                     probes: ProbeManager, waiting: Waiting | None, default_waiting: str,
                     previous: Mapping[str, object] | None, fresh: Collection[str] = ()) -> dict:
    """One entry of containerStatuses / initContainerStatuses.

    `fresh`: ids of instances this sync started. One is reported running but not yet ready:
    its readiness comes from the next look at the runtime, as the kubelet reports a container
    it started from its next relist, so a process that exits at once is never counted ready.
    """
    uid = str(pod["metadata"]["uid"])
    current = found[0] if found else None
    older_exited = next((c for c in found[1:] if c.state == "exited"), None)
    status: dict = {"name": container.get("name", ""), "image": container.get("image", ""),
                    "imageID": current.image_id if current else "", "lastState": {}, "ready": False,
                    "started": False, "restartCount": restart_of(current) if current else
                    int((previous or {}).get("restartCount") or 0)}
    if current is not None:
        status["containerID"] = f"podman://{current.id}"
    if waiting is not None:
        status["state"] = _waiting(*waiting)
    elif current is None:
        status["state"] = _waiting(default_waiting)
    elif current.state == "running":
        status["state"] = {"running": {"startedAt": current.started_at or None}}
        status["started"] = probes.started(uid, container, current.id)
        status["ready"] = current.id not in fresh and probes.ready(uid, container, current.id)
    elif current.state == "exited":
        status["state"] = {"terminated": terminated_state(current)}
        status["ready"] = kind == KIND_INIT and current.exit_code == 0
    else:
        status["state"] = _waiting("ContainerCreating")
    # Waiting to restart, the instance that exited is the last state; else the one before it.
    last = current if waiting is not None and current is not None and current.state == "exited" else older_exited
    if last is not None:
        status["lastState"] = {"terminated": terminated_state(last)}
    elif not found and previous and previous.get("lastState"):
        status["lastState"] = previous["lastState"]
    return status


# -- phase and conditions -------------------------------------------------------------------------

def _init_phase(init_statuses: Sequence[dict], restart_policy: str) -> str | None:
    """Pending or Failed while initialising; None once every init container exited 0."""
    pending = failed = False
    for status in init_statuses:
        state = status["state"]
        if "terminated" in state:
            failed |= state["terminated"]["exitCode"] != 0
            pending |= state["terminated"]["exitCode"] != 0
        elif "waiting" in state and status["lastState"].get("terminated", {}).get("exitCode", 0) != 0:
            failed = pending = True
        else:
            pending = True
    if failed and restart_policy == "Never":
        return FAILED
    return PENDING if pending else None


def compute_phase(pod: dict, init_statuses: Sequence[dict], app_statuses: Sequence[dict]) -> str:
    """The kubelet's getPhase over the computed container statuses."""
    restart_policy = str((pod.get("spec") or {}).get("restartPolicy") or "Always")
    initialising = _init_phase(init_statuses, restart_policy)
    if initialising is not None:
        return initialising
    running = waiting = stopped = succeeded = 0
    for status in app_statuses:
        state = status["state"]
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            succeeded += state["terminated"]["exitCode"] == 0
        elif status["lastState"].get("terminated"):
            stopped += 1
        else:
            waiting += 1
    if waiting:
        return PENDING
    if running:
        return RUNNING
    if stopped:
        if restart_policy == "Always":
            return RUNNING
        if stopped == succeeded:
            return SUCCEEDED
        return FAILED if restart_policy == "Never" else RUNNING
    return PENDING


def _condition(kind: str, ok: bool, now: float, previous: Mapping[str, dict], *, reason: str = "",
               message: str = "") -> dict:
    value = "True" if ok else "False"
    before = previous.get(kind) or {}
    since = before.get("lastTransitionTime") if before.get("status") == value else None
    condition = {"type": kind, "status": value, "lastProbeTime": None, "lastTransitionTime": since or rfc3339(now)}
    if not ok and reason:
        condition["reason"] = reason
    if not ok and message:
        condition["message"] = message
    return condition


def conditions(phase: str, init_statuses: Sequence[dict], app_statuses: Sequence[dict], now: float,
               previous: Sequence[dict]) -> list[dict]:
    """Initialized, Ready, ContainersReady and PodScheduled, keeping unchanged transition times."""
    before = {c.get("type", ""): c for c in previous if isinstance(c, dict)}
    not_init = [s["name"] for s in init_statuses if s["state"].get("terminated", {}).get("exitCode", 1) != 0]
    not_ready = [s["name"] for s in app_statuses if not s["ready"]]
    completed = phase == SUCCEEDED
    ready_reason = "PodCompleted" if completed else "ContainersNotReady"
    ready_message = "" if completed else f"containers with unready status: [{' '.join(not_ready)}]"
    return [
        _condition("Initialized", not not_init or completed, now, before, reason="ContainersNotInitialized",
                   message=f"containers with incomplete status: [{' '.join(not_init)}]"),
        _condition("Ready", not not_ready and not completed, now, before, reason=ready_reason, message=ready_message),
        _condition("ContainersReady", not not_ready and not completed, now, before, reason=ready_reason,
                   message=ready_message),
        _condition("PodScheduled", True, now, before),
    ]


def qos_class(pod: dict) -> str:
    """Guaranteed, Burstable or BestEffort, from the containers' requests and limits."""
    containers = [c for key in ("initContainers", "containers") for c in (pod.get("spec") or {}).get(key) or ()]
    any_set, guaranteed = False, True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        any_set |= bool(requests or limits)
        for name in ("cpu", "memory"):
            request = requests.get(name, limits.get(name))
            if name not in limits or request is None or not _same_quantity(request, limits[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _same_quantity(a: object, b: object) -> bool:
    try:
        return parse_quantity(a) == parse_quantity(b)  # type: ignore[arg-type]
    except ValueError:
        return a == b


# -- the whole status -------------------------------------------------------------------------------

def pod_status(pod: dict, sandbox: PodSandbox | None, containers: Sequence[ContainerState], probes: ProbeManager,
               now: float, *, host_ip: str = "", waiting: Mapping[str, Waiting] | None = None,
               phase: str | None = None, reason: str = "", message: str = "", fresh: Collection[str] = ()) -> dict:
    """The Pod's status; `phase`/`reason`/`message` force a pod-level verdict (DeadlineExceeded)."""
    spec, previous = pod.get("spec") or {}, pod.get("status") or {}
    waiting = waiting or {}
    before = {s.get("name"): s for key in ("initContainerStatuses", "containerStatuses")
              for s in previous.get(key) or () if isinstance(s, dict)}
    init_statuses = []
    for container in spec.get("initContainers") or ():
        name = str(container.get("name", ""))
        init_statuses.append(container_status(pod, container, kind=KIND_INIT,
                                              found=instances(containers, KIND_INIT, name), probes=probes,
                                              waiting=waiting.get(name), default_waiting="PodInitializing",
                                              previous=before.get(name)))
    initialised = _init_phase(init_statuses, str(spec.get("restartPolicy") or "Always")) is None
    app_statuses = []
    for container in spec.get("containers") or ():
        name = str(container.get("name", ""))
        app_statuses.append(container_status(pod, container, kind=KIND_APP,
                                             found=instances(containers, KIND_APP, name), probes=probes,
                                             waiting=waiting.get(name),
                                             default_waiting="ContainerCreating" if initialised else "PodInitializing",
                                             previous=before.get(name), fresh=fresh))
    computed = compute_phase(pod, init_statuses, app_statuses)
    kept = previous.get("phase") if previous.get("phase") in TERMINAL_PHASES else None
    final = kept or phase or computed
    status: dict = {"phase": final,
                    "conditions": conditions(final, init_statuses, app_statuses, now, previous.get("conditions") or ()),
                    "startTime": previous.get("startTime") or rfc3339(now), "qosClass": qos_class(pod)}
    if host_ip:
        status["hostIP"], status["hostIPs"] = host_ip, [{"ip": host_ip}]
    pod_ip = sandbox.ip if sandbox is not None and sandbox.running else ""
    if not pod_ip and final in TERMINAL_PHASES:
        pod_ip = str(previous.get("podIP") or "")
    if pod_ip:
        status["podIP"], status["podIPs"] = pod_ip, [{"ip": pod_ip}]
    if kept:
        reason, message = str(previous.get("reason") or ""), str(previous.get("message") or "")
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    status["containerStatuses"] = app_statuses
    return status


__all__ = ["FAILED", "PENDING", "RUNNING", "SUCCEEDED", "TERMINAL_PHASES", "Waiting", "compute_phase",
           "conditions", "container_status", "instances", "pod_status", "qos_class", "restart_of", "rfc3339",
           "terminated_reason", "terminated_state"]
