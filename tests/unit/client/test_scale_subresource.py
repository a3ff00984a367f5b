"""Tests of the scale subresource client (kctl/client/scale.py): the Scale it returns and how it writes."""

from __future__ import annotations

import pytest

from kctl.client.scale import NotScalable, get_scale, update_scale
from kctl.machinery.errors import Conflict


def workload(api, kind: str = "Deployment", replicas: int = 2) -> dict:
    spec: dict = {"replicas": replicas, "selector": {"matchLabels": {"app": "web"},
                                                      "matchExpressions": [{"key": "tier", "operator": "In",
                                                                            "values": ["b", "a"]}]},
                  "template": {"metadata": {"labels": {"app": "web", "tier": "a"}},
                               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    if kind == "StatefulSet":
        spec["serviceName"] = "web"
    return api.create({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "web", "namespace": "default"},
                       "spec": spec})


@pytest.mark.parametrize("kind,plural", [("Deployment", "deployments"), ("ReplicaSet", "replicasets"),
                                         ("StatefulSet", "statefulsets")])
def test_get_scale_is_autoscaling_v1_scale(api, kind, plural):
    """The Scale names the object, carries its resourceVersion, replicas and selector as a string."""
    obj = workload(api, kind)
    scale = get_scale(api, api.resource(plural), "web", namespace="default")
    assert scale["apiVersion"] == "autoscaling/v1" and scale["kind"] == "Scale"
    assert scale["metadata"]["name"] == "web" and scale["metadata"]["namespace"] == "default"
    assert scale["metadata"]["uid"] == obj["metadata"]["uid"]
    assert scale["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 0, "selector": "app=web,tier in (a,b)"}


def test_update_scale_writes_only_replicas(api):
    """Writing the Scale changes spec.replicas and nothing else, and bumps the generation."""
    before = workload(api)
    rt = api.resource("deployments")
    scale = get_scale(api, rt, "web", namespace="default")
    scale["spec"]["replicas"] = 5
    after = update_scale(api, rt, scale)
    assert after["spec"]["replicas"] == 5
    stored = api.get(rt, "web", namespace="default")
    assert stored["spec"]["replicas"] == 5 and stored["metadata"]["generation"] == 2
    assert stored["spec"]["template"] == before["spec"]["template"]


def test_update_scale_with_a_stale_scale_conflicts(api):
    """A Scale read before another write is a stale precondition: Conflict, nothing written."""
    workload(api)
    rt = api.resource("deployments")
    scale = get_scale(api, rt, "web", namespace="default")
    update_scale(api, rt, dict(scale, spec={"replicas": 3}))
    with pytest.raises(Conflict):
        update_scale(api, rt, dict(scale, spec={"replicas": 7}))
    assert api.get(rt, "web", namespace="default")["spec"]["replicas"] == 3


def test_unscalable_kind(api):
    """A kind without a scale subresource is refused with Kubernetes' discovery wording."""
    with pytest.raises(NotScalable, match="could not find scale subresource for apps/v1, Resource=daemonsets"):
        get_scale(api, api.resource("daemonsets"), "web", namespace="default")
