"""pod_status: phase (getPhase), conditions with kept transition times, container statuses, QoS."""

from __future__ import annotations

import pytest
from podharness import container, make_pod

from kctl.agent.probes import ProbeManager
from kctl.agent.status import compute_phase, pod_status, qos_class, terminated_reason
from kctl.runtime.interface import ContainerState, PodSandbox

SANDBOX = PodSandbox(id="p1", name="kctl_default_web_web-0123", labels={}, running=True, ip="10.88.0.7")
NOW = 1_700_000_000.0


def instance(name: str, restart: int, state: str, *, exit_code: int | None = None, kind: str = "app",
             oom: bool = False, error: str = "") -> ContainerState:
    return ContainerState(id=f"{name}-{restart}", name=f"x_{name}_{restart}", pod_id="p1",
                          labels={"io.kctl.container.name": name, "io.kctl.container.kind": kind,
                                  "io.kctl.container.restart": str(restart)},
                          image="img", image_id="sha256:1", state=state, exit_code=exit_code, oom_killed=oom,
                          started_at="2023-11-14T22:13:20Z",
                          finished_at="2023-11-14T22:13:21Z" if exit_code is not None else "",
                          error=error)


def running(name: str = "app") -> dict:
    return {"name": name, "state": {"running": {}}, "lastState": {}, "ready": True}


def terminated(code: int, name: str = "app") -> dict:
    return {"name": name, "state": {"terminated": {"exitCode": code}}, "lastState": {}, "ready": False}


def waiting(name: str = "app", last: int | None = None) -> dict:
    last_state = {"terminated": {"exitCode": last}} if last is not None else {}
    return {"name": name, "state": {"waiting": {"reason": "x"}}, "lastState": last_state, "ready": False}


@pytest.mark.parametrize(("policy", "inits", "apps", "phase"), [
    ("Always", [], [waiting()], "Pending"),
    ("Always", [], [running()], "Running"),
    ("Always", [], [running(), terminated(0, "b")], "Running"),
    ("Always", [], [terminated(0)], "Running"),
    ("Always", [], [waiting(last=1)], "Running"),
    ("OnFailure", [], [terminated(0)], "Succeeded"),
    ("OnFailure", [], [terminated(1)], "Running"),
    ("Never", [], [terminated(0), terminated(0, "b")], "Succeeded"),
    ("Never", [], [terminated(0), terminated(2, "b")], "Failed"),
    ("Never", [], [running(), terminated(2, "b")], "Running"),
    ("Always", [running("i")], [waiting()], "Pending"),
    ("Always", [terminated(0, "i")], [running()], "Running"),
    ("Never", [terminated(1, "i")], [waiting()], "Failed"),
    ("OnFailure", [terminated(1, "i")], [waiting()], "Pending"),
    ("Always", [waiting("i", last=1)], [waiting()], "Pending"),
], ids=["waiting", "running", "one-done-one-running", "always-completed", "crash-loop", "onfailure-done",
        "onfailure-failed", "never-all-ok", "never-one-failed", "never-still-running", "init-running",
        "init-done", "init-failed-never", "init-failed-retry", "init-crash-loop"])
def test_compute_phase(policy: str, inits: list[dict], apps: list[dict], phase: str) -> None:
    """getPhase over container statuses."""
    assert compute_phase({"spec": {"restartPolicy": policy}}, inits, apps) == phase


@pytest.mark.parametrize(("state", "reason"), [
    (instance("a", 0, "exited", exit_code=0), "Completed"),
    (instance("a", 0, "exited", exit_code=1), "Error"),
    (instance("a", 0, "exited", exit_code=137, oom=True), "OOMKilled"),
    (instance("a", 0, "exited", exit_code=128, error="no such file"), "StartError"),
], ids=["completed", "error", "oom", "start-error"])
def test_terminated_reason(state: ContainerState, reason: str) -> None:
    """Terminated reasons as the kubelet's."""
    assert terminated_reason(state) == reason


def test_container_statuses() -> None:
    """Current instance gives state, the one before lastState; waiting reasons override."""
    pod = make_pod(containers=[container("app"), container("crash"), container("new")],
                   init=[container("init")])
    found = [instance("init", 0, "exited", exit_code=0, kind="init"), instance("app", 1, "running"),
             instance("app", 0, "exited", exit_code=2), instance("crash", 3, "exited", exit_code=1),
             instance("crash", 2, "exited", exit_code=1)]
    status = pod_status(pod, SANDBOX, found, ProbeManager(), NOW, host_ip="10.77.0.11",
                        waiting={"crash": ("CrashLoopBackOff", "back-off 40s")})
    by_name = {s["name"]: s for s in status["containerStatuses"]}
    assert by_name["app"]["state"]["running"]["startedAt"] == "2023-11-14T22:13:20Z"
    assert by_name["app"]["lastState"]["terminated"]["exitCode"] == 2
    assert by_name["app"]["restartCount"] == 1 and by_name["app"]["ready"] and by_name["app"]["started"]
    assert by_name["app"]["containerID"] == "podman://app-1"
    assert by_name["crash"]["state"] == {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}
    assert by_name["crash"]["lastState"]["terminated"]["containerID"] == "podman://crash-3"
    assert by_name["crash"]["restartCount"] == 3
    assert by_name["new"]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert status["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert status["podIP"] == "10.88.0.7" and status["hostIP"] == "10.77.0.11"
    assert status["phase"] == "Pending"


def test_transition_times_and_start_time_are_kept() -> None:
    """lastTransitionTime stays while a condition keeps its status; startTime once set stays."""
    pod = make_pod()
    first = pod_status(pod, SANDBOX, [instance("app", 0, "running")], ProbeManager(), NOW)
    later = pod_status({**pod, "status": first}, SANDBOX, [instance("app", 0, "running")], ProbeManager(), NOW + 60)
    assert later["startTime"] == first["startTime"]
    assert later["conditions"] == first["conditions"]
    changed = pod_status({**pod, "status": later}, SANDBOX, [instance("app", 0, "exited", exit_code=1)],
                         ProbeManager(), NOW + 120)
    ready = next(c for c in changed["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["lastTransitionTime"] != first["conditions"][1]["lastTransitionTime"]
    assert ready["reason"] == "ContainersNotReady" and ready["message"] == "containers with unready status: [app]"


def test_terminal_phase_is_kept() -> None:
    """A Succeeded or Failed pod never goes back, whatever the runtime shows."""
    pod = {**make_pod(), "status": {"phase": "Failed", "reason": "DeadlineExceeded", "message": "m"}}
    status = pod_status(pod, SANDBOX, [instance("app", 0, "running")], ProbeManager(), NOW)
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", "DeadlineExceeded", "m")


@pytest.mark.parametrize(("resources", "qos"), [
    ([{}], "BestEffort"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}}], "Guaranteed"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1Gi"}}], "Guaranteed"),
    ([{"requests": {"cpu": "100m"}}], "Burstable"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}}, {}], "Burstable"),
], ids=["none", "limits-only", "equal-requests", "requests-only", "one-of-two"])
def test_qos_class(resources: list[dict], qos: str) -> None:
    """QoS class from requests and limits."""
    pod = make_pod(containers=[container(f"c{i}", resources=r) for i, r in enumerate(resources)])
    assert qos_class(pod) == qos
