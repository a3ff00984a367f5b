"""The ResourceQuota admission plugin: creates (and growing updates) that would exceed a quota are refused with
Kubernetes' messages, usage counted from stored objects, scopes honoured, against a real APIServer on a temp store."""

from __future__ import annotations

import pytest

from kctl.admission.plugins import Attributes
from kctl.admission.plugins.resourcequota import PLUGIN
from kctl.machinery.errors import Forbidden
from kctl.machinery.resources import builtin_registry


def quota(name: str = "q", *, scopes: list | None = None, selector: list | None = None, namespace: str = "default",
          **hard: str) -> dict:
    spec: dict = {"hard": {k.replace("__", "/").replace("_", "."): v for k, v in hard.items()}}
    if scopes:
        spec["scopes"] = scopes
    if selector:
        spec["scopeSelector"] = {"matchExpressions": selector}
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


def pod(name: str, *, namespace: str = "default", cpu: str | None = None, memory: str | None = None,
        limit_cpu: str | None = None, **spec) -> dict:
    resources: dict = {}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    if requests:
        resources["requests"] = requests
    if limit_cpu:
        resources["limits"] = {"cpu": limit_cpu}
    container: dict = {"name": "app", "image": "busybox"}
    if resources:
        container["resources"] = resources
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [container], **spec}}


def refused(api, obj: dict) -> str:
    with pytest.raises(Forbidden) as caught:
        api.create(obj)
    return caught.value.message


def test_cpu_over_the_quota_is_refused_with_kubernetes_message(api):
    """requested + used > hard: `exceeded quota: NAME, requested: cpu=1, used: cpu=2, limited: cpu=2`."""
    api.create(quota(cpu="2"))
    api.create(pod("a", cpu="1"))
    api.create(pod("b", cpu="1"))
    assert refused(api, pod("c", cpu="1")) == \
        'pods "c" is forbidden: exceeded quota: q, requested: cpu=1, used: cpu=2, limited: cpu=2'
    assert api.find(api.resource("pods"), "c", namespace="default") is None


@pytest.mark.parametrize("hard, objects, extra, message", [
    ({"pods": "1"}, [pod("a")], pod("b"),
     'pods "b" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1'),
    ({"requests.memory": "1Gi"}, [pod("a", memory="768Mi")], pod("b", memory="512Mi"),
     'pods "b" is forbidden: exceeded quota: q, requested: requests.memory=512Mi, used: requests.memory=768Mi, '
     "limited: requests.memory=1Gi"),
    ({"limits.cpu": "1"}, [pod("a", limit_cpu="500m")], pod("b", limit_cpu="600m"),
     'pods "b" is forbidden: exceeded quota: q, requested: limits.cpu=600m, used: limits.cpu=500m, '
     "limited: limits.cpu=1"),
    ({"count/pods": "1", "pods": "5"}, [pod("a")], pod("b"),
     'pods "b" is forbidden: exceeded quota: q, requested: count/pods=1, used: count/pods=1, limited: count/pods=1'),
    ({"configmaps": "1"}, [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}],
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}},
     'configmaps "b" is forbidden: exceeded quota: q, requested: configmaps=1, used: configmaps=1, '
     "limited: configmaps=1"),
    ({"count/deployments.apps": "0"}, [],
     {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
      "spec": {"selector": {"matchLabels": {"a": "b"}},
               "template": {"metadata": {"labels": {"a": "b"}},
                            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}},
     'deployments.apps "web" is forbidden: exceeded quota: q, requested: count/deployments.apps=1, '
     "used: count/deployments.apps=0, limited: count/deployments.apps=0"),
    ({"services.nodeports": "1"}, [],
     {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
      "spec": {"type": "NodePort", "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]}},
     'services "s" is forbidden: exceeded quota: q, requested: services.nodeports=2, used: services.nodeports=0, '
     "limited: services.nodeports=1"),
    ({"requests.storage": "1Gi"}, [],
     {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
      "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
               "resources": {"requests": {"storage": "2Gi"}}}},
     'persistentvolumeclaims "c" is forbidden: exceeded quota: q, requested: requests.storage=2Gi, '
     "used: requests.storage=0, limited: requests.storage=1Gi"),
], ids=["pods", "requests.memory", "limits.cpu", "count-pods", "configmaps", "count-deployments", "nodeports",
        "storage"])
def test_each_resource_kind_is_enforced(api, hard, objects, extra, message):
    """Every evaluator's names are charged and enforced: pods, compute, object counts, node ports, storage."""
    api.create(quota(**{k.replace(".", "_").replace("/", "__"): v for k, v in hard.items()}))
    for obj in objects:
        api.create(obj)
    assert refused(api, extra) == message


def test_several_exceeded_names_are_reported_together(api):
    """Every exceeded name is in the one message, sorted, comma-separated."""
    api.create(quota(pods="1", cpu="1"))
    api.create(pod("a", cpu="1"))
    assert refused(api, pod("b", cpu="1")) == \
        'pods "b" is forbidden: exceeded quota: q, requested: cpu=1,pods=1, used: cpu=1,pods=1, limited: cpu=1,pods=1'


@pytest.mark.parametrize("hard, obj, message", [
    ({"cpu": "1"}, pod("a"), 'pods "a" is forbidden: failed quota: q: must specify cpu for: app'),
    ({"limits.cpu": "1", "requests.memory": "1Gi"}, pod("a", cpu="100m"),
     'pods "a" is forbidden: failed quota: q: must specify limits.cpu for: app; requests.memory for: app'),
], ids=["cpu", "two-names"])
def test_pods_must_state_what_the_quota_constrains(api, hard, obj, message):
    """A container without the constrained cpu/memory request or limit is refused: `must specify ... for: NAME`."""
    api.create(quota(**{k.replace(".", "_"): v for k, v in hard.items()}))
    assert refused(api, obj) == message


def test_pods_without_requests_pass_a_count_only_quota(api):
    """A quota on `pods` alone does not ask for requests (only cpu/memory names do)."""
    api.create(quota(pods="3"))
    assert api.create(pod("a"))["metadata"]["name"] == "a"


def test_terminal_pods_do_not_count(api):
    """A Succeeded pod no longer uses `pods` or cpu, so a new one fits (count/pods still counts it)."""
    api.create(quota(pods="1", cpu="1"))
    api.create(pod("a", cpu="1"))
    done = api.get(api.resource("pods"), "a", namespace="default")
    done["status"]["phase"] = "Succeeded"
    api.update_status(done)
    assert api.create(pod("b", cpu="1"))["metadata"]["name"] == "b"


def test_other_namespaces_are_not_charged(api):
    """A quota constrains only its own namespace."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    api.create(quota(pods="1", namespace="team"))
    api.create(pod("a", namespace="team"))
    api.create(pod("a"))
    api.create(pod("b"))
    assert "exceeded quota: q" in refused(api, pod("b", namespace="team"))


@pytest.mark.parametrize("scopes, selector, counted, free", [
    (["BestEffort"], None, pod("x"), pod("x", cpu="100m")),
    (["NotBestEffort"], None, pod("x", cpu="100m"), pod("x")),
    (["Terminating"], None, pod("x", activeDeadlineSeconds=60), pod("x")),
    (["NotTerminating"], None, pod("x"), pod("x", activeDeadlineSeconds=60)),
    (None, [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}],
     pod("x", priorityClassName="high"), pod("x")),
    (None, [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}],
     pod("x"), pod("x", priorityClassName="high")),
], ids=["BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "PriorityClass-In", "PriorityClass-NotIn"])
def test_scopes_choose_the_pods_a_quota_counts(api, scopes, selector, counted, free):
    """A scoped quota of 0 pods refuses the pods in its scope and lets the others through."""
    api.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                "value": 100})
    api.create(quota(pods="0", scopes=scopes, selector=selector))
    assert "exceeded quota: q" in refused(api, counted)
    assert api.create(free)["metadata"]["name"] == "x"


def test_a_scoped_quota_ignores_other_kinds(api):
    """Only pods can be in a scope: a scoped quota on configmaps counts nothing."""
    api.create(quota(configmaps="0", scopes=["BestEffort"]))
    assert api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})["metadata"]["name"] == "c"


def test_a_growing_service_update_is_charged(api):
    """An update that turns a ClusterIP Service into a NodePort one is charged its node ports."""
    api.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
    api.create(quota(services_nodeports="0"))
    stored = api.get(api.resource("services"), "s", namespace="default")
    stored["spec"]["type"] = "NodePort"
    with pytest.raises(Forbidden, match="exceeded quota: q, requested: services.nodeports=1"):
        api.update(stored)


def test_dry_run_is_checked_too(api):
    """A dry-run create over quota is refused as the real one would be."""
    api.create(quota(pods="0"))
    with pytest.raises(Forbidden, match="exceeded quota"):
        api.create(pod("a"), dry_run=True)


@pytest.mark.parametrize("manifest, first, over, message", [
    ({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"creationTimestamp": None, "name": "q"},
      "spec": {"hard": {"cpu": "1", "pods": "2"}}, "status": {}},
     pod("a", cpu="600m"), pod("b", cpu="600m"),
     'pods "b" is forbidden: exceeded quota: q, requested: cpu=600m, used: cpu=600m, limited: cpu=1'),
    ({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"creationTimestamp": None, "name": "best"},
      "spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}, "status": {}},
     pod("a"), pod("b"),
     'pods "b" is forbidden: exceeded quota: best, requested: pods=1, used: pods=1, limited: pods=1'),
], ids=["create-quota", "create-quota-scopes"])
def test_kubectl_made_quotas_apply_and_enforce(api, manifest, first, over, message):
    """`kubectl create quota ... --dry-run=client -o yaml` output applies unchanged and is enforced at once."""
    assert api.apply(manifest).action == "created"
    assert api.apply(manifest).action == "unchanged"
    api.create(first)
    assert refused(api, over) == message


class CountingLister:
    """A Lister that records what it was asked for and holds no objects."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def __call__(self, group_kind: str, namespace: str | None = None) -> list[dict]:
        self.calls.append((group_kind, namespace))
        return []


_RT = builtin_registry()


@pytest.mark.parametrize("operation, kind, old, new, calls", [
    ("DELETE", "Pod", pod("a"), None, []),
    ("UPDATE", "Pod", pod("a", cpu="1"), {**pod("a", cpu="1"), "metadata": {"name": "a", "labels": {"x": "y"}}}, []),
    ("UPDATE", "ConfigMap", {"metadata": {"name": "c"}}, {"metadata": {"name": "c"}, "data": {"a": "b"}}, []),
    ("CREATE", "Namespace", None, {"metadata": {"name": "n"}}, []),
    ("CREATE", "Pod", None, pod("a"), [("ResourceQuota", "default")]),
], ids=["delete", "pod-update-same-charge", "configmap-update", "cluster-scoped", "create-lists-quotas-once"])
def test_requests_it_does_not_apply_to_list_nothing(operation, kind, old, new, calls):
    """Deletes, updates that charge nothing more and cluster-scoped kinds return before listing; a create with no
    quota in its namespace lists the quotas once and nothing else."""
    rt = _RT.for_object({"apiVersion": "v1", "kind": kind})
    lister = CountingLister()
    PLUGIN.validate(Attributes(operation=operation, rt=rt, namespace=None if kind == "Namespace" else "default",
                               name="a", obj=new, old_obj=old), lister)
    assert lister.calls == calls
