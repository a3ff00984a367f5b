"""DefaultBinder: pods/binding through the API, one transaction for a batch."""

from __future__ import annotations

from plugin_harness import make_pod

from kctl.scheduler.framework import Code, CycleState, Handle
from kctl.scheduler.nodeinfo import PodInfo
from kctl.scheduler.plugins.default_binder import DefaultBinder


def _stored(api, name: str) -> PodInfo:
    pod = make_pod(name)
    del pod["metadata"]["uid"]
    return PodInfo(api.create(pod))


def test_bind_sets_node_and_condition(api):
    """A bound pod has spec.nodeName and PodScheduled=True in the store."""
    pod = _stored(api, "p")
    assert DefaultBinder(handle=Handle(api=api)).bind(CycleState(), pod, "n1") is None
    stored = api.get(api.resource("pods"), "p", namespace="default")
    assert stored["spec"]["nodeName"] == "n1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= stored["status"]["conditions"][0].items()


def test_bind_all_is_one_transaction_and_fails_alone(api):
    """A batch writes every good binding at once; a pod already bound fails by itself."""
    pods = [_stored(api, f"p{i}") for i in range(3)]
    binder = DefaultBinder(handle=Handle(api=api))
    assert binder.bind(CycleState(), pods[1], "elsewhere") is None
    before = api.store.revision()
    got = binder.bind_all([(CycleState(), p, "n1") for p in pods])
    assert [s is None for s in got] == [True, False, True]
    assert got[1].code is Code.ERROR and "already assigned" in got[1].reasons[0]
    assert api.store.revision() == before + 2  # two writes, nothing for the conflict


def test_stale_uid_is_refused(api):
    """A pod deleted and created again under the same name is not bound by an old decision."""
    old = _stored(api, "p")
    api.delete(api.resource("pods"), "p", namespace="default")
    _stored(api, "p")
    status = DefaultBinder(handle=Handle(api=api)).bind(CycleState(), old, "n1")
    assert status is not None and "UID" in status.reasons[0]


def test_without_api_is_an_error():
    """A binder with no API server says so instead of raising."""
    status = DefaultBinder(handle=Handle()).bind(CycleState(), PodInfo(make_pod("p")), "n1")
    assert status.code is Code.ERROR
