"""A DaemonSet in `kctl daemon`, on real Podman: its pod runs on the node, rolls, and goes with it.

The daemon fixture (conftest.py) runs the node agent, the controllers and the scheduler
on the private Podman service. The DaemonSet lives in its own namespace, deleted after
the test whatever happened; the `runtime` fixture then removes any kctl container left.
"""

from __future__ import annotations

import contextlib

import pytest

from kctl.machinery.errors import APIError, NotFound
from kctl.runtime.interface import LABEL_MANAGED, LABEL_POD_UID, RuntimeError_

from .conftest import NODE, wait_for
from .test_daemon_pods import IMAGE

pytestmark = pytest.mark.integration
NAMESPACE = "ds-it"
LABEL_POD_NAMESPACE = "io.kctl.pod.namespace"


def daemonset(script: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": NAMESPACE},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": IMAGE, "imagePullPolicy": "Never",
                                         "command": ["sh", "-c", script]}]}}}}


def ds_pods(api) -> list[dict]:
    items, _ = api.list(api.resource("pods"), namespace=NAMESPACE)
    return items


def running_pod(api) -> dict | None:
    """The DaemonSet's one pod when it is the only one and Running, else None."""
    pods = ds_pods(api)
    if len(pods) != 1 or (pods[0].get("status") or {}).get("phase") != "Running":
        return None
    return pods[0]


def app_containers(runtime) -> list:
    """kctl's app containers of pods in the test namespace, whatever their state."""
    return [c for c in runtime.list_containers({LABEL_MANAGED: "true", LABEL_POD_NAMESPACE: NAMESPACE})
            if c.labels.get("io.kctl.container.name") == "app"]


def output(runtime, pod_uid: str) -> str:
    """What the running app container of the pod with `pod_uid` printed ("" if none yet)."""
    for state in app_containers(runtime):
        if state.labels.get(LABEL_POD_UID) == pod_uid and state.state == "running":
            with contextlib.suppress(RuntimeError_):
                return b"".join(runtime.logs(state.id)).decode(errors="replace")
    return ""


def update_template(api, script: str) -> None:
    """Change the DaemonSet's container command (retrying when the controller's status write got there first)."""
    from kctl.machinery.errors import Conflict

    for _ in range(20):
        current = api.get(api.resource("daemonsets"), "agent", namespace=NAMESPACE)
        current["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", script]
        try:
            api.update(current)
            return
        except Conflict:
            continue
    pytest.fail("could not update the DaemonSet's template")


@pytest.fixture
def namespace(api, daemon):
    """The test's namespace; deleted (and waited for) after the test, also when it failed."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    try:
        yield NAMESPACE
    finally:
        with contextlib.suppress(APIError):
            api.delete(api.resource("namespaces"), NAMESPACE)

        def gone() -> bool:
            try:
                api.get(api.resource("namespaces"), NAMESPACE)
            except NotFound:
                return True
            return False

        wait_for(gone, what=f"namespace {NAMESPACE} deleted", daemon=daemon)


def test_daemonset_runs_rolls_and_is_deleted(api, daemon, runtime, namespace) -> None:
    """One pod Running on the node; a template change replaces it; deleting the DaemonSet removes pod and container."""
    api.create(daemonset("echo v1; exec sleep 3600"))
    first = wait_for(lambda: running_pod(api), what="the daemon pod Running", daemon=daemon,
                     detail=lambda: [(p["metadata"]["name"], (p.get("status") or {}).get("phase"))
                                     for p in ds_pods(api)])
    assert first["spec"]["nodeName"] == NODE
    assert first["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    first_uid = first["metadata"]["uid"]
    wait_for(lambda: "v1" in output(runtime, first_uid), what="v1 printed by the first pod", daemon=daemon)

    update_template(api, "echo v2; exec sleep 3600")

    def rolled() -> dict | None:
        pod = running_pod(api)
        return pod if pod is not None and pod["metadata"]["uid"] != first_uid else None

    second = wait_for(rolled, what="a new pod Running, the old one gone", daemon=daemon,
                      detail=lambda: [(p["metadata"]["name"], (p.get("status") or {}).get("phase"))
                                      for p in ds_pods(api)])
    assert second["metadata"]["labels"]["controller-revision-hash"] != \
        first["metadata"]["labels"]["controller-revision-hash"]
    assert second["spec"]["containers"][0]["command"] == ["sh", "-c", "echo v2; exec sleep 3600"]
    wait_for(lambda: "v2" in output(runtime, second["metadata"]["uid"]), what="v2 printed by the new pod",
             daemon=daemon)
    wait_for(lambda: [c.labels.get(LABEL_POD_UID) for c in app_containers(runtime)] == [second["metadata"]["uid"]],
             what="only the new pod's container on Podman", daemon=daemon,
             detail=lambda: [(c.labels.get(LABEL_POD_UID), c.state) for c in app_containers(runtime)])

    api.delete(api.resource("daemonsets"), "agent", namespace=NAMESPACE)
    wait_for(lambda: not ds_pods(api), what="the DaemonSet's pods deleted", daemon=daemon)
    wait_for(lambda: not app_containers(runtime), what="the containers removed from Podman", daemon=daemon,
             detail=lambda: [(c.labels.get(LABEL_POD_UID), c.state) for c in app_containers(runtime)])
    assert not runtime.list_pods({LABEL_MANAGED: "true", LABEL_POD_NAMESPACE: NAMESPACE})
