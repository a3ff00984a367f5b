"""Fields Kubernetes' API server sets that kubectl users see (kctl.admission.defaults and chain):
a new Pod's status.phase Pending and qosClass, a Namespace's phase Active, a Job's generated
selector and labels, and metadata.generation only on the kinds that have one."""

from __future__ import annotations

import pytest

from kctl.admission import defaults, validation
from kctl.apiserver.server import APIServer
from kctl.machinery.errors import Invalid
from kctl.machinery.resources import builtin_registry
from kctl.store.sqlite import Store

REGISTRY = builtin_registry()
UID = "0b6e5c1a-1111-4222-8333-944455556666"


def pod(*containers: dict, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": list(containers) or [{"name": "c", "image": "busybox"}], **spec}}


def container(name: str = "c", *, requests: dict | None = None, limits: dict | None = None) -> dict:
    resources = {key: value for key, value in (("requests", requests), ("limits", limits)) if value}
    return {"name": name, "image": "busybox", **({"resources": resources} if resources else {})}


def job(*, selector: dict | None = None, labels: dict | None = None, manual: bool | None = None) -> dict:
    spec: dict = {"template": {"metadata": {"labels": labels or {"app": "x"}},
                               "spec": {"restartPolicy": "Never",
                                        "containers": [{"name": "c", "image": "busybox"}]}}}
    if selector is not None:
        spec["selector"] = selector
    if manual is not None:
        spec["manualSelector"] = manual
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "default", "uid": UID}, "spec": spec}


# (id, containers, QoS class as Kubernetes' GetPodQOS gives it)
QOS = [
    ("nothing", [container()], "BestEffort"),
    ("zero-requests", [container(requests={"cpu": "0", "memory": "0"})], "BestEffort"),
    ("only-other-resources", [container(limits={"nvidia.com/gpu": "1"})], "BestEffort"),
    ("equal", [container(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1000m", "memory": "1Gi"})],
     "Guaranteed"),
    ("limits-only", [container(limits={"cpu": "500m", "memory": "128Mi"})], "Guaranteed"),
    ("cpu-limit-only", [container(limits={"cpu": "1"})], "Burstable"),
    ("requests-below-limits", [container(requests={"cpu": "100m", "memory": "64Mi"},
                                         limits={"cpu": "1", "memory": "64Mi"})], "Burstable"),
    ("one-container-unbounded", [container("a", limits={"cpu": "1", "memory": "1Gi"}), container("b")],
     "Burstable"),
    ("requests-only", [container(requests={"memory": "1Gi"})], "Burstable"),
]


@pytest.mark.parametrize(("containers", "expected"), [c[1:] for c in QOS], ids=[c[0] for c in QOS])
def test_new_pod_is_pending_with_its_qos_class(containers, expected):
    """A new Pod gets status.phase Pending and the QoS class Kubernetes computes."""
    obj = defaults.apply_defaults(pod(*containers), REGISTRY.lookup("pods"))
    defaults.prepare_for_create(obj, REGISTRY.lookup("pods"))
    assert obj["status"] == {"phase": "Pending", "qosClass": expected}


def test_scheduling_gates_give_a_scheduling_gated_condition():
    """A new Pod with schedulingGates carries PodScheduled=False, reason SchedulingGated."""
    obj = defaults.prepare_for_create(pod(schedulingGates=[{"name": "wait"}]), REGISTRY.lookup("pods"))
    [condition] = obj["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("PodScheduled", "False",
                                                                             "SchedulingGated")


def test_a_status_given_on_create_is_kept():
    """prepare_for_create only fills what is unset (kctl keeps a status given on create)."""
    given = pod()
    given["status"] = {"phase": "Running", "qosClass": "Burstable"}
    assert defaults.prepare_for_create(given, REGISTRY.lookup("pods"))["status"] == given["status"]


def test_new_namespace_is_active():
    """A new Namespace gets status.phase Active."""
    obj = defaults.prepare_for_create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}},
                                      REGISTRY.lookup("namespaces"))
    assert obj["status"] == {"phase": "Active"}


def test_job_selector_and_labels_are_generated_from_the_uid():
    """A Job gets the controller-uid selector and the four labels on its pod template."""
    obj = defaults.generate_job_selector(job())
    assert obj["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}}
    assert obj["spec"]["template"]["metadata"]["labels"] == {
        "app": "x", "controller-uid": UID, "batch.kubernetes.io/controller-uid": UID,
        "job-name": "j", "batch.kubernetes.io/job-name": "j"}
    assert validation.validate(obj, REGISTRY.lookup("jobs")) == []


def test_manual_selector_is_left_alone():
    """With spec.manualSelector true the user's selector and labels are kept as they are."""
    obj = defaults.generate_job_selector(job(selector={"matchLabels": {"app": "x"}}, manual=True))
    assert obj["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    assert obj["spec"]["template"]["metadata"]["labels"] == {"app": "x"}
    assert validation.validate(obj, REGISTRY.lookup("jobs")) == []


# (id, the Job before generation, the field the error names, words in it)
REFUSED = [
    ("own-selector", job(selector={"matchLabels": {"app": "x"}}), "spec.selector", "not auto-generated"),
    ("wrong-job-name-label", job(labels={"app": "x", "job-name": "other"}),
     "spec.template.metadata.labels.job-name", "must be 'j'"),
]


@pytest.mark.parametrize(("obj", "path", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_selector_that_is_not_the_generated_one_is_refused(obj, path, words):
    """Without manualSelector a selector or Job label other than the generated one is Invalid."""
    errors = validation.validate(defaults.generate_job_selector(obj), REGISTRY.lookup("jobs"))
    assert [e.path for e in errors] == [path] and words in str(errors[0])


def test_update_keeps_the_generated_selector():
    """An update whose Job has no selector keeps the stored, generated one."""
    stored = defaults.generate_job_selector(job())
    updated = defaults.generate_job_selector(job(), old=stored)
    assert updated["spec"]["selector"] == stored["spec"]["selector"]
    assert validation.validate(updated, REGISTRY.lookup("jobs")) == []


# (resource, whether Kubernetes sets metadata.generation on it)
GENERATION = [("pods", True), ("deployments", True), ("replicasets", True), ("daemonsets", True),
              ("jobs", True), ("cronjobs", True), ("customresourcedefinitions", True),
              ("gitsources", True), ("configmaps", False), ("secrets", False), ("services", False),
              ("namespaces", False), ("nodes", False), ("endpoints", False), ("events", False),
              ("leases", False)]


@pytest.mark.parametrize(("resource", "expected"), GENERATION, ids=[g[0] for g in GENERATION])
def test_which_kinds_track_generation(resource, expected):
    """metadata.generation exists only on the kinds whose Kubernetes strategy sets it."""
    assert defaults.tracks_generation(REGISTRY.lookup(resource)) is expected


@pytest.fixture
def api(tmp_path):
    return APIServer(Store(str(tmp_path / "kctl.db")), audit_log=False)


def test_api_create_sets_what_kubectl_users_see(api):
    """Through the API: Pod Pending with qosClass and generation, Namespace Active without
    generation, ConfigMap without generation (also after an update), Job with its selector."""
    created = api.create(pod(container(limits={"cpu": "1", "memory": "1Gi"})))
    assert created["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}
    assert created["metadata"]["generation"] == 1
    namespace = api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    assert namespace["status"] == {"phase": "Active"} and "generation" not in namespace["metadata"]
    config = api.create({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "c", "namespace": "default"}, "data": {"a": "1"}})
    assert "generation" not in config["metadata"]
    config["data"]["a"] = "2"
    assert "generation" not in api.update(config)["metadata"]
    manifest = job()
    del manifest["metadata"]["uid"]
    stored = api.create(manifest)
    uid = stored["metadata"]["uid"]
    assert stored["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert stored["spec"]["template"]["metadata"]["labels"]["controller-uid"] == uid
    assert stored["metadata"]["generation"] == 1


def test_api_refuses_a_job_with_its_own_selector(api):
    """A Job with a selector of its own and no manualSelector is Invalid, naming spec.selector."""
    manifest = job(selector={"matchLabels": {"app": "x"}})
    del manifest["metadata"]["uid"]
    with pytest.raises(Invalid, match="spec.selector"):
        api.create(manifest)
