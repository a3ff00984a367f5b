"""sync_pod, terminate_pod and cleanup_orphans on the in-memory runtime, with a fake clock.

Each test drives a pod through the syncs the agent would make and checks the runtime's
objects and calls, the status and the events.
"""

from __future__ import annotations

import pytest
from podharness import IMAGE, Harness, config_map, container, make_pod, secret

from kctl.agent.lifecycle import STARTED_RECHECK_SECONDS
from kctl.agent.podsync import cleanup_orphans, go_duration, should_restart, sync_pod
from kctl.runtime.interface import (
    LABEL_CONTAINER,
    LABEL_CONTAINER_KIND,
    LABEL_MANAGED,
    LABEL_POD_UID,
    LABEL_RESTART,
    LABEL_SPEC_HASH,
    ContainerSpec,
    PodSandboxSpec,
)

# -- creating and adopting -------------------------------------------------------------------------


def test_new_pod_runs_and_is_ready(node: Harness) -> None:
    """A new pod gets one Podman pod and its containers running; status Running, then Ready on the next look."""
    result = node.sync(make_pod(containers=[container("app"), container("side")]))
    assert node.runtime.count("create_pod") == 1
    assert node.runtime.count("create_container") == 2
    assert result.status["phase"] == "Running"
    assert node.condition("Ready")["status"] == "False"  # started by this sync: ready from the next look
    assert result.requeue_after == pytest.approx(STARTED_RECHECK_SECONDS)
    first_events = result.events
    node.advance(STARTED_RECHECK_SECONDS)
    result = node.sync()
    status = result.status
    assert status["phase"] == "Running"
    assert node.condition("Ready")["status"] == "True"
    assert node.condition("PodScheduled")["status"] == "True"
    assert status["hostIP"] == "10.77.0.11" and status["podIP"].startswith("10.88.")
    assert all("running" in s["state"] and s["ready"] and s["started"] for s in status["containerStatuses"])
    assert node.status("app")["containerID"].startswith("podman://")
    assert [e.reason for e in first_events] == ["Pulled", "Created", "Started"] * 2
    assert first_events[1].field_path == "spec.containers{app}"
    assert node.runtime.count("create_container") == 2


def test_a_container_that_exits_at_once_is_never_ready(node: Harness) -> None:
    """A container started by a sync is not ready in that sync's status: one that exits at once never counts.

    (A ReplicaSet counted such a pod available for a moment and the Deployment scaled an old
    ReplicaSet down under maxUnavailable 0.)
    """
    result = node.sync(make_pod(containers=[container("app", command=["sh", "-c", "sleep 0.1; exit 1"])]))
    assert "running" in node.status("app")["state"] and node.status("app")["ready"] is False
    assert node.condition("Ready")["status"] == "False"
    node.advance(max(result.requeue_after or 0, 0.1))
    node.runtime.settle()
    node.sync()
    assert node.status("app")["ready"] is False and node.condition("Ready")["status"] == "False"


def test_runtime_warnings_become_warning_events(node: Harness) -> None:
    """What Podman warns of when creating a container (limits it ignores, rootless on cgroup v1) is an event."""
    node.runtime.create_warnings = ["Resource limits are not supported and ignored on cgroups V1 rootless systems"]
    result = node.sync(make_pod(containers=[container("app")]))
    warned = [e for e in result.events if e.reason == "RuntimeWarning"]
    assert [(e.type, e.field_path) for e in warned] == [("Warning", "spec.containers{app}")]
    assert warned[0].message == "Podman: Resource limits are not supported and ignored on cgroups V1 rootless systems"
    assert result.status["phase"] == "Running"


def test_objects_carry_kctl_labels(node: Harness) -> None:
    """Podman pod and containers carry the managed, pod and container labels, and unique names."""
    node.sync(make_pod(name="web", uid="abcdef12-3456"))
    sandbox = node.runtime.list_pods({})[0]
    assert sandbox.name == "kctl_default_web_abcdef12"
    assert sandbox.labels[LABEL_MANAGED] == "true" and sandbox.labels[LABEL_POD_UID] == "abcdef12-3456"
    state = node.runtime.list_containers({})[0]
    assert state.name == "kctl_default_web_abcdef12_app_0"
    assert state.labels[LABEL_CONTAINER] == "app" and state.labels[LABEL_CONTAINER_KIND] == "app"
    assert state.labels[LABEL_RESTART] == "0" and len(state.labels[LABEL_SPEC_HASH]) == 16


def test_second_sync_does_nothing_more(node: Harness) -> None:
    """Level-triggered: a second sync creates, starts, pulls or removes nothing."""
    node.sync(make_pod(containers=[container("app"), container("side")]))
    mark = len(node.runtime.calls)
    result = node.sync()
    changing = {"create_pod", "create_container", "start_container", "stop_container", "remove_container",
                "remove_pod", "pull_image", "create_volume", "write_files"}
    assert [c for c in node.runtime.calls[mark:] if c[0] in changing] == []
    assert result.events == []


def test_adopts_after_agent_restart(node: Harness) -> None:
    """A new agent (fresh context, same runtime) adopts the pod: no second Podman pod or container."""
    node.sync(make_pod())
    node.restart_agent()
    result = node.sync()
    assert node.runtime.count("create_pod") == 1
    assert node.runtime.count("create_container") == 1
    assert result.status["phase"] == "Running"


def test_dead_sandbox_is_recreated(node: Harness) -> None:
    """A Podman pod that stopped (host reboot) is removed and made again; containers restart."""
    node.sync(make_pod())
    old = node.runtime.list_pods({})[0].id
    node.runtime.stop_sandbox(old)
    node.sync()
    pods = node.runtime.list_pods({})
    assert len(pods) == 1 and pods[0].id != old and pods[0].running
    assert "SandboxChanged" in node.reasons()
    assert "running" in node.status("app")["state"]
    assert node.status("app")["restartCount"] == 1


def test_dead_sandbox_not_recreated_under_never(node: Harness) -> None:
    """restartPolicy Never: a pod whose Podman pod died after its containers ran ends Failed."""
    node.sync(make_pod(restart_policy="Never"))
    node.runtime.stop_sandbox(node.runtime.list_pods({})[0].id)
    node.sync()
    assert node.runtime.count("create_pod") == 1 and node.runtime.count("create_container") == 1
    assert node.pod["status"]["phase"] == "Failed"
    assert node.status("app")["state"]["terminated"]["exitCode"] == 137


def test_created_but_not_started_is_adopted(node: Harness) -> None:
    """A container created by an agent that stopped before starting it is started, not made again."""
    start = node.runtime.start_container
    node.runtime.start_container = lambda container_id: None  # type: ignore[method-assign]
    node.sync(make_pod())
    node.runtime.start_container = start  # type: ignore[method-assign]
    assert node.status("app")["state"]["waiting"]["reason"] == "ContainerCreating"
    node.restart_agent()
    node.sync()
    assert node.runtime.count("create_container") == 1
    assert "running" in node.status("app")["state"]


def test_post_start_hook_failure_kills_container(node: Harness) -> None:
    """A failing postStart hook is reported and the container killed, then restarted per policy."""
    app = container("app", lifecycle={"postStart": {"exec": {"command": ["setup"]}}})
    node.runtime.set_exec_result(1, container="app", argv=["setup"])
    node.sync(make_pod(containers=[app], restart_policy="Never"))
    assert "FailedPostStartHook" in node.reasons()
    assert node.status("app")["state"]["terminated"]["exitCode"] == 143
    assert node.pod["status"]["phase"] == "Failed"


def test_sync_never_mutates_and_never_raises(node: Harness) -> None:
    """A runtime failing every call yields a FailedSync event and a retry, not an exception."""
    pod = make_pod()

    def broken(*args, **kwargs):
        raise ConnectionError("podman went away")

    node.runtime.list_pods = broken  # type: ignore[method-assign]
    result = sync_pod(pod, node.runtime, node.ctx)
    assert [e.reason for e in result.events] == ["FailedSync"]
    assert result.requeue_after is not None and result.status == {}


# -- restart policy and back-off --------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "command", "phase", "restarts", "reason"), [
    ("Always", ["true"], "Running", 1, "Completed"),
    ("Always", ["false"], "Running", 1, "Error"),
    ("OnFailure", ["true"], "Succeeded", 0, "Completed"),
    ("OnFailure", ["false"], "Running", 1, "Error"),
    ("Never", ["true"], "Succeeded", 0, "Completed"),
    ("Never", ["false"], "Failed", 0, "Error"),
], ids=["always-exit0", "always-exit1", "onfailure-exit0", "onfailure-exit1", "never-exit0", "never-exit1"])
def test_restart_policy(node: Harness, policy: str, command: list[str], phase: str, restarts: int,
                        reason: str) -> None:
    """Exited containers are restarted (or not) per restartPolicy; the phase follows."""
    node.sync(make_pod(restart_policy=policy, containers=[container("app", command=command)]))
    node.advance(1)
    node.sync()
    status = node.status("app")
    assert node.pod["status"]["phase"] == phase
    assert status["restartCount"] == restarts
    assert status["state"]["terminated"]["reason"] == reason
    assert node.runtime.count("create_container") == 1 + restarts


def test_crash_loop_back_off_timing(node: Harness) -> None:
    """The first crash restarts at once; then 10 s, 20 s, 40 s of CrashLoopBackOff between restarts."""
    node.sync(make_pod(containers=[container("app", command=["sh", "-c", "exit 3"])]))
    node.sync()  # first restart: immediate
    assert node.status("app")["restartCount"] == 1
    for delay, restarts in ((10, 2), (20, 3), (40, 4)):
        node.advance(1)
        result = node.sync()
        waiting = node.status("app")["state"]["waiting"]
        assert waiting["reason"] == "CrashLoopBackOff"
        assert f"back-off {delay}s restarting failed container=app" in waiting["message"]
        assert result.requeue_after == pytest.approx(delay - 1)
        assert node.status("app")["lastState"]["terminated"]["exitCode"] == 3
        node.advance(delay - 1.5)
        node.sync()
        assert node.status("app")["restartCount"] == restarts - 1, "restarted before its back-off ran out"
        node.advance(0.5)
        node.sync()
        assert node.status("app")["restartCount"] == restarts
    assert node.pod["status"]["phase"] == "Running"
    assert node.reasons().count("BackOff") == 3


def test_back_off_resets_after_ten_minutes_of_running(node: Harness) -> None:
    """A container that ran 10 minutes is restarted at once when it crashes again."""
    node.sync(make_pod())
    for _ in range(2):  # two crashes: the next delay would be 20 s
        node.runtime.crash(node.running_id("app"), 1)
        node.advance(11)
        node.sync()
    assert node.status("app")["restartCount"] == 2
    node.advance(601)
    node.runtime.crash(node.running_id("app"), 1)
    node.sync()
    assert node.status("app")["restartCount"] == 3
    assert "running" in node.status("app")["state"]


def test_last_state_and_old_instances(node: Harness) -> None:
    """lastState holds the previous exit; only the two newest instances of a container are kept."""
    node.sync(make_pod())
    for code in (2, 5, 7):
        node.runtime.crash(node.running_id("app"), code)
        node.advance(301)
        node.sync()
    status = node.status("app")
    assert status["restartCount"] == 3 and "running" in status["state"]
    last = status["lastState"]["terminated"]
    assert last["exitCode"] == 7 and last["reason"] == "Error"
    assert last["containerID"].startswith("podman://") and last["startedAt"] and last["finishedAt"]
    assert len(node.container_ids("app")) == 2


def test_oom_killed_reason(node: Harness) -> None:
    """A container killed for memory shows reason OOMKilled with its exit code."""
    node.sync(make_pod(restart_policy="Never"))
    node.runtime.crash(node.running_id("app"), 137, oom=True)
    node.sync()
    terminated = node.status("app")["state"]["terminated"]
    assert terminated == {**terminated, "exitCode": 137, "reason": "OOMKilled"}
    assert node.pod["status"]["phase"] == "Failed"


def test_failed_start_is_a_crash(node: Harness) -> None:
    """A container that cannot start shows StartError and is retried under back-off."""
    node.runtime.start_errors["app"] = 'exec: "nope": executable file not found in $PATH'
    node.sync(make_pod())
    assert node.status("app")["state"]["terminated"]["reason"] == "StartError"
    node.advance(1)
    node.sync()
    assert node.status("app")["state"]["waiting"]["reason"] == "CrashLoopBackOff"


@pytest.mark.parametrize(("policy", "code", "expected"), [
    ("Always", 0, True), ("Always", 1, True), ("OnFailure", 0, False), ("OnFailure", 1, True),
    ("Never", 0, False), ("Never", 1, False),
], ids=["always-0", "always-1", "onfailure-0", "onfailure-1", "never-0", "never-1"])
def test_should_restart(policy: str, code: int, expected: bool) -> None:
    """should_restart is the restartPolicy table."""
    assert should_restart(policy, code) is expected


@pytest.mark.parametrize(("seconds", "text"), [(10, "10s"), (0.1, "100ms"), (160, "2m40s"), (300, "5m0s")],
                         ids=["seconds", "millis", "minutes", "max"])
def test_go_duration(seconds: float, text: str) -> None:
    """Back-off delays print as Go durations, as in kubelet messages."""
    assert go_duration(seconds) == text


# -- init containers ---------------------------------------------------------------------------------


def test_init_containers_run_in_order(node: Harness) -> None:
    """Each init container must exit 0 before the next starts; app containers start after all."""
    pod = make_pod(init=[container("first", command=["sleep", "5"]), container("second", command=["true"])])
    node.sync(pod)
    assert [c[1].split("_")[-2] for c in node.runtime.calls_to("create_container")] == ["first"]
    assert node.pod["status"]["phase"] == "Pending"
    assert node.condition("Initialized")["status"] == "False"
    assert node.status("app")["state"]["waiting"]["reason"] == "PodInitializing"
    node.advance(5)
    node.sync()
    names = [c[1].split("_")[-2] for c in node.runtime.calls_to("create_container")]
    assert names == ["first", "second", "app"]
    assert node.pod["status"]["phase"] == "Running"
    assert node.condition("Initialized")["status"] == "True"
    assert node.status("first")["state"]["terminated"]["reason"] == "Completed"


@pytest.mark.parametrize(("policy", "phase", "retried"), [
    ("Never", "Failed", False), ("OnFailure", "Pending", True), ("Always", "Pending", True),
], ids=["never-fails-pod", "onfailure-retries", "always-retries"])
def test_init_container_failure(node: Harness, policy: str, phase: str, retried: bool) -> None:
    """A failed init container fails the pod under Never, else is retried with back-off."""
    node.sync(make_pod(restart_policy=policy, init=[container("init", command=["false"])]))
    node.advance(1)
    node.sync()
    node.advance(1)
    node.sync()
    assert node.pod["status"]["phase"] == phase
    assert node.runtime.count("create_container") == (2 if retried else 1)
    assert not node.container_ids("app")
    if retried:
        assert node.status("init")["state"]["waiting"]["reason"] == "CrashLoopBackOff"


# -- images ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "reason"), [
    ("Never", "ErrImageNeverPull"), ("IfNotPresent", "ErrImagePull"), ("Always", "ErrImagePull"),
], ids=["never", "if-not-present", "always"])
def test_missing_image(node: Harness, policy: str, reason: str) -> None:
    """A missing image that cannot be pulled leaves the container waiting with the kubelet's reason."""
    node.sync(make_pod(containers=[container("app", image="example.org/missing:1", imagePullPolicy=policy)]))
    waiting = node.status("app")["state"]["waiting"]
    assert waiting["reason"] == reason
    assert node.pod["status"]["phase"] == "Pending"
    assert node.runtime.count("pull_image") == (0 if policy == "Never" else 1)


def test_image_pull_back_off_then_recovery(node: Harness) -> None:
    """ErrImagePull, then ImagePullBackOff without pulling, then a pull once the back-off ran out."""
    image = "example.org/app:1"
    node.sync(make_pod(containers=[container("app", image=image)]))
    assert node.status("app")["state"]["waiting"]["reason"] == "ErrImagePull"
    node.advance(5)
    result = node.sync()
    assert node.status("app")["state"]["waiting"] == {"reason": "ImagePullBackOff",
                                                      "message": f'Back-off pulling image "{image}"'}
    assert result.requeue_after == pytest.approx(5)
    assert node.runtime.count("pull_image") == 1
    node.runtime.pullable.add(image)
    node.advance(5)
    node.sync()
    assert "running" in node.status("app")["state"]
    assert node.runtime.count("pull_image") == 2
    assert {"Pulling", "Failed", "BackOff", "Pulled", "Started"} <= set(node.reasons())


def test_image_appearing_locally_is_used(node: Harness) -> None:
    """IfNotPresent: an image loaded on the host while in back-off is used at the next sync."""
    image = "example.org/app:1"
    node.sync(make_pod(containers=[container("app", image=image)]))
    node.runtime.images.add(image)
    node.advance(1)
    node.sync()
    assert "running" in node.status("app")["state"]


def test_always_uses_local_image_when_pull_fails(node: Harness) -> None:
    """Always: a failed pull of an image present on the host runs it anyway, with a Warning."""
    node.runtime.images.add("docker.io/library/busybox:1")  # a registry image (localhost/ ones are never pulled)
    node.sync(make_pod(containers=[container("app", image="docker.io/library/busybox:1", imagePullPolicy="Always")]))
    assert "running" in node.status("app")["state"]
    warning = next(e for e in node.events if e.reason == "Failed")
    assert warning.type == "Warning" and "using the image present on the host" in warning.message


def test_image_change_recreates_container(node: Harness) -> None:
    """A new image in the Pod kills the running container and starts one of the new image."""
    pod = make_pod()
    node.sync(pod)
    old = node.running_id("app")
    node.runtime.images.add("localhost/busybox:v2")
    changed = make_pod(containers=[container("app", image="localhost/busybox:v2")])
    node.sync({**changed, "status": node.pod["status"]})
    assert ("stop_container", old, 30) in node.runtime.calls
    assert node.status("app")["restartCount"] == 1 and node.status("app")["image"] == "localhost/busybox:v2"
    assert "running" in node.status("app")["state"]
    killing = next(e for e in node.events if e.reason == "Killing")
    assert killing.message == "Container app definition changed, will be restarted"


def test_other_spec_change_does_not_recreate(node: Harness) -> None:
    """Pods are immutable but for images: another change (env) does not recreate the container."""
    node.sync(make_pod())
    changed = make_pod(containers=[container("app", env=[{"name": "X", "value": "1"}])])
    node.sync({**changed, "status": node.pod["status"]})
    assert node.runtime.count("create_container") == 1 and node.runtime.count("stop_container") == 0


# -- environment ----------------------------------------------------------------------------------------


def test_missing_config_map_is_create_container_config_error(node: Harness) -> None:
    """A missing ConfigMap key ref waits with CreateContainerConfigError, then starts once it exists."""
    env = [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}]
    node.sync(make_pod(containers=[container("app", env=env)]))
    waiting = node.status("app")["state"]["waiting"]
    assert waiting == {"reason": "CreateContainerConfigError", "message": 'configmap "settings" not found'}
    node.sync()
    assert node.reasons().count("Failed") == 1, "the same error is reported once"
    node.put(config_map("settings", {"mode": "fast"}))
    node.sync()
    spec_env = node.runtime._containers[node.running_id("app")].spec.env  # noqa: SLF001 - test peek
    assert spec_env == {"MODE": "fast"}


def test_command_is_expanded_with_env(node: Harness) -> None:
    """$(VAR) in command and args is expanded with the container's environment."""
    app = container("app", command=["sh", "-c"], args=["echo $(GREETING) $$(NOT)"],
                    env=[{"name": "GREETING", "value": "hello"}])
    node.sync(make_pod(containers=[app]))
    spec: ContainerSpec = node.runtime._containers[node.running_id("app")].spec  # noqa: SLF001
    assert spec.entrypoint == ["sh", "-c"] and spec.command == ["echo hello $(NOT)"]


# -- volumes --------------------------------------------------------------------------------------------


def _volume_pod() -> dict:
    app = container("app", volumeMounts=[{"name": "config", "mountPath": "/etc/app"},
                                         {"name": "creds", "mountPath": "/run/creds"},
                                         {"name": "scratch", "mountPath": "/tmp/scratch"}])
    return make_pod(containers=[app], volumes=[
        {"name": "config", "configMap": {"name": "settings", "items": [{"key": "mode", "path": "conf/mode",
                                                                         "mode": 0o400}]}},
        {"name": "creds", "secret": {"secretName": "db"}},
        {"name": "scratch", "emptyDir": {}},
    ])


def test_volumes_are_created_and_filled_before_start(node: Harness) -> None:
    """Named volumes are made with labels; configMap/secret files are written before the start."""
    node.put(config_map("settings", {"mode": "fast", "other": "x"}))
    node.put(secret("db", {"password": "s3cret"}))
    node.sync(_volume_pod())
    volumes = set(node.runtime.list_volumes({LABEL_POD_UID: node.pod["metadata"]["uid"]}))
    assert len(volumes) == 3
    names = [c[0] for c in node.runtime.calls]
    assert names.index("write_files") < names.index("start_container")
    app = node.running_id("app")
    assert node.runtime.read_file(app, "/etc/app/conf/mode") == (b"fast", 0o400)
    assert node.runtime.read_file(app, "/etc/app/other") is None
    assert node.runtime.read_file(app, "/run/creds/password") == (b"s3cret", 0o600)
    mounts = {m.target: m for m in node.runtime._containers[app].spec.mounts}  # noqa: SLF001
    assert mounts["/etc/app"].read_only and mounts["/run/creds"].read_only
    assert not mounts["/tmp/scratch"].read_only


def test_volume_files_updated_in_place(node: Harness) -> None:
    """A changed ConfigMap reaches the running container's read-only volume; unchanged, nothing is written.

    The write goes through a never-started volume-writer container (Podman cannot write into
    a running container's read-only mount), which is removed at once.
    """
    node.put(config_map("settings", {"mode": "fast"}))
    node.put(secret("db", {"password": "s3cret"}))
    node.sync(_volume_pod())
    app = node.running_id("app")
    writes = node.runtime.count("write_files")
    node.sync()
    assert node.runtime.count("write_files") == writes
    node.put(config_map("settings", {"mode": "slow"}))
    node.sync()
    assert node.runtime.count("write_files") == writes + 1
    assert node.runtime.read_file(app, "/etc/app/conf/mode") == (b"slow", 0o400)
    assert node.running_id("app") == app and node.runtime.count("start_container") == 1
    created = [c[1] for c in node.runtime.calls_to("create_container")]
    assert created[1].endswith("_volume-writer_config")
    assert node.runtime.container_ids() == [app]
    node.sync()
    assert node.runtime.count("write_files") == writes + 1


def test_missing_volume_source_is_failed_mount(node: Harness) -> None:
    """A missing non-optional ConfigMap volume keeps the pod ContainerCreating with FailedMount."""
    node.sync(_volume_pod())
    waiting = node.status("app")["state"]["waiting"]
    assert waiting["reason"] == "ContainerCreating"
    assert 'configmap "settings" not found' in waiting["message"]
    assert node.reasons() == ["FailedMount"]
    assert node.runtime.count("create_container") == 0


def test_unsupported_volume_is_refused(node: Harness) -> None:
    """An nfs volume cannot be provided: the reason is on the status."""
    app = container("app", volumeMounts=[{"name": "data", "mountPath": "/data"}])
    node.sync(make_pod(containers=[app], volumes=[{"name": "data", "nfs": {"server": "s", "path": "/d"}}]))
    assert "not supported by kctl" in node.status("app")["state"]["waiting"]["message"]


def test_sub_path_file_is_written_into_the_container(node: Harness) -> None:
    """A configMap key mounted with subPath is written at mountPath in the container, not mounted."""
    node.put(config_map("settings", {"nginx.conf": "worker_processes 1;"}))
    app = container("app", volumeMounts=[{"name": "config", "mountPath": "/etc/nginx/nginx.conf",
                                          "subPath": "nginx.conf"}])
    node.sync(make_pod(containers=[app], volumes=[{"name": "config", "configMap": {"name": "settings"}}]))
    app_id = node.running_id("app")
    assert node.runtime.read_file(app_id, "/etc/nginx/nginx.conf") == (b"worker_processes 1;", 0o644)
    assert node.runtime._containers[app_id].spec.mounts == ()  # noqa: SLF001


def test_pod_ip_env_is_the_sandbox_ip(node: Harness) -> None:
    """status.podIP in env is the Podman pod's IP, the same the status reports."""
    env = [{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    node.sync(make_pod(containers=[container("app", env=env)]))
    spec_env = node.runtime._containers[node.running_id("app")].spec.env  # noqa: SLF001
    assert spec_env == {"IP": node.pod["status"]["podIP"]}


# -- probes ---------------------------------------------------------------------------------------------


def test_remote_http_probe_runs_through_exec(node: Harness) -> None:
    """On a remote host an httpGet liveness probe runs wget inside the container."""
    node.ctx.remote = True
    probe = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10}
    node.sync(make_pod(containers=[container("app", livenessProbe=probe)]))
    argv = node.runtime.calls_to("exec")[0][2]
    assert argv[0] == "wget" and argv[-1] == "http://127.0.0.1:8080/healthz"



def test_liveness_failure_restarts(node: Harness) -> None:
    """Liveness failing failureThreshold times gets Unhealthy events, Killing, and a restart."""
    probe = {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 5, "failureThreshold": 2}
    node.sync(make_pod(containers=[container("app", livenessProbe=probe)]))
    node.runtime.set_exec_result(1, container="app")
    node.advance(5)
    node.sync()
    assert node.status("app")["restartCount"] == 0
    node.advance(5)
    node.sync()
    assert node.status("app")["restartCount"] == 1 and "running" in node.status("app")["state"]
    assert node.reasons().count("Unhealthy") == 2
    killing = [e for e in node.events if e.reason == "Killing"]
    assert [e.message for e in killing] == ["Container app failed liveness probe, will be restarted"]
    assert node.status("app")["lastState"]["terminated"]["exitCode"] == 143


def test_readiness_drives_ready_condition(node: Harness) -> None:
    """Not ready until the readiness probe passes; failing it makes Ready False again."""
    probe = {"exec": {"command": ["check"]}, "periodSeconds": 2, "failureThreshold": 1}
    node.runtime.set_exec_result(1, container="app")
    node.sync(make_pod(containers=[container("app", readinessProbe=probe)]))
    assert node.condition("Ready")["status"] == "False" and node.pod["status"]["phase"] == "Running"
    assert node.status("app")["ready"] is False
    node.runtime.set_exec_result(0, container="app")
    node.advance(2)
    node.sync()
    assert node.condition("Ready")["status"] == "True"
    assert node.condition("ContainersReady")["status"] == "True"
    node.runtime.set_exec_result(1, container="app")
    node.advance(2)
    node.sync()
    assert node.condition("Ready")["status"] == "False"
    assert node.runtime.count("stop_container") == 0


def test_startup_probe_gates_liveness(node: Harness) -> None:
    """Liveness does not run before the startup probe succeeds; started follows it."""
    startup = {"exec": {"command": ["started"]}, "periodSeconds": 1, "failureThreshold": 30}
    liveness = {"exec": {"command": ["alive"]}, "periodSeconds": 1}
    node.runtime.set_exec_result(1, container="app", argv=["started"])
    node.sync(make_pod(containers=[container("app", startupProbe=startup, livenessProbe=liveness)]))
    for _ in range(3):
        node.advance(1)
        node.sync()
    argvs = [c[2] for c in node.runtime.calls_to("exec")]
    assert ("alive",) not in argvs and node.status("app")["started"] is False
    node.runtime.set_exec_result(0, container="app", argv=["started"])
    node.advance(1)
    node.sync()
    node.advance(1)
    node.sync()
    assert node.status("app")["started"] is True
    assert ("alive",) in [c[2] for c in node.runtime.calls_to("exec")]


def test_probe_initial_delay(node: Harness) -> None:
    """A probe first runs initialDelaySeconds after the container was first seen running."""
    probe = {"exec": {"command": ["alive"]}, "initialDelaySeconds": 10, "periodSeconds": 5}
    result = node.sync(make_pod(containers=[container("app", livenessProbe=probe)]))
    assert node.runtime.count("exec") == 0 and result.requeue_after == pytest.approx(STARTED_RECHECK_SECONDS)
    node.advance(STARTED_RECHECK_SECONDS)
    result = node.sync()
    assert node.runtime.count("exec") == 0 and result.requeue_after == pytest.approx(10 - STARTED_RECHECK_SECONDS)
    node.advance(10 - STARTED_RECHECK_SECONDS)
    node.sync()
    assert node.runtime.count("exec") == 1


# -- deadline ---------------------------------------------------------------------------------------


def test_active_deadline_fails_pod(node: Harness) -> None:
    """Past activeDeadlineSeconds the containers are stopped and the pod Failed/DeadlineExceeded."""
    node.sync(make_pod(activeDeadlineSeconds=60))
    node.advance(61)
    node.sync()
    status = node.pod["status"]
    assert status["phase"] == "Failed" and status["reason"] == "DeadlineExceeded"
    assert node.runtime.count("stop_container") == 1
    node.sync()
    assert node.runtime.count("create_container") == 1


# -- terminating ------------------------------------------------------------------------------------


def test_terminate_runs_pre_stop_within_grace(node: Harness) -> None:
    """preStop runs first; the stop gets the grace left (never more); pod and volumes are removed."""
    hook = {"preStop": {"exec": {"command": ["drain"]}}}
    app = container("app", lifecycle=hook, volumeMounts=[{"name": "scratch", "mountPath": "/s"}])
    node.sync(make_pod(containers=[app], volumes=[{"name": "scratch", "emptyDir": {}}]))
    app_id = node.running_id("app")
    node.runtime.set_exec_result(0, container="app", argv=["drain"], duration=3)
    before = node.pod["status"]["phase"]
    result = node.terminate(grace_seconds=5)
    assert ("exec", app_id, ("drain",)) in node.runtime.calls
    assert ("stop_container", app_id, 2) in node.runtime.calls
    assert result.requeue_after is None and result.status["phase"] == before
    assert node.runtime.list_pods({}) == [] and node.runtime.list_volumes({}) == []
    assert [e.reason for e in result.events] == ["Killing"]


def test_terminate_pre_stop_outliving_grace(node: Harness) -> None:
    """A preStop hook longer than the grace is cut off, and the stop gets no more time."""
    node.sync(make_pod(containers=[container("app", lifecycle={"preStop": {"exec": {"command": ["slow"]}}})]))
    app_id = node.running_id("app")
    node.runtime.set_exec_result(0, container="app", argv=["slow"], duration=60)
    result = node.terminate(grace_seconds=4)
    assert ("stop_container", app_id, 0) in node.runtime.calls
    assert "FailedPreStopHook" in [e.reason for e in result.events]


def test_terminate_with_zero_grace_skips_hooks(node: Harness) -> None:
    """Grace 0 (force): no hook runs, containers are stopped at once."""
    node.sync(make_pod(containers=[container("app", lifecycle={"preStop": {"exec": {"command": ["x"]}}}),
                                   container("side")]))
    node.terminate(grace_seconds=0)
    assert node.runtime.count("exec") == 0
    assert all(call[2] == 0 for call in node.runtime.calls_to("stop_container"))
    assert node.runtime.list_pods({}) == []


def test_terminate_forgets_back_off(node: Harness) -> None:
    """After termination the pod's back-off state is gone (a new pod of the same uid starts afresh)."""
    node.sync(make_pod(containers=[container("app", command=["false"])]))
    node.sync()
    uid = node.pod["metadata"]["uid"]
    assert not node.ctx.backoff.ready((uid, "app"), node.clock())
    node.terminate(grace_seconds=1)
    assert node.ctx.backoff.ready((uid, "app"), node.clock())


# -- orphans ----------------------------------------------------------------------------------------


def test_cleanup_orphans_touches_only_kctl_objects(node: Harness) -> None:
    """Only kctl-labelled pods and volumes of unknown uids go; others (and kept uids) stay."""
    keep = make_pod(name="keep", uid="keep-uid", volumes=[{"name": "v", "emptyDir": {}}],
                    containers=[container("app", volumeMounts=[{"name": "v", "mountPath": "/v"}])])
    gone = make_pod(name="gone", uid="gone-uid", volumes=[{"name": "v", "emptyDir": {}}],
                    containers=[container("app", volumeMounts=[{"name": "v", "mountPath": "/v"}])])
    node.sync(keep)
    node.sync(gone)
    foreign = node.runtime.create_pod(PodSandboxSpec(name="someone-elses", labels={"owner": "me"}))
    node.runtime._pods[foreign.id].labels.pop(LABEL_MANAGED)  # noqa: SLF001 - Podman would not add it
    node.runtime.create_container(foreign.id, ContainerSpec(name="theirs", image=IMAGE, labels={}))
    node.runtime._containers[node.runtime.container_ids()[-1]].labels.pop(LABEL_MANAGED)  # noqa: SLF001
    node.runtime.create_volume("their-volume", {})
    node.runtime._volumes["their-volume"].labels.pop(LABEL_MANAGED)  # noqa: SLF001
    removed = cleanup_orphans(node.runtime, keep_uids={"keep-uid"})
    assert removed == ["kctl_default_gone_gone-uid", "kctl_default_gone_gone-uid_v"]
    assert {p.name for p in node.runtime.list_pods({})} == {"kctl_default_keep_keep-uid", "someone-elses"}
    assert set(node.runtime.list_volumes({})) == {"kctl_default_keep_keep-uid_v", "their-volume"}
    assert len(node.runtime.list_containers({})) == 2
