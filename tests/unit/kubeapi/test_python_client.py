"""The official Python client (`kubernetes`) against the in-process HTTPS API: typed, watch and dynamic clients."""

from __future__ import annotations

import time

import pytest
from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException

#: seconds a test waits for what must come (generous: a loaded 2-core machine)
WAIT = 30.0

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]},
}


@pytest.fixture
def api_client(kubeapi):
    """A kubernetes.client.ApiClient from the fixture's kubeconfig (closed at the end)."""
    api_client = config.new_client_from_config(config_file=str(kubeapi.kubeconfig))
    yield api_client
    api_client.close()


def _cm(name: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels={"app": "t"}), data={"k": "v"})


def test_create_patch_delete(api_client):
    """Typed CoreV1Api: create, read, patch (strategic by default), delete; a second create is a 409."""
    core = client.CoreV1Api(api_client)
    created = core.create_namespaced_config_map("default", _cm("a"))
    assert created.metadata.uid and created.data == {"k": "v"}
    with pytest.raises(ApiException) as conflict:
        core.create_namespaced_config_map("default", _cm("a"))
    assert conflict.value.status == 409
    patched = core.patch_namespaced_config_map("a", "default", {"data": {"k": "w"}})
    assert patched.data == {"k": "w"}
    assert core.read_namespaced_config_map("a", "default").data == {"k": "w"}
    core.delete_namespaced_config_map("a", "default")
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("a", "default")
    assert missing.value.status == 404


def test_list_then_watch_from_its_resource_version(api_client):
    """list gives a resourceVersion; a watch from it sees exactly the later changes."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map("default", _cm("before"))
    listed = core.list_namespaced_config_map("default", label_selector="app=t")
    assert [i.metadata.name for i in listed.items] == ["before"]
    core.create_namespaced_config_map("default", _cm("after"))
    seen = []
    w = watch.Watch()
    deadline = time.monotonic() + WAIT
    for event in w.stream(core.list_namespaced_config_map, "default", label_selector="app=t",
                          resource_version=listed.metadata.resource_version, timeout_seconds=int(WAIT)):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 1 or time.monotonic() > deadline:
            w.stop()
    assert seen == [("ADDED", "after")]


def test_deployment_through_apps_v1(api_client):
    """AppsV1Api: create a Deployment and read its scale."""
    apps = client.AppsV1Api(api_client)
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    apps.create_namespaced_deployment("default", body)
    scale = apps.read_namespaced_deployment_scale("web", "default")
    assert scale.spec.replicas == 2 and scale.status.selector == "app=web"
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
    assert apps.read_namespaced_deployment("web", "default").spec.replicas == 3


def test_custom_resources_through_the_dynamic_client(api_client, tmp_path):
    """A CRD created over the API serves its kind at once: the dynamic client creates, lists and deletes them."""
    dyn = dynamic.DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))  # not /tmp/osrcp-*.json
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.create(body=CRD)
    deadline = time.monotonic() + WAIT
    widgets = None
    while widgets is None:
        try:
            dyn.resources.invalidate_cache()
            widgets = dyn.resources.get(api_version="example.com/v1", kind="Widget")
        except dynamic.exceptions.ResourceNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    widgets.create(namespace="default", body={"apiVersion": "example.com/v1", "kind": "Widget",
                                              "metadata": {"name": "w1"}, "spec": {"size": 3}})
    listed = widgets.get(namespace="default")
    assert [(i.metadata.name, i.spec.size) for i in listed.items] == [("w1", 3)]
    widgets.patch(namespace="default", name="w1", body={"spec": {"size": 4}},
                  content_type="application/merge-patch+json")
    assert widgets.get(namespace="default", name="w1").spec.size == 4
    widgets.delete(namespace="default", name="w1")
    assert widgets.get(namespace="default").items == []
