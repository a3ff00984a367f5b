"""Which nodes a DaemonSet's pod belongs on, and the pod it makes for one (kctl.controllers.daemonset)."""

from __future__ import annotations

import datetime as dt

import pytest

from kctl.controllers.daemonset import (DEFAULT_TOLERATIONS, HASH_LABEL, new_pod, node_should_run, pod_available,
                                        scaled_value, template_hash)


def node(name: str, *, labels: dict | None = None, taints: list[dict] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or []}}


def ds(pod_spec: dict | None = None) -> dict:
    spec = {"containers": [{"name": "agent", "image": "busybox"}], **(pod_spec or {})}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "default", "uid": "ds-uid", "generation": 3},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}}, "spec": spec}}}


REQUIRED_ZONE_A = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}


@pytest.mark.parametrize("pod_spec, the_node, expected", [
    ({}, node("n1"), (True, True)),
    ({"nodeSelector": {"disk": "ssd"}}, node("n1", labels={"disk": "ssd"}), (True, True)),
    ({"nodeSelector": {"disk": "ssd"}}, node("n1", labels={"disk": "hdd"}), (False, False)),
    (REQUIRED_ZONE_A, node("n1", labels={"zone": "a"}), (True, True)),
    (REQUIRED_ZONE_A, node("n1", labels={"zone": "b"}), (False, False)),
    ({"nodeName": "n2"}, node("n1"), (False, False)),
    ({}, node("n1", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]), (False, True)),
    ({}, node("n1", taints=[{"key": "gpu", "value": "yes", "effect": "NoExecute"}]), (False, False)),
    ({}, node("n1", taints=[{"key": "gpu", "value": "yes", "effect": "PreferNoSchedule"}]), (True, True)),
    ({"tolerations": [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]},
     node("n1", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]), (True, True)),
    ({"tolerations": [{"operator": "Exists"}]},
     node("n1", taints=[{"key": "anything", "effect": "NoExecute"}]), (True, True)),
    ({}, node("n1", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]), (True, True)),
    ({}, node("n1", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]), (True, True)),
    ({}, node("n1", taints=[{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]),
     (False, True)),
    ({"hostNetwork": True},
     node("n1", taints=[{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]), (True, True)),
], ids=["plain", "selector-match", "selector-miss", "affinity-match", "affinity-miss", "other-nodename",
        "noschedule-taint", "noexecute-taint", "prefer-noschedule-ignored", "tolerated", "tolerate-all",
        "default-not-ready", "default-unschedulable", "network-unavailable", "network-unavailable-hostnet"])
def test_node_should_run(pod_spec, the_node, expected):
    """Eligibility follows nodeSelector, required affinity, taints and the default daemon tolerations."""
    assert node_should_run(ds(pod_spec), the_node) == expected


def test_new_pod_is_bound_owned_labelled_and_tolerant():
    """A daemon pod is bound by nodeName and matchFields, owned, hashed, with the default tolerations."""
    the_ds = ds({"tolerations": [{"key": "gpu", "operator": "Exists"}], **REQUIRED_ZONE_A})
    pod = new_pod(the_ds, "n7", "abc")
    assert pod["spec"]["nodeName"] == "n7"
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n7"]}]}]}
    assert pod["metadata"]["labels"] == {"app": "agent", HASH_LABEL: "abc", "pod-template-generation": "3"}
    assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                                   "uid": "ds-uid", "controller": True, "blockOwnerDeletion": True}]
    keys = [t.get("key") for t in pod["spec"]["tolerations"]]
    assert keys == ["gpu"] + [t["key"] for t in DEFAULT_TOLERATIONS]
    assert "nodeName" not in the_ds["spec"]["template"]["spec"], "the DaemonSet itself is not changed"


def test_template_hash_changes_with_template_only():
    """The revision hash follows the template, not the DaemonSet's other fields."""
    a, b = ds(), ds()
    b["metadata"]["generation"] = 9
    assert template_hash(a) == template_hash(b)
    b["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
    assert template_hash(a) != template_hash(b)
    assert template_hash(a).isalnum()


@pytest.mark.parametrize("value, total, round_up, expected", [
    (1, 10, True, 1), ("25%", 10, True, 3), ("25%", 10, False, 2), ("100%", 4, True, 4), (None, 5, True, 1),
], ids=["absolute", "percent-up", "percent-down", "all", "default"])
def test_scaled_value(value, total, round_up, expected):
    """maxUnavailable scales as intstr.GetScaledValueFromIntOrPercent."""
    assert scaled_value(value, total, round_up=round_up, default=1) == expected


@pytest.mark.parametrize("ready_for, min_ready, expected", [
    (0, 0, True), (5, 10, False), (10, 10, False), (11, 10, True),
], ids=["no-min-ready", "not-yet", "exactly-min-ready", "long-enough"])
def test_pod_available(ready_for, min_ready, expected):
    """A pod is available once Ready for more than minReadySeconds (podutil.IsPodAvailable)."""
    now = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
    since = (now - dt.timedelta(seconds=ready_for)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pod = {"metadata": {}, "status": {"conditions": [{"type": "Ready", "status": "True",
                                                      "lastTransitionTime": since}]}}
    assert pod_available(pod, min_ready, now) is expected
