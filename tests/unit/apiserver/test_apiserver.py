"""The API layer: Kubernetes' write semantics over the store."""

from __future__ import annotations

import copy
import threading

import pytest

from kctl.machinery.errors import AlreadyExists, BadRequest, Conflict, Forbidden, Invalid, NotFound


def cm(name="c1", ns=None, **data):
    meta = {"name": name}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {"k": "v"}}


def deployment(name="web", replicas=1, image="busybox:1", labels=None):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels or {"app": name}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}}


def pod(name="p", node=None, phase=None, labels=None):
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
           "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}
    if node:
        obj["spec"]["nodeName"] = node
    return obj


def namespace(name, **labels):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_create_sets_system_metadata(api):
    """create assigns uid, creationTimestamp and a resourceVersion (no generation: a ConfigMap has none)."""
    obj = api.create(cm())
    meta = obj["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert "generation" not in meta and meta["namespace"] == "default" and meta["resourceVersion"]


def test_create_twice_is_already_exists(api):
    """A second create of the same name fails with AlreadyExists."""
    api.create(cm())
    with pytest.raises(AlreadyExists):
        api.create(cm())


def test_create_into_missing_namespace_fails(api):
    """Creating into a namespace that does not exist is NotFound, as in Kubernetes."""
    with pytest.raises(NotFound, match="namespaces"):
        api.create(cm(ns="nope"))


def test_create_into_terminating_namespace_is_forbidden(api):
    """A namespace being deleted takes no new objects."""
    api.create(namespace("team"))
    api.create(cm(ns="team"))
    terminating = api.delete(api.resource("ns"), "team")
    assert terminating["status"]["phase"] == "Terminating"
    with pytest.raises(Forbidden, match="being terminated"):
        api.create(cm("other", ns="team"))


def test_default_namespace_exists_and_stays(api):
    """`default` exists in a new store and may not be deleted."""
    assert api.get(api.resource("ns"), "default")["status"]["phase"] == "Active"
    with pytest.raises(Forbidden):
        api.delete(api.resource("ns"), "default")


def test_empty_namespace_is_deleted_at_once(api):
    """A namespace holding nothing goes at once."""
    api.create(namespace("empty"))
    api.delete(api.resource("ns"), "empty")
    with pytest.raises(NotFound):
        api.get(api.resource("ns"), "empty")


def test_cluster_scoped_kind_drops_namespace(api):
    """A cluster-scoped object stores no namespace, even if the manifest gives one."""
    obj = namespace("x")
    obj["metadata"]["namespace"] = "default"
    stored = api.create(obj)
    assert "namespace" not in stored["metadata"]


def test_generate_name(api):
    """generateName gets a random suffix."""
    obj = cm()
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "gen-"
    stored = api.create(obj)
    assert stored["metadata"]["name"].startswith("gen-") and len(stored["metadata"]["name"]) == 9


def test_update_with_stale_resource_version_conflicts(api):
    """An update carrying an old resourceVersion is a Conflict."""
    first = api.create(cm())
    second = copy.deepcopy(first)
    first["data"] = {"k": "1"}
    api.update(first)
    second["data"] = {"k": "2"}
    with pytest.raises(Conflict):
        api.update(second)


@pytest.mark.parametrize("change,bumped", [
    (lambda d: d["spec"].update(replicas=3), True),
    (lambda d: d["metadata"]["labels"].update(extra="1"), False),
    (lambda d: d["metadata"].setdefault("annotations", {}).update(a="b"), False),
], ids=["spec", "label", "annotation"])
def test_generation_bumps_on_spec_change_only(api, change, bumped):
    """generation grows when the spec changes, not when metadata does."""
    obj = api.create(deployment())
    change(obj)
    updated = api.update(obj)
    assert updated["metadata"]["generation"] == (2 if bumped else 1)


def test_status_only_through_status_path(api):
    """The main path ignores status; the status path writes only status."""
    obj = api.create(deployment())
    obj["status"] = {"replicas": 5}
    obj["spec"]["replicas"] = 2
    main = api.update(obj)
    assert "status" not in main and main["spec"]["replicas"] == 2
    main["status"] = {"replicas": 7}
    main["spec"]["replicas"] = 9
    status = api.update_status(main)
    assert status["status"] == {"replicas": 7} and status["spec"]["replicas"] == 2
    assert status["metadata"]["generation"] == 2


@pytest.mark.parametrize("patch_type,body,expect", [
    ("merge", {"data": {"k": None, "n": "1"}}, {"n": "1"}),
    ("json", [{"op": "add", "path": "/data/n", "value": "1"}], {"k": "v", "n": "1"}),
    ("strategic", {"data": {"n": "1"}}, {"k": "v", "n": "1"}),
], ids=["merge", "json", "strategic"])
def test_patch_types(api, patch_type, body, expect):
    """merge, JSON and strategic patches each change the stored object."""
    api.create(cm())
    out = api.patch(api.resource("cm"), "c1", body, patch_type=patch_type)
    assert out["data"] == expect


def test_strategic_patch_merges_containers_by_name(api):
    """A strategic patch of one container keeps the others."""
    d = deployment()
    d["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox:2"})
    api.create(d)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:3"}]}}}}
    out = api.patch(api.resource("deploy"), "web", patch)
    images = {c["name"]: c["image"] for c in out["spec"]["template"]["spec"]["containers"]}
    assert images == {"c": "busybox:3", "side": "busybox:2"}


def test_patch_pinned_to_old_version_conflicts(api):
    """A patch that names a stale resourceVersion is a Conflict, not retried."""
    api.create(cm())
    api.patch(api.resource("cm"), "c1", {"data": {"x": "1"}}, patch_type="merge")
    with pytest.raises(Conflict):
        api.patch(api.resource("cm"), "c1", {"metadata": {"resourceVersion": "1"}, "data": {"y": "1"}},
                  patch_type="merge")


def test_concurrent_patches_lose_nothing(api):
    """Patches from many threads at once are all applied (retry on Conflict)."""
    api.create(cm(k="0"))
    rt = api.resource("cm")

    def worker(i):
        for j in range(10):
            api.patch(rt, "c1", {"data": {f"t{i}-{j}": "x"}}, patch_type="merge")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(api.get(rt, "c1")["data"]) == 41


def test_finalizers_hold_deletion(api):
    """An object with finalizers is marked, then goes when its finalizers are removed."""
    obj = cm()
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    api.create(obj)
    marked = api.delete(api.resource("cm"), "c1")
    assert marked["metadata"]["deletionTimestamp"]
    marked["metadata"]["finalizers"] = []
    api.update(marked)
    with pytest.raises(NotFound):
        api.get(api.resource("cm"), "c1")


def test_no_new_finalizers_while_deleting(api):
    """A terminating object refuses new finalizers."""
    obj = cm()
    obj["metadata"]["finalizers"] = ["a"]
    api.create(obj)
    marked = api.delete(api.resource("cm"), "c1")
    marked["metadata"]["finalizers"] = ["a", "b"]
    with pytest.raises(Forbidden):
        api.update(marked)


def _owned(api, owner, name):
    child = cm(name)
    child["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]
    return api.create(child)


def test_orphan_propagation_releases_dependents(api):
    """Orphan deletion removes the owner and the dependents' ownerReferences."""
    owner = api.create(deployment())
    _owned(api, owner, "child")
    api.delete(api.resource("deploy"), "web", propagation="Orphan")
    assert "ownerReferences" not in api.get(api.resource("cm"), "child")["metadata"]
    with pytest.raises(NotFound):
        api.get(api.resource("deploy"), "web")


def test_foreground_propagation_marks_owner(api):
    """Foreground deletion keeps the owner with the foregroundDeletion finalizer while dependents exist."""
    owner = api.create(deployment())
    _owned(api, owner, "child")
    marked = api.delete(api.resource("deploy"), "web", propagation="Foreground")
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert marked["metadata"]["deletionTimestamp"]


def test_bound_pod_waits_for_its_node_agent(api):
    """A pod bound to an existing node is marked for graceful deletion; grace 0 removes it."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    api.create(pod(node="n1"))
    marked = api.delete(api.resource("pod"), "p")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    api.delete(api.resource("pod"), "p", grace_period=0)
    with pytest.raises(NotFound):
        api.get(api.resource("pod"), "p")


def test_status_write_during_grace_keeps_the_pod(api):
    """A terminating pod within its grace period survives status writes; only grace 0 removes it."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    api.create(pod(node="n1"))
    marked = api.delete(api.resource("pod"), "p")
    marked["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    api.update_status(marked)
    assert api.get(api.resource("pod"), "p")["metadata"]["deletionTimestamp"]
    api.delete(api.resource("pod"), "p", grace_period=0)
    with pytest.raises(NotFound):
        api.get(api.resource("pod"), "p")


def test_label_and_field_selectors(api):
    """list filters by label selector and by the supported field selectors."""
    from kctl.machinery.selectors import parse_field_selector, parse_label_selector

    api.create(pod("a", labels={"app": "x", "tier": "web"}))
    api.create(pod("b", labels={"app": "y"}))
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    api.create(pod("c", node="n1", labels={"app": "x"}))
    rt = api.resource("pods")
    names = lambda items: sorted(o["metadata"]["name"] for o in items)  # noqa: E731
    assert names(api.list(rt, namespace="default", label_selector=parse_label_selector("app in (x)"))[0]) == ["a", "c"]
    assert names(api.list(rt, label_selector=parse_label_selector("app=x,!tier"))[0]) == ["c"]
    assert names(api.list(rt, field_selector=parse_field_selector("spec.nodeName=", kind="Pod"))[0]) == ["a", "b"]
    assert names(api.list(rt, field_selector=parse_field_selector("metadata.name=b", kind="Pod"))[0]) == ["b"]


def test_watch_reports_objects_leaving_the_selector(api):
    """A watcher with a selector sees DELETED when an object stops matching."""
    from kctl.machinery.selectors import parse_label_selector

    first = api.create(pod("a", labels={"app": "x"}))
    rev = int(first["metadata"]["resourceVersion"])
    first["metadata"]["labels"] = {"app": "y"}
    api.update(first)
    events = list(api.watch(api.resource("pods"), namespace="default", since=rev,
                            label_selector=parse_label_selector("app=x"), known={("default", "a")}, timeout=0.2))
    assert [t for t, _ in events] == ["DELETED"]


def test_schema_error_names_the_field(api):
    """A mistyped field is Invalid with its full path."""
    d = deployment()
    d["spec"]["replicass"] = 3
    with pytest.raises(Invalid, match="spec.replicass"):
        api.create(d)
    assert api.store.count("Deployment.apps") == 0


def test_unknown_kind_is_bad_request(api):
    """A kind kctl does not serve is refused."""
    with pytest.raises(BadRequest, match="no matches for kind"):
        api.create({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "x"}})


def test_pod_security_baseline_refuses_privileged(api):
    """Pod Security baseline refuses a privileged container, naming the field."""
    p = pod()
    p["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    with pytest.raises(Forbidden, match=r"spec.containers\[0\].securityContext.privileged"):
        api.create(p)


def test_pod_security_relaxed_by_namespace_label(api):
    """A namespace labelled privileged admits a privileged pod."""
    api.create(namespace("ops", **{"pod-security.kubernetes.io/enforce": "privileged"}))
    p = pod()
    p["metadata"]["namespace"] = "ops"
    p["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    assert api.create(p)["metadata"]["namespace"] == "ops"


def test_secret_string_data_becomes_data(api):
    """stringData is folded into base64 data, as in Kubernetes."""
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"pw": "hunter2"}}
    stored = api.create(obj)
    assert stored["data"] == {"pw": "aHVudGVyMg=="} and "stringData" not in stored


def test_dry_run_writes_nothing(api):
    """A server dry run admits and checks but stores nothing."""
    out = api.create(cm(), dry_run=True)
    assert out["metadata"]["uid"]
    assert api.store.count("ConfigMap") == 0 and api.store.revision() == 1  # 1: the default namespace


def test_write_all_atomic(api):
    """--atomic: one bad document means nothing is written, and each error is reported."""
    bad = deployment("bad")
    bad["spec"]["replicas"] = "three"
    results = api.write_all([("apply", cm("a")), ("apply", bad), ("apply", cm("b"))], atomic=True)
    assert results[1].error is not None and results[0].error is None
    assert api.store.count("ConfigMap") == 0


def test_write_all_non_atomic_keeps_good_documents(api):
    """Without --atomic the good documents are written and the bad one is reported."""
    bad = deployment("bad")
    bad["spec"]["replicas"] = "three"
    results = api.write_all([("apply", cm("a")), ("apply", bad), ("apply", cm("b"))])
    assert [r.action for r in results] == ["created", "", "created"]
    assert api.store.count("ConfigMap") == 2


def test_apply_three_way(api):
    """apply: created, then configured (removed field removed, others' fields kept), then unchanged."""
    d = deployment(labels={"app": "web", "old": "1"})
    assert api.apply(d).action == "created"
    api.patch(api.resource("deploy"), "web", {"metadata": {"labels": {"someone": "else"}}}, patch_type="merge")
    d2 = deployment(labels={"app": "web"}, replicas=2)
    result = api.apply(d2)
    assert result.action == "configured"
    assert result.obj["metadata"]["labels"] == {"app": "web", "someone": "else"}
    assert result.obj["spec"]["replicas"] == 2
    assert api.apply(d2).action == "unchanged"


def test_namespace_in_same_batch(api):
    """A Namespace and objects in it apply together in one batch."""
    results = api.write_all([("apply", namespace("fresh")), ("apply", cm("a", ns="fresh"))])
    assert [r.action for r in results] == ["created", "created"]


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]},
}


def test_crd_makes_kind_appliable_and_validated(api):
    """A CRD adds a kind; its objects are validated by the openAPIV3Schema; deleting the CRD removes them."""
    api.create(CRD)
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}}
    assert api.create(widget)["spec"]["size"] == 3
    assert api.resource("wd").kind == "Widget"
    bad = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": "big"}}
    with pytest.raises(Invalid, match="spec.size"):
        api.create(bad)
    api.delete(api.resource("crd"), "widgets.example.com")
    assert api.store.count("Widget.example.com") == 0
    with pytest.raises(BadRequest):
        api.resource("widgets")
