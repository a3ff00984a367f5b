"""`kctl daemon` end to end on real Podman: pods run, report status, restart, probe, stop.

Each test starts a daemon on its own store (fixtures in conftest.py), writes objects
through the API as `kctl apply` would, and checks what Podman runs and what the Pod's
status says. The demo image is localhost/busybox:demo (busybox: sh, httpd, wget...).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from kctl.machinery.errors import NotFound
from kctl.runtime.interface import LABEL_MANAGED, LABEL_POD_NAME, LABEL_POD_UID

from .conftest import NODE, wait_for

pytestmark = pytest.mark.integration
IMAGE = "localhost/busybox:demo"


def pod(name: str, containers: list[dict], **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 2, "containers": containers, **spec}}


def container(name: str, script: str, **fields) -> dict:
    return {"name": name, "image": IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", script], **fields}


def get_pod(api, name: str) -> dict | None:
    try:
        return api.get(api.resource("pods"), name, namespace="default")
    except NotFound:
        return None


def condition(obj: dict | None, kind: str) -> str | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond.get("status")
    return None


def container_status(obj: dict | None, name: str) -> dict:
    for status in ((obj or {}).get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == name:
            return status
    return {}


def events(api, name: str) -> list[str]:
    items, _ = api.list(api.resource("events"), namespace="default")
    return [e.get("reason", "") for e in items if (e.get("involvedObject") or {}).get("name") == name]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
            return response.read().decode()
    except OSError:
        return None


def test_web_pod_ready_serves_its_configmap_and_sees_updates(api, daemon, runtime) -> None:
    """A configMap-mounted page served on a host port; Ready via readiness; a ConfigMap edit reaches the file."""
    port = free_port()
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "page", "namespace": "default"},
                "data": {"index.html": "one\n"}})
    api.create(pod("web", [container(
        "httpd", "exec httpd -f -p 8080 -h /www",
        ports=[{"containerPort": 8080, "hostPort": port}],
        readinessProbe={"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
        volumeMounts=[{"name": "page", "mountPath": "/www"}])],
        volumes=[{"name": "page", "configMap": {"name": "page"}}]))
    ready = wait_for(lambda: condition(get_pod(api, "web"), "Ready") == "True" and get_pod(api, "web"),
                     what="pod web Ready", daemon=daemon)
    status = ready["status"]
    assert status["phase"] == "Running"
    assert status["podIP"] and status["hostIP"] and status["startTime"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodScheduled": "True", "Initialized": "True", "ContainersReady": "True", "Ready": "True"}
    httpd = container_status(ready, "httpd")
    assert httpd["ready"] and httpd["started"] and httpd["restartCount"] == 0
    assert httpd["containerID"].startswith("podman://") and httpd["image"] == IMAGE and httpd["imageID"]
    assert "running" in httpd["state"]
    assert fetch(port) == "one\n"
    api.patch(api.resource("configmaps"), "page", {"data": {"index.html": "two\n"}}, namespace="default")
    wait_for(lambda: fetch(port) == "two\n", what="the page updated in place", daemon=daemon)
    assert container_status(get_pod(api, "web"), "httpd")["restartCount"] == 0
    assert {"Pulled", "Created", "Started"} <= set(events(api, "web"))
    assert len(runtime.list_pods({LABEL_POD_NAME: "web"})) == 1


def test_init_containers_env_volumes_logs_and_exec(api, daemon, kctl) -> None:
    """Init containers run first; env, envFrom, secrets (0600) and downwardAPI reach the app; logs and exec work."""
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "default"},
                "data": {"COLOUR": "blue", "SIZE": "9"}})
    api.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "default"},
                "stringData": {"password": "hunter2"}})
    script = ("cat /work/first; echo colour=$COLOUR size=$SIZE pw=$PW me=$ME ns=$NS; "
              "stat -c %a /secret/password; cat /info/labels; echo; echo ready; exec sleep 3600")
    api.create(pod("app", [container(
        "main", script,
        env=[{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
             {"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
             {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        envFrom=[{"configMapRef": {"name": "settings"}}],
        volumeMounts=[{"name": "work", "mountPath": "/work"}, {"name": "secret", "mountPath": "/secret"},
                      {"name": "info", "mountPath": "/info"}])],
        initContainers=[container("first", "echo init-one > /work/first",
                                  volumeMounts=[{"name": "work", "mountPath": "/work"}]),
                        container("second", "test -f /work/first && echo init-two >> /work/first",
                                  volumeMounts=[{"name": "work", "mountPath": "/work"}])],
        volumes=[{"name": "work", "emptyDir": {}}, {"name": "secret", "secret": {"secretName": "creds"}},
                 {"name": "info", "downwardAPI": {"items": [
                     {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]))
    api.patch(api.resource("pods"), "app", {"metadata": {"labels": {"tier": "x"}}}, namespace="default")
    wait_for(lambda: b"ready" in kctl("logs", "app").stdout, what="app's output", daemon=daemon)
    out = kctl("logs", "app", "-c", "main").stdout.decode()
    assert out.splitlines()[:4] == ["init-one", "init-two", "colour=blue size=9 pw=hunter2 me=app ns=default", "600"]
    # the label patched after the create reaches the downwardAPI file (at once or by a later refresh, as the
    # kubelet's): the container may have started before the patch arrived, so read the file, not the log
    wait_for(lambda: b'tier="x"' in kctl("exec", "app", "--", "cat", "/info/labels").stdout,
             what="the patched label in the downwardAPI volume", daemon=daemon)
    inits = {s["name"]: s for s in get_pod(api, "app")["status"]["initContainerStatuses"]}
    assert inits["first"]["state"]["terminated"]["exitCode"] == 0
    assert inits["second"]["state"]["terminated"]["reason"] == "Completed"
    assert kctl("logs", "app", "--tail", "1").stdout == b"ready\n"
    assert b"Z ready" in kctl("logs", "app", "--timestamps", "--tail", "1").stdout
    result = kctl("exec", "app", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert (result.returncode, result.stdout, result.stderr) == (7, b"out\n", b"err\n")
    piped = kctl("exec", "-i", "app", "-c", "main", "--", "tr", "a-z", "A-Z", input=b"through stdin\n")
    assert (piped.returncode, piped.stdout) == (0, b"THROUGH STDIN\n")
    missing = kctl("exec", "app", "-c", "nope", "--", "true")
    assert missing.returncode != 0 and b"nope" in missing.stderr and b"Traceback" not in missing.stderr


def test_crash_loop_backs_off_and_keeps_the_last_state(api, daemon, kctl) -> None:
    """A container that keeps failing is restarted with back-off: CrashLoopBackOff, restartCount, lastState."""
    api.create(pod("crash", [container("boom", "echo boom; exit 3")]))

    def looping() -> dict | None:
        status = container_status(get_pod(api, "crash"), "boom")
        waiting = (status.get("state") or {}).get("waiting") or {}
        return status if status.get("restartCount", 0) >= 2 and waiting.get("reason") == "CrashLoopBackOff" else None

    status = wait_for(looping, what="CrashLoopBackOff after 2 restarts", daemon=daemon)
    last = status["lastState"]["terminated"]
    assert last["exitCode"] == 3 and last["reason"] == "Error" and last["startedAt"] and last["finishedAt"]
    assert "BackOff" in events(api, "crash")
    assert kctl("logs", "crash", "--previous").stdout == b"boom\n"
    assert get_pod(api, "crash")["status"]["phase"] == "Running"


@pytest.mark.parametrize(("policy", "script", "phase"), [
    ("Never", "exit 1", "Failed"),
    ("OnFailure", "exit 0", "Succeeded"),
    ("Never", "exit 0", "Succeeded"),
], ids=["never-fails", "onfailure-succeeds", "never-succeeds"])
def test_restart_policy_decides_the_final_phase(api, daemon, policy, script, phase) -> None:
    """restartPolicy Never/OnFailure: a finished container ends the pod in the phase its exit code says."""
    api.create(pod("once", [container("job", script)], restartPolicy=policy))
    done = wait_for(lambda: (get_pod(api, "once") or {}).get("status", {}).get("phase") in ("Succeeded", "Failed")
                    and get_pod(api, "once"), what=f"pod phase {phase}", daemon=daemon)
    assert done["status"]["phase"] == phase
    assert container_status(done, "job")["restartCount"] == 0


def test_liveness_failure_restarts_the_container(api, daemon) -> None:
    """A liveness probe that starts failing kills and restarts the container (Unhealthy, Killing)."""
    api.create(pod("sick", [container(
        "app", "touch /tmp/ok; sleep 2; rm /tmp/ok; exec sleep 3600",
        livenessProbe={"exec": {"command": ["cat", "/tmp/ok"]}, "periodSeconds": 1, "failureThreshold": 2})]))
    wait_for(lambda: container_status(get_pod(api, "sick"), "app").get("restartCount", 0) >= 1,
             what="a restart after liveness failures", daemon=daemon)
    reasons = events(api, "sick")
    assert "Unhealthy" in reasons and "Killing" in reasons
    last = container_status(get_pod(api, "sick"), "app")["lastState"]["terminated"]
    assert last["exitCode"] != 0


@pytest.mark.parametrize(("policy", "reasons"), [
    ("Never", {"ErrImageNeverPull"}),
    ("IfNotPresent", {"ErrImagePull", "ImagePullBackOff"}),
], ids=["never", "if-not-present"])
def test_missing_image_is_a_waiting_reason_not_a_crash(api, daemon, policy, reasons) -> None:
    """An image that is not on the host shows as the kubelet's waiting reason, and the daemon lives on."""
    api.create(pod("noimage", [{"name": "c", "image": "localhost/nothing:here", "imagePullPolicy": policy}]))
    wait_for(lambda: ((container_status(get_pod(api, "noimage"), "c").get("state") or {}).get("waiting") or {})
             .get("reason") in reasons, what=f"waiting reason in {reasons}", daemon=daemon)
    assert daemon.process is not None and daemon.process.poll() is None


def test_delete_runs_prestop_and_honours_a_short_grace_period(api, daemon, runtime, tmp_path) -> None:
    """Deletion runs preStop, kills a SIGTERM-ignoring container after the grace period, removes pod and object."""
    marks = tmp_path / "marks"
    marks.mkdir()
    api.patch(api.resource("namespaces"), "default",  # Pod Security baseline refuses hostPath volumes
              {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
    api.create(pod("stubborn", [container(
        "app", "trap '' TERM; while true; do sleep 1; done",
        lifecycle={"preStop": {"exec": {"command": ["sh", "-c", "echo stopping > /marks/prestop"]}}},
        volumeMounts=[{"name": "marks", "mountPath": "/marks"}])],
        volumes=[{"name": "marks", "hostPath": {"path": str(marks)}}]))
    wait_for(lambda: (get_pod(api, "stubborn") or {}).get("status", {}).get("phase") == "Running",
             what="pod Running", daemon=daemon)
    uid = get_pod(api, "stubborn")["metadata"]["uid"]
    started = time.monotonic()
    api.delete(api.resource("pods"), "stubborn", namespace="default")
    wait_for(lambda: get_pod(api, "stubborn") is None, what="the Pod object gone", daemon=daemon)
    elapsed = time.monotonic() - started
    assert (marks / "prestop").read_text() == "stopping\n"
    assert runtime.list_pods({LABEL_POD_UID: uid}) == []
    assert runtime.list_containers({LABEL_POD_UID: uid}) == []
    # grace 2 s: never Podman's default 10 s stop timeout (generous bound for a loaded machine)
    assert elapsed < 9, f"deletion took {elapsed:.1f} s with terminationGracePeriodSeconds 2"
    assert "Killing" in events(api, "stubborn")


def test_node_status_lease_and_clean_shutdown(api, daemon, runtime) -> None:
    """The Node reports capacity and nodeInfo, its Lease is renewed; SIGTERM exits 0 and leaves containers running."""
    node = api.get(api.resource("nodes"), NODE)
    status = node["status"]
    assert {"cpu", "memory", "pods"} <= set(status["capacity"]) and status["allocatable"]["pods"]
    assert status["nodeInfo"]["containerRuntimeVersion"].startswith("podman://")
    assert status["nodeInfo"]["kernelVersion"] and status["nodeInfo"]["operatingSystem"] == "linux"
    assert any(IMAGE in image.get("names", []) for image in status.get("images") or [])
    lease = api.get(api.resource("leases"), NODE, namespace="kube-node-lease")
    wait_for(lambda: api.get(api.resource("leases"), NODE, namespace="kube-node-lease")["spec"]["renewTime"]
             != lease["spec"]["renewTime"], what="the Lease renewed", daemon=daemon)
    api.create(pod("stays", [container("app", "exec sleep 3600")]))
    wait_for(lambda: (get_pod(api, "stays") or {}).get("status", {}).get("phase") == "Running",
             what="pod Running", daemon=daemon)
    assert daemon.kill(signal.SIGTERM) == 0
    uid = get_pod(api, "stays")["metadata"]["uid"]
    assert [c.state for c in runtime.list_containers({LABEL_POD_UID: uid})
            if c.labels.get("io.kctl.container.name") == "app"] == ["running"]


def test_sigkill_mid_creation_converges_without_duplicates_or_orphans(api, daemon, runtime, podman_service) -> None:
    """kill -9 while 10 pods are being made: the restarted daemon adopts, completes, and removes orphans only."""
    from kctl.runtime.interface import PodSandboxSpec

    # A leftover of a Pod that no longer exists (kctl's labels), and a container kctl did not make.
    orphan = runtime.create_pod(PodSandboxSpec(name="kctl_default_gone_00000000", labels={
        LABEL_MANAGED: "true", LABEL_POD_UID: "00000000-gone", LABEL_POD_NAME: "gone",
        "io.kctl.pod.namespace": "default"})).id
    podman = ["podman", "--url", podman_service.url]
    foreign = subprocess.run([*podman, "run", "-d", "--name", "not-kctl", "--label", "owner=someone-else", IMAGE,
                              "sleep", "3600"], capture_output=True, text=True, check=True).stdout.strip()
    try:
        for i in range(10):
            api.create(pod(f"p{i}", [container("app", "exec sleep 3600")]))
        wait_for(lambda: len(runtime.list_pods({LABEL_MANAGED: "true"})) >= 3, what="some pods made", daemon=daemon)
        daemon.kill(signal.SIGKILL)
        daemon.start()

        def converged() -> bool:
            pods = [get_pod(api, f"p{i}") for i in range(10)]
            return all((p or {}).get("status", {}).get("phase") == "Running" for p in pods)

        wait_for(converged, what="10 pods Running after the restart", daemon=daemon)
        uids = {get_pod(api, f"p{i}")["metadata"]["uid"] for i in range(10)}
        wait_for(lambda: {p.labels.get(LABEL_POD_UID) for p in runtime.list_pods({LABEL_MANAGED: "true"})} == uids,
                 what="the orphan removed", daemon=daemon,
                 detail=lambda: [(p.name, p.labels.get(LABEL_POD_UID) in uids)
                                 for p in runtime.list_pods({LABEL_MANAGED: "true"})])
        sandboxes = runtime.list_pods({LABEL_MANAGED: "true"})
        assert len(sandboxes) == 10, "one Podman pod per kctl Pod"
        apps = [c for c in runtime.list_containers({LABEL_MANAGED: "true"})
                if c.labels.get("io.kctl.container.name") == "app"]
        assert sorted(c.labels[LABEL_POD_UID] for c in apps) == sorted(uids), "one app container per Pod"
        assert all(c.state == "running" for c in apps)
        assert orphan not in {p.id for p in sandboxes}
        assert [c.id for c in runtime.list_containers({"owner": "someone-else"})] == [foreign]
        assert subprocess.run([*podman, "inspect", "-f", "{{.State.Running}}", foreign], capture_output=True,
                              text=True).stdout.strip() == "true"
    finally:
        subprocess.run([*podman, "rm", "-f", "-t", "0", foreign], capture_output=True)


def test_limits_security_context_hostname_and_startup_then_tcp_probes(api, daemon, kctl) -> None:
    """resources.limits, securityContext and hostname reach the process; startup gates a tcpSocket readiness probe."""
    api.create(pod("fenced", [container(
        "app", "sleep 2; exec httpd -f -p 9000 -h /",
        resources={"limits": {"cpu": "250m", "memory": "64Mi"}},
        securityContext={"runAsUser": 1000, "runAsGroup": 1000, "readOnlyRootFilesystem": True,
                         "capabilities": {"drop": ["ALL"]}},
        startupProbe={"exec": {"command": ["sh", "-c", "test $(cut -d' ' -f1 /proc/uptime | cut -d. -f1) -ge 0"]},
                      "periodSeconds": 1},
        readinessProbe={"tcpSocket": {"port": 9000}, "periodSeconds": 1})], hostname="fence-host"))
    ready = wait_for(lambda: condition(get_pod(api, "fenced"), "Ready") == "True" and get_pod(api, "fenced"),
                     what="Ready through a tcpSocket probe", daemon=daemon,
                     detail=lambda: (get_pod(api, "fenced") or {}).get("status"))
    assert container_status(ready, "app")["started"] is True
    script = ("id -u; id -g; hostname; touch /x 2>/dev/null || echo read-only; grep CapEff /proc/self/status; "
              "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cut -d' ' -f1 /sys/fs/cgroup/cpu.max; "
              "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max")
    result = kctl("exec", "fenced", "--", "sh", "-c", script)
    lines = result.stdout.decode().split("\n")
    assert lines[:4] == ["1000", "1000", "fence-host", "read-only"]
    assert lines[4].split() == ["CapEff:", "0000000000000000"]
    assert lines[5:7] == ["25000", str(64 << 20)]
