"""The daemon's ControlPlane (kctl.daemon.controlplane) runs exactly the controllers its settings choose."""

from __future__ import annotations

import time

import pytest

from kctl.daemon.controlplane import ControlPlane
from kctl.daemon.settings import DaemonSettings

#: how long a wait may take before the test fails as hung (asserts no timing)
WAIT_SECONDS = 30.0


def wait_for(predicate, *, what: str):
    """Poll predicate until it returns something true; AssertionError naming `what` if it never does."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)
    return value


def template(label: str) -> dict:
    return {"metadata": {"labels": {"app": label}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def replicaset(name: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}}, "template": template(name)}}


def deployment(name: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": template(name)}}


def items(api, resource: str) -> list[dict]:
    return api.list(api.resource(resource), namespace="default")[0]


@pytest.fixture
def running_plane(api):
    """Start a ControlPlane for the settings given (no leader election); stopped after the test."""
    planes: list[ControlPlane] = []

    def start(settings: DaemonSettings) -> ControlPlane:
        plane = ControlPlane(api, settings, leader_election=False, identity="test")
        planes.append(plane)
        plane.start()
        assert plane.manager.wait_until_running(WAIT_SECONDS)
        return plane

    yield start
    for plane in planes:
        plane.stop()


@pytest.mark.parametrize("chosen, deployments_act", [
    (("replicaset",), False),
    (("replicaset", "deployment"), True),
], ids=["replicaset-only", "replicaset-and-deployment"])
def test_control_plane_runs_only_the_chosen_controllers(api, running_plane, chosen, deployments_act):
    """With --controllers naming some, only those get a queue and act; the others leave their objects alone."""
    api.create(deployment("web"))
    plane = running_plane(DaemonSettings(controllers=chosen))
    assert [c.name for c in plane.manager.controllers] == list(chosen)
    assert all(plane.manager.queue(name) is not None for name in chosen)
    assert plane.manager.queue("garbagecollector") is None and plane.manager.queue("job") is None
    api.create(replicaset("plain"))
    wait_for(lambda: len([p for p in items(api, "pods") if p["metadata"]["labels"].get("app") == "plain"]) == 2,
             what="the ReplicaSet controller makes the pods")
    def owned() -> list[dict]:
        return [rs for rs in items(api, "replicasets") if rs["metadata"].get("ownerReferences")]

    if deployments_act:
        wait_for(owned, what="the Deployment controller makes its ReplicaSet")
    else:
        # the Deployment existed before the ReplicaSet controller's pass that made 2 pods: a running
        # Deployment controller, started with it and fed by the same informers, would have acted by now
        assert owned() == [], "no Deployment controller runs: the Deployment has no ReplicaSet"


def test_control_plane_with_no_controllers_leads_with_no_queues(api, running_plane):
    """An empty --controllers list runs no controller; the manager still leads (and the scheduler runs)."""
    plane = running_plane(DaemonSettings(controllers=()))
    assert plane.manager.controllers == [] and plane.manager.is_leader
    api.create(replicaset("idle"))
    assert plane.manager.queue("replicaset") is None
