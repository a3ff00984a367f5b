"""VolumeBinding: claims' PVs pin pods to nodes; unbound WaitForFirstConsumer claims get a node at PreBind."""

from __future__ import annotations

import pytest
from plugin_harness import make_node, reasons, run_filter, snapshot_of
from storage_objects import claim, pod_with_claims, storage_class, volume

from kctl.scheduler.framework import Code, CycleState, Handle
from kctl.scheduler.nodeinfo import PodInfo
from kctl.scheduler.plugins.volume_binding import (ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER, BIND_CONFLICT,
                                                   NODE_CONFLICT, UNBOUND_IMMEDIATE, VolumeBinding)
from kctl.scheduler.volumelisters import ObjectListers

NODES = [make_node("n1"), make_node("n2", labels={"zone": "b"})]

CASES = [
    # (id, objects, pod, node, expected reasons)
    ("no-claims", [], pod_with_claims("p"), "n1", ()),
    ("missing-claim", [], pod_with_claims("p", "data"), "n1", ('persistentvolumeclaim "data" not found',)),
    ("claim-being-deleted", [claim("data", deleting=True)], pod_with_claims("p", "data"), "n1",
     ('persistentvolumeclaim "data" is being deleted',)),
    ("bound-pv-on-this-node", [claim("data", volume_name="pv1"), volume("pv1", node="n1")],
     pod_with_claims("p", "data"), "n1", ()),
    ("bound-pv-on-other-node", [claim("data", volume_name="pv1"), volume("pv1", node="n2")],
     pod_with_claims("p", "data"), "n1", (NODE_CONFLICT,)),
    ("bound-pv-without-affinity", [claim("data", volume_name="pv1"), volume("pv1")],
     pod_with_claims("p", "data"), "n1", ()),
    ("bound-pv-missing", [claim("data", volume_name="pv1")], pod_with_claims("p", "data"), "n1",
     ('persistentvolume "pv1" not found',)),
    ("unbound-immediate-class", [claim("data", class_name="fast"), storage_class("fast", mode="Immediate")],
     pod_with_claims("p", "data"), "n1", (UNBOUND_IMMEDIATE,)),
    ("unbound-no-class", [claim("data", class_name="")], pod_with_claims("p", "data"), "n1", (UNBOUND_IMMEDIATE,)),
    ("unbound-unknown-class", [claim("data", class_name="gone")], pod_with_claims("p", "data"), "n1",
     (UNBOUND_IMMEDIATE,)),
    ("wffc-provisioned-anywhere", [claim("data"), storage_class()], pod_with_claims("p", "data"), "n1", ()),
    ("wffc-selected-this-node", [claim("data", annotations={ANN_SELECTED_NODE: "n1"}), storage_class()],
     pod_with_claims("p", "data"), "n1", ()),
    ("wffc-selected-other-node", [claim("data", annotations={ANN_SELECTED_NODE: "n2"}), storage_class()],
     pod_with_claims("p", "data"), "n1", (BIND_CONFLICT,)),
    ("wffc-no-provisioner-no-pv", [claim("data", class_name="manual"),
                                   storage_class("manual", provisioner="kubernetes.io/no-provisioner")],
     pod_with_claims("p", "data"), "n1", (BIND_CONFLICT,)),
    ("wffc-static-pv-on-this-node", [claim("data", class_name="manual"), volume("pv1", node="n1",
                                                                                class_name="manual"),
                                     storage_class("manual", provisioner="kubernetes.io/no-provisioner")],
     pod_with_claims("p", "data"), "n1", ()),
    ("wffc-static-pv-on-other-node", [claim("data", class_name="manual"), volume("pv1", node="n2",
                                                                                 class_name="manual"),
                                      storage_class("manual", provisioner="kubernetes.io/no-provisioner")],
     pod_with_claims("p", "data"), "n1", (BIND_CONFLICT,)),
    ("wffc-static-pv-too-small", [claim("data", class_name="manual", storage="5Gi"),
                                  volume("pv1", class_name="manual", storage="1Gi"),
                                  storage_class("manual", provisioner="kubernetes.io/no-provisioner")],
     pod_with_claims("p", "data"), "n1", (BIND_CONFLICT,)),
    ("wffc-static-pv-wrong-access-mode", [claim("data", class_name="manual", access=("ReadWriteMany",)),
                                          volume("pv1", class_name="manual"),
                                          storage_class("manual", provisioner="kubernetes.io/no-provisioner")],
     pod_with_claims("p", "data"), "n1", (BIND_CONFLICT,)),
    ("wffc-static-pv-taken", [claim("data", class_name="manual"),
                              volume("pv1", class_name="manual", phase="Bound",
                                     claim_ref={"namespace": "default", "name": "other", "uid": "x"}),
                              storage_class("manual", provisioner="kubernetes.io/no-provisioner")],
     pod_with_claims("p", "data"), "n1", (BIND_CONFLICT,)),
    ("wffc-static-pv-selector-mismatch", [claim("data", class_name="manual", selector={"matchLabels": {"t": "a"}}),
                                          volume("pv1", class_name="manual", labels={"t": "b"}),
                                          storage_class("manual", provisioner="kubernetes.io/no-provisioner")],
     pod_with_claims("p", "data"), "n1", (BIND_CONFLICT,)),
    ("wffc-allowed-topology-elsewhere", [claim("data"), storage_class(allowed_topologies=[
        {"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}])], pod_with_claims("p", "data"), "n1",
     (BIND_CONFLICT,)),
    ("wffc-allowed-topology-here", [claim("data"), storage_class(allowed_topologies=[
        {"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}])], pod_with_claims("p", "data"), "n2", ()),
]


@pytest.mark.parametrize("objects,pod,node,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter(objects, pod, node, expected):
    """Each claim situation gives kube-scheduler's reason (or fits)."""
    plugin = VolumeBinding({}, Handle(), listers=ObjectListers(objects))
    assert reasons(run_filter(plugin, pod, snapshot_of(NODES), node)) == expected


def test_rejections_are_unresolvable():
    """Preemption cannot help a volume conflict: the status is UnschedulableAndUnresolvable."""
    plugin = VolumeBinding({}, Handle(), listers=ObjectListers([claim("data", volume_name="pv1"),
                                                                volume("pv1", node="n2")]))
    status = run_filter(plugin, pod_with_claims("p", "data"), snapshot_of(NODES), "n1")
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def _reserve(plugin: VolumeBinding, pod: dict, node: str) -> CycleState:
    state = CycleState()
    pi = PodInfo(pod)
    _, status = plugin.pre_filter(state, pi, plugin.handle.snapshot)
    assert status is None
    assert plugin.filter(state, pi, plugin.handle.snapshot.get(node)) is None
    assert plugin.reserve(state, pi, node) is None
    return state


def test_reserve_makes_the_next_pod_follow_the_claim():
    """Between Reserve and the claim's update, a second pod with the same claim only fits the reserved node."""
    snapshot = snapshot_of(NODES)
    plugin = VolumeBinding({}, Handle(snapshot=snapshot), listers=ObjectListers([claim("data"), storage_class()]))
    state = _reserve(plugin, pod_with_claims("a", "data"), "n1")
    second = pod_with_claims("b", "data")
    assert reasons(run_filter(plugin, second, snapshot, "n2")) == (BIND_CONFLICT,)
    assert run_filter(plugin, second, snapshot, "n1") is None
    plugin.unreserve(state, PodInfo(pod_with_claims("a", "data")), "n1")
    assert run_filter(plugin, second, snapshot, "n2") is None


def test_reserve_gives_each_static_pv_to_one_claim():
    """Two claims, one fitting static PV: after the first pod reserves it, the second pod finds none."""
    objects = [claim("a", class_name="manual"), claim("b", class_name="manual"), volume("pv1", class_name="manual"),
               storage_class("manual", provisioner="kubernetes.io/no-provisioner")]
    snapshot = snapshot_of(NODES)
    plugin = VolumeBinding({}, Handle(snapshot=snapshot), listers=ObjectListers(objects))
    _reserve(plugin, pod_with_claims("pa", "a"), "n1")
    assert reasons(run_filter(plugin, pod_with_claims("pb", "b"), snapshot, "n1")) == (BIND_CONFLICT,)


def test_pre_bind_annotates_the_claim_for_the_provisioner(api):
    """PreBind writes selected-node and storage-provisioner on an unbound WaitForFirstConsumer claim."""
    sc = storage_class()
    api.create(sc)
    stored = api.create({k: v for k, v in claim("data").items() if k != "status"})
    snapshot = snapshot_of(NODES)
    plugin = VolumeBinding({}, Handle(api=api, snapshot=snapshot))
    pod = pod_with_claims("p", "data")
    state = _reserve(plugin, pod, "n2")
    assert plugin.pre_bind(state, PodInfo(pod), "n2") is None
    got = api.get(api.resource("persistentvolumeclaims"), "data", namespace="default")
    assert got["metadata"]["uid"] == stored["metadata"]["uid"]
    assert got["metadata"]["annotations"][ANN_SELECTED_NODE] == "n2"
    assert got["metadata"]["annotations"][ANN_STORAGE_PROVISIONER] == "kctl.io/local-volume"


def test_pre_bind_refuses_a_claim_selected_for_another_node(api):
    """A claim annotated for n1 meanwhile (another pod's PreBind): this pod's PreBind on n2 fails, to retry."""
    api.create(storage_class())
    api.create({k: v for k, v in claim("data").items() if k != "status"})
    snapshot = snapshot_of(NODES)
    plugin = VolumeBinding({}, Handle(api=api, snapshot=snapshot))
    pod = pod_with_claims("p", "data")
    state = _reserve(plugin, pod, "n2")
    current = api.get(api.resource("persistentvolumeclaims"), "data", namespace="default")
    current["metadata"]["annotations"] = {ANN_SELECTED_NODE: "n1"}
    api.update(current)
    status = plugin.pre_bind(state, PodInfo(pod), "n2")
    assert status is not None and status.code is Code.ERROR
    assert 'is to be provisioned on node "n1"' in status.message()


def test_pre_bind_points_a_static_pv_at_the_claim(api):
    """A static PV chosen at Reserve gets the claim as its claimRef at PreBind."""
    api.create(storage_class("manual", provisioner="kubernetes.io/no-provisioner"))
    stored = api.create({k: v for k, v in claim("data", class_name="manual").items() if k != "status"})
    pv = api.create({k: v for k, v in volume("pv1", node="n1", class_name="manual").items() if k != "status"})
    api.update_status({**pv, "status": {"phase": "Available"}})  # as the PV controller marks a new PV
    plugin = VolumeBinding({}, Handle(api=api, snapshot=snapshot_of(NODES)))
    pod = pod_with_claims("p", "data")
    state = _reserve(plugin, pod, "n1")
    assert plugin.pre_bind(state, PodInfo(pod), "n1") is None
    pv = api.get(api.resource("persistentvolumes"), "pv1")
    ref = pv["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"], ref["uid"]) == ("default", "data", stored["metadata"]["uid"])
