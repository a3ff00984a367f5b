"""The LimitRanger admission plugin: LimitRange defaults fill pods' requests/limits, min/max/ratio refuse, against a
real APIServer on a temporary store."""

from __future__ import annotations

import pytest

from kctl.admission.plugins.limitranger import ANNOTATION, default_item
from kctl.machinery.errors import Forbidden


def limit_range(*items: dict, name: str = "lr", namespace: str = "default") -> dict:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": namespace},
            "spec": {"limits": list(items)}}


def pod(name: str = "p", *, namespace: str = "default", init: dict | None = None, **resources: dict) -> dict:
    container: dict = {"name": "app", "image": "busybox"}
    if resources:
        container["resources"] = resources
    spec: dict = {"containers": [container]}
    if init is not None:
        spec["initContainers"] = [{"name": "setup", "image": "busybox", **init}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def claim(name: str, storage: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}}


CONTAINER_DEFAULTS = {"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                      "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}


@pytest.mark.parametrize("resources, expected, note", [
    ({}, {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
     "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app"),
    ({"requests": {"cpu": "200m"}},
     {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "200m", "memory": "128Mi"}},
     "LimitRanger plugin set: memory request for container app; cpu, memory limit for container app"),
    ({"limits": {"cpu": "300m", "memory": "200Mi"}},  # defaulting made requests = limits first, as Kubernetes does
     {"limits": {"cpu": "300m", "memory": "200Mi"}, "requests": {"cpu": "300m", "memory": "200Mi"}}, None),
], ids=["nothing-set", "request-set", "limits-set"])
def test_container_defaults_fill_what_is_missing(api, resources, expected, note):
    """A new pod's missing requests and limits come from the Container item; what it sets stays; the annotation says
    what was set."""
    api.create(limit_range(CONTAINER_DEFAULTS))
    made = api.create(pod(**resources))
    assert made["spec"]["containers"][0]["resources"] == expected
    assert (made["metadata"].get("annotations") or {}).get(ANNOTATION) == note


def test_init_containers_get_defaults_and_qos_follows(api):
    """Init containers are filled too (`init container` in the annotation), and qosClass is computed afterwards."""
    api.create(limit_range(CONTAINER_DEFAULTS))
    made = api.create(pod(init={}))
    assert made["spec"]["initContainers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert "cpu, memory request for init container setup" in made["metadata"]["annotations"][ANNOTATION]
    assert made["status"]["qosClass"] == "Burstable"


def test_no_limit_range_leaves_pods_alone(api):
    """Without a LimitRange in its namespace a pod is stored as sent: no resources, no annotation."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    api.create(limit_range(CONTAINER_DEFAULTS, namespace="other"))
    made = api.create(pod())
    assert "resources" not in made["spec"]["containers"][0]
    assert ANNOTATION not in (made["metadata"].get("annotations") or {})
    assert made["status"]["qosClass"] == "BestEffort"


@pytest.mark.parametrize("item, resources, message", [
    ({"type": "Container", "max": {"cpu": "500m"}}, {"limits": {"cpu": "1"}},
     'pods "p" is forbidden: maximum cpu usage per Container is 500m, but limit is 1'),
    ({"type": "Container", "max": {"memory": "1Gi"}}, {"limits": {"memory": "1536Mi"}},
     'pods "p" is forbidden: maximum memory usage per Container is 1Gi, but limit is 1536Mi'),
    ({"type": "Container", "min": {"cpu": "100m"}}, {"requests": {"cpu": "50m"}},
     'pods "p" is forbidden: minimum cpu usage per Container is 100m, but request is 50m'),
    ({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}},
     {"requests": {"cpu": "100m"}, "limits": {"cpu": "500m"}},
     'pods "p" is forbidden: cpu max limit to request ratio per Container is 2, but provided ratio is 5.000000'),
    ({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}, {},
     'pods "p" is forbidden: cpu max limit to request ratio per Container is 2, '
     "but no request is specified or request is 0"),
    ({"type": "Pod", "max": {"cpu": "1"}}, {"limits": {"cpu": "1500m"}},
     'pods "p" is forbidden: maximum cpu usage per Pod is 1, but limit is 1500m'),
    ({"type": "Pod", "max": {"cpu": "1"}}, {},
     'pods "p" is forbidden: maximum cpu usage per Pod is 1.  No limit is specified'),
], ids=["container-max-limit", "container-max-binary", "container-min", "ratio", "ratio-no-request", "pod-max",
        "pod-max-unset"])
def test_values_outside_the_range_are_refused(api, item, resources, message):
    """min, max and maxLimitRequestRatio of Container and Pod items refuse with Kubernetes' messages; nothing is
    stored."""
    api.create(limit_range(item))
    with pytest.raises(Forbidden) as refused:
        api.create(pod(**resources))
    assert refused.value.message == message
    assert api.find(api.resource("pods"), "p", namespace="default") is None


def test_several_violations_are_listed_together(api):
    """Every violation is reported, in brackets, as Kubernetes' aggregate error prints them."""
    api.create(limit_range({"type": "Container", "max": {"cpu": "500m", "memory": "1Gi"}}))
    with pytest.raises(Forbidden, match=r"forbidden: \[maximum cpu usage per Container is 500m, but limit is 1, "
                                        r"maximum memory usage per Container is 1Gi, but limit is 2Gi\]"):
        api.create(pod(limits={"cpu": "1", "memory": "2Gi"}))


def test_values_inside_the_range_pass(api):
    """A pod within min and max (after defaults) is stored."""
    api.create(limit_range({"type": "Container", "min": {"cpu": "50m"}, "max": {"cpu": "1"}}))
    made = api.create(pod(requests={"cpu": "100m"}, limits={"cpu": "1"}))
    assert made["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1"}


def test_pod_updates_are_not_checked(api):
    """A LimitRange added later does not refuse updates of pods that exist (containers cannot change)."""
    api.create(pod(limits={"cpu": "2"}))
    api.create(limit_range({"type": "Container", "max": {"cpu": "500m"}}))
    stored = api.get(api.resource("pods"), "p", namespace="default")
    stored["metadata"]["labels"] = {"a": "b"}
    assert api.update(stored)["metadata"]["labels"] == {"a": "b"}


@pytest.mark.parametrize("storage, message", [
    ("5Gi", 'persistentvolumeclaims "c" is forbidden: maximum storage usage per PersistentVolumeClaim is 2Gi, '
            "but request is 5Gi"),
    ("100Mi", 'persistentvolumeclaims "c" is forbidden: minimum storage usage per PersistentVolumeClaim is 1Gi, '
              "but request is 100Mi"),
    ("1Gi", None),
], ids=["over-max", "under-min", "inside"])
def test_claims_are_held_to_min_and_max_storage(api, storage, message):
    """PersistentVolumeClaim items bound a claim's requested storage."""
    api.create(limit_range({"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "2Gi"}}))
    if message is None:
        assert api.create(claim("c", storage))["metadata"]["name"] == "c"
    else:
        with pytest.raises(Forbidden) as refused:
            api.create(claim("c", storage))
        assert refused.value.message == message


@pytest.mark.parametrize("item, expected", [
    ({"type": "Container", "max": {"cpu": "1"}},
     {"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "1"}, "defaultRequest": {"cpu": "1"}}),
    ({"type": "Container", "default": {"cpu": "500m"}, "min": {"memory": "64Mi"}},
     {"type": "Container", "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "500m", "memory": "64Mi"},
      "min": {"memory": "64Mi"}}),
    ({"type": "Pod", "max": {"cpu": "1"}}, {"type": "Pod", "max": {"cpu": "1"}}),
], ids=["max-gives-default", "default-gives-request", "pod-items-untouched"])
def test_limit_range_items_are_read_with_kubernetes_defaults(item, expected):
    """A Container item is read with the defaults Kubernetes would store for it (SetDefaults_LimitRangeItem)."""
    assert default_item(item) == expected


def test_max_alone_is_the_default_limit_and_request(api):
    """A LimitRange with only `max` gives containers that limit and request, as on a cluster."""
    api.create(limit_range({"type": "Container", "max": {"cpu": "1"}}))
    made = api.create(pod())
    assert made["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}


def test_a_kubectl_made_limit_range_applies_unchanged_twice(api):
    """Applying the same LimitRange again is `unchanged`; the object is stored as written."""
    manifest = limit_range({"type": "Container", "default": {"cpu": "500m"}})
    assert api.apply(manifest).action == "created"
    assert api.apply(manifest).action == "unchanged"
    assert api.get(api.resource("limits"), "lr", namespace="default")["spec"] == manifest["spec"]
