"""The Priority admission plugin: priorityClassName resolved into spec.priority and preemptionPolicy, the global
default, the system classes, and PriorityClass checks, against a real APIServer on a temporary store."""

from __future__ import annotations

import pytest

from kctl.machinery.errors import Forbidden, Invalid


def priority_class(name: str, value: int, **fields) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, **fields}


def pod(name: str = "p", **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "busybox"}], **spec}}


def _resolved(made: dict) -> tuple:
    spec = made["spec"]
    return spec.get("priorityClassName"), spec.get("priority"), spec.get("preemptionPolicy")


@pytest.mark.parametrize("classes, spec, expected", [
    ([], {}, (None, 0, None)),
    ([priority_class("high", 1000)], {"priorityClassName": "high"}, ("high", 1000, "PreemptLowerPriority")),
    ([priority_class("batch", 10, preemptionPolicy="Never")], {"priorityClassName": "batch"}, ("batch", 10, "Never")),
    ([], {"priorityClassName": "system-node-critical"},
     ("system-node-critical", 2000001000, "PreemptLowerPriority")),
    ([], {"priorityClassName": "system-cluster-critical"},
     ("system-cluster-critical", 2000000000, "PreemptLowerPriority")),
    ([priority_class("dflt", 5, globalDefault=True)], {}, ("dflt", 5, "PreemptLowerPriority")),
    ([priority_class("dflt", 5, globalDefault=True), priority_class("high", 1000)], {"priorityClassName": "high"},
     ("high", 1000, "PreemptLowerPriority")),
    ([priority_class("high", 1000)], {"priorityClassName": "high", "priority": 1000},
     ("high", 1000, "PreemptLowerPriority")),
], ids=["no-class", "named", "never-preempts", "system-node-critical", "system-cluster-critical", "global-default",
        "named-over-default", "same-priority-given"])
def test_a_new_pod_gets_its_class_priority(api, classes, spec, expected):
    """A pod's class gives its priority and preemptionPolicy; without one, the global default's or 0."""
    for cls in classes:
        api.create(cls)
    assert _resolved(api.create(pod(**spec))) == expected


@pytest.mark.parametrize("spec, message", [
    ({"priorityClassName": "nope"}, 'pods "p" is forbidden: no PriorityClass with name nope was found'),
    ({"priorityClassName": "high", "priority": 7},
     'pods "p" is forbidden: the integer value of priority (7) must not be provided in pod spec; '
     "priority admission controller computed 1000 from the given PriorityClass name"),
    ({"priority": 7},
     'pods "p" is forbidden: the integer value of priority (7) must not be provided in pod spec; '
     "priority admission controller computed 0 from the given PriorityClass name"),
    ({"priorityClassName": "high", "preemptionPolicy": "Never"},
     'pods "p" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; '
     "priority admission controller computed PreemptLowerPriority from the given PriorityClass name"),
], ids=["unknown-class", "other-priority", "priority-without-class", "other-policy"])
def test_pods_that_contradict_their_class_are_refused(api, spec, message):
    """An unknown class, or a priority/preemptionPolicy other than the class's, is Forbidden with Kubernetes' text."""
    api.create(priority_class("high", 1000))
    with pytest.raises(Forbidden) as refused:
        api.create(pod(**spec))
    assert refused.value.message == message


def test_update_keeps_what_admission_set(api):
    """Replacing a pod with a manifest that leaves priority out keeps the stored priority and policy."""
    api.create(priority_class("high", 1000))
    api.create(pod(priorityClassName="high"))
    stored = api.get(api.resource("pods"), "p", namespace="default")
    for key in ("priority", "preemptionPolicy", "priorityClassName"):
        del stored["spec"][key]
    stored["metadata"]["labels"] = {"changed": "yes"}
    assert _resolved(api.update(stored)) == ("high", 1000, "PreemptLowerPriority")


def test_preemption_policy_defaults_on_the_class(api):
    """A PriorityClass without preemptionPolicy is stored with PreemptLowerPriority (SetDefaults_PriorityClass)."""
    assert api.create(priority_class("high", 1000))["preemptionPolicy"] == "PreemptLowerPriority"


@pytest.mark.parametrize("obj, error, message", [
    (priority_class("system-mine", 10), Invalid,
     'PriorityClass.scheduling.k8s.io "system-mine" is invalid: metadata.name: Forbidden: priority class names with '
     "'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"),
    (priority_class("system-node-critical", 10), Invalid,
     "error: value of system-node-critical PriorityClass must be 2000001000"),
    (priority_class("huge", 1000000001), Invalid,
     'PriorityClass.scheduling.k8s.io "huge" is invalid: value: Forbidden: maximum allowed value of a user defined '
     "priority is 1000000000"),
    (priority_class("second", 3, globalDefault=True), Forbidden,
     'priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass first is marked as default. '
     "Only one default can exist"),
], ids=["reserved-prefix", "system-wrong-value", "too-high", "second-default"])
def test_bad_priority_classes_are_refused(api, obj, error, message):
    """Reserved names, values over the user ceiling and a second global default are refused, as Kubernetes does."""
    api.create(priority_class("first", 1, globalDefault=True))
    with pytest.raises(error) as refused:
        api.create(obj)
    assert message in refused.value.message


def test_a_system_class_may_be_stored_and_not_deleted(api):
    """The system classes can be created with their own value (as kube-apiserver does) but never deleted."""
    api.create(priority_class("system-node-critical", 2000001000))
    with pytest.raises(Forbidden, match="this is a system priority class and cannot be deleted"):
        api.delete(api.resource("pc"), "system-node-critical")


def test_value_cannot_change(api):
    """A class's value and preemptionPolicy are immutable; the global default may be re-marked on itself."""
    api.create(priority_class("high", 1000, globalDefault=True))
    stored = api.get(api.resource("pc"), "high")
    stored["description"] = "still the default"
    assert api.update(stored)["globalDefault"] is True
    with pytest.raises(Invalid, match="value: Forbidden: may not be changed in an update."):
        api.update({**api.get(api.resource("pc"), "high"), "value": 2000})


@pytest.mark.parametrize("manifest", [
    priority_class("high", 1000, description="high", preemptionPolicy="Never"),
    priority_class("dflt", 10, globalDefault=True, preemptionPolicy="PreemptLowerPriority"),
], ids=["create-priorityclass", "create-priorityclass-global-default"])
def test_kubectl_made_classes_apply_unchanged(api, manifest):
    """`kubectl create priorityclass ... --dry-run=client -o yaml` output applies, and again is unchanged."""
    manifest = {**manifest, "metadata": {**manifest["metadata"], "creationTimestamp": None}}
    assert api.apply(manifest).action == "created"
    assert api.apply(manifest).action == "unchanged"
