"""The scheduler with the volume plugins over a real store: pods follow their claims' volumes, explain
why when they cannot, and are tried again when a claim appears."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from scheduler_harness import node, pod

from kctl.scheduler.scheduler import Scheduler

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
from storage_objects import claim, storage_class, volume  # noqa: E402

WAIT = 60.0


def wait_for(predicate, *, timeout: float = WAIT) -> bool:
    """Poll until predicate() holds (the scheduler works in threads); False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _stored(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k != "status"}


def _bound_claim(api, name: str, pv_name: str, node_name: str) -> None:
    """A claim bound to a PV pinned to node_name, as the PV controller leaves them."""
    pv = api.create(_stored(volume(pv_name, node=node_name)))
    api.update_status({**pv, "status": {"phase": "Bound"}})
    c = api.create(_stored(claim(name, volume_name=pv_name)))
    api.update_status({**c, "status": {"phase": "Bound"}})


def _claim_pod(name: str, claim_name: str) -> dict:
    return pod(name, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}])


def _get_pod(api, name: str) -> dict:
    return api.get(api.resource("pods"), name, namespace="default")


def _feed(api, sched: Scheduler) -> None:
    for n in api.list(api.resource("nodes"))[0]:
        sched.on_node_add(n)
    for p in api.list(api.resource("pods"))[0]:
        sched.on_pod_add(p)


def test_pod_goes_to_the_node_of_its_volume(api):
    """A claim bound to a PV pinned to n2: the pod is bound to n2, whatever the scores say."""
    for name in ("n1", "n2", "n3"):
        api.create(node(name))
    _bound_claim(api, "data", "pv-data", "n2")
    api.create(_claim_pod("db", "data"))
    sched = Scheduler(api)
    _feed(api, sched)
    sched.schedule_pending()
    assert _get_pod(api, "db")["spec"]["nodeName"] == "n2"


def test_volume_node_affinity_conflict_is_explained(api):
    """The volume's node cordoned: the pod stays Pending; the other nodes had a volume node affinity conflict."""
    api.create(node("n1"))
    api.create(node("n2"))
    api.create(node("n3", unschedulable=True))
    _bound_claim(api, "data", "pv-data", "n3")
    api.create(_claim_pod("db", "data"))
    sched = Scheduler(api)
    _feed(api, sched)
    sched.schedule_pending()
    got = _get_pod(api, "db")
    assert not got["spec"].get("nodeName")
    condition = next(c for c in got["status"]["conditions"] if c["type"] == "PodScheduled")
    assert condition["message"].startswith("0/3 nodes are available: 1 node(s) were unschedulable, "
                                           "2 node(s) had volume node affinity conflict.")


def test_wait_for_first_consumer_claim_gets_the_pods_node(api):
    """An unbound claim of a WaitForFirstConsumer class: the pod is bound and the claim names its node."""
    api.create(node("n1"))
    api.create(node("n2"))
    api.create(storage_class())
    api.create(_stored(claim("data")))
    api.create(_claim_pod("db", "data"))
    sched = Scheduler(api)
    _feed(api, sched)
    sched.schedule_pending()
    placed = _get_pod(api, "db")["spec"]["nodeName"]
    annotations = api.get(api.resource("persistentvolumeclaims"), "data", namespace="default")["metadata"][
        "annotations"]
    assert annotations["volume.kubernetes.io/selected-node"] == placed
    assert annotations["volume.kubernetes.io/storage-provisioner"] == "kctl.io/local-volume"


def test_missing_claim_waits_then_schedules_when_it_appears(api):
    """A pod whose claim does not exist waits, saying so; the claim's creation (a PVC event) schedules it."""
    api.create(node("n1"))
    api.create(storage_class())
    api.create(_claim_pod("db", "data"))
    sched = Scheduler(api)
    stop = threading.Event()
    runner = threading.Thread(target=sched.run, args=(stop,))
    runner.start()
    try:
        def message() -> str:
            conditions = (_get_pod(api, "db").get("status") or {}).get("conditions") or ()
            return next((c["message"] for c in conditions if c["type"] == "PodScheduled"), "")

        assert wait_for(lambda: message() == '0/1 nodes are available: persistentvolumeclaim "data" not found.')
        api.create(_stored(claim("data")))
        assert wait_for(lambda: _get_pod(api, "db")["spec"].get("nodeName") == "n1")
    finally:
        stop.set()
        runner.join(30)
    assert not runner.is_alive()
