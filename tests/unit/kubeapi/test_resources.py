"""The resource verbs over raw HTTPS (kctl.kubeapi.resources): get, list, create, update, patch, delete, options."""

from __future__ import annotations

import json

import pytest

CM = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def _cm(name: str, labels: dict | None = None, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}},
            "data": dict(data)}


def _deployment(name: str, replicas: int = 1) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def _pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def _create(kubeapi, path: str, obj: dict) -> dict:
    reply = kubeapi.request("POST", path, body=obj)
    assert reply.status == 201, reply.body
    return reply.json()


# -- reads --------------------------------------------------------------------------------------

def test_get_one_object_and_not_found(kubeapi):
    """GET returns the stored object; a missing one is a 404 NotFound Status naming it."""
    _create(kubeapi, CM, _cm("a", x="1"))
    got = kubeapi.request("GET", f"{CM}/a")
    assert got.status == 200 and got.headers["Content-Type"].startswith("application/json")
    assert got.json()["data"] == {"x": "1"}
    missing = kubeapi.request("GET", f"{CM}/nope")
    assert missing.status == 404
    assert missing.json()["reason"] == "NotFound" and missing.json()["message"] == 'configmaps "nope" not found'
    assert missing.json()["details"] == {"name": "nope", "kind": "configmaps"}


@pytest.mark.parametrize("path", ["/api/v1/namespaces/default/widgets", "/apis/nope.io/v1/things",
                                  "/apis/apps/v2/deployments", "/api/v1/namespaces/default/nodes/n1"],
                         ids=["unknown-resource", "unknown-group", "unknown-version", "cluster-kind-in-namespace"])
def test_unknown_paths_are_404(kubeapi, path):
    """A path no kind answers to: 404 `the server could not find the requested resource`."""
    reply = kubeapi.request("GET", path)
    assert reply.status == 404
    assert reply.json()["message"] == "the server could not find the requested resource"


def test_list_namespaced_all_namespaces_and_cluster_scoped(kubeapi):
    """A list in one namespace, across all, and of a cluster-scoped kind: a XList with the list's revision."""
    _create(kubeapi, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    _create(kubeapi, CM, _cm("a"))
    _create(kubeapi, "/api/v1/namespaces/other/configmaps", _cm("b"))
    one = kubeapi.request("GET", CM).json()
    assert one["kind"] == "ConfigMapList" and one["apiVersion"] == "v1"
    assert [i["metadata"]["name"] for i in one["items"]] == ["a"]
    every = kubeapi.request("GET", "/api/v1/configmaps").json()
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in every["items"]] == [("default", "a"),
                                                                                          ("other", "b")]
    assert int(every["metadata"]["resourceVersion"]) >= int(one["metadata"]["resourceVersion"])
    namespaces = kubeapi.request("GET", "/api/v1/namespaces").json()
    assert {"default", "other"} <= {i["metadata"]["name"] for i in namespaces["items"]}


@pytest.mark.parametrize("query,expected", [
    ("labelSelector=tier%3Dweb", ["a", "c"]),
    ("labelSelector=tier%20in%20(web,db),!canary", ["a", "b"]),
    ("fieldSelector=metadata.name%3Db", ["b"]),
    ("fieldSelector=metadata.name!%3Db", ["a", "c"]),
    ("labelSelector=tier%3Dweb&fieldSelector=metadata.name%3Dc", ["c"]),
], ids=["label-equals", "label-set", "field-name", "field-not", "both"])
def test_list_selectors(kubeapi, query, expected):
    """labelSelector and fieldSelector select as Kubernetes' do."""
    _create(kubeapi, CM, _cm("a", {"tier": "web"}))
    _create(kubeapi, CM, _cm("b", {"tier": "db"}))
    _create(kubeapi, CM, _cm("c", {"tier": "web", "canary": "yes"}))
    reply = kubeapi.request("GET", f"{CM}?{query}")
    assert reply.status == 200, reply.body
    assert [i["metadata"]["name"] for i in reply.json()["items"]] == expected


@pytest.mark.parametrize("query,fragment", [
    ("labelSelector=a%3D%3D%3Db", "invalid label selector"),
    ("fieldSelector=spec.nope%3Dx", "field label not supported: spec.nope"),
    ("limit=-1", "limit"),
    ("continue=garbage!", "continue key is not valid"),
    ("resourceVersionMatch=Exact", "resourceVersionMatch is forbidden unless resourceVersion is provided"),
], ids=["label", "field", "limit", "continue", "rv-match"])
def test_bad_list_parameters_are_400(kubeapi, query, fragment):
    """A bad query parameter: 400 BadRequest naming it."""
    reply = kubeapi.request("GET", f"{CM}?{query}")
    assert reply.status == 400, reply.body
    assert reply.json()["reason"] == "BadRequest" and fragment in reply.json()["message"]


def test_limit_and_continue_page_through_at_the_first_revision(kubeapi):
    """limit/continue: pages in name order, remainingItemCount, every page at the first list's revision."""
    for name in ("e", "a", "d", "b", "c"):
        _create(kubeapi, CM, _cm(name))
    first = kubeapi.request("GET", f"{CM}?limit=2").json()
    assert [i["metadata"]["name"] for i in first["items"]] == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 3
    revision = first["metadata"]["resourceVersion"]
    _create(kubeapi, CM, _cm("f"))
    second = kubeapi.request("GET", f"{CM}?limit=2&continue={first['metadata']['continue']}").json()
    assert [i["metadata"]["name"] for i in second["items"]] == ["c", "d"]
    assert second["metadata"]["resourceVersion"] == revision
    third = kubeapi.request("GET", f"{CM}?limit=2&continue={second['metadata']['continue']}").json()
    names = [i["metadata"]["name"] for i in third["items"]]
    assert names[0] == "e" and "continue" not in third["metadata"] or names == ["e", "f"]


def test_resource_version_exact_and_too_new(kubeapi):
    """resourceVersionMatch=Exact at an older revision is 410 Expired; a revision from the future times out (504)."""
    _create(kubeapi, CM, _cm("a"))
    current = int(kubeapi.request("GET", CM).json()["metadata"]["resourceVersion"])
    _create(kubeapi, CM, _cm("b"))
    exact = kubeapi.request("GET", f"{CM}?resourceVersion={current}&resourceVersionMatch=Exact")
    assert exact.status == 410 and exact.json()["reason"] == "Expired"
    future = kubeapi.request("GET", f"{CM}?resourceVersion={current + 1000}")
    assert future.status == 504 and future.json()["reason"] == "Timeout"
    assert "Too large resource version" in future.json()["message"]
    old = kubeapi.request("GET", f"{CM}?resourceVersion={current}&resourceVersionMatch=NotOlderThan")
    assert old.status == 200 and len(old.json()["items"]) == 2


# -- writes -------------------------------------------------------------------------------------

def test_create_conflicts_and_namespace_checks(kubeapi):
    """POST: 201 with the stored object; a taken name 409 AlreadyExists; a body in another namespace 400."""
    created = _create(kubeapi, CM, _cm("a"))
    assert created["metadata"]["namespace"] == "default" and created["metadata"]["uid"]
    again = kubeapi.request("POST", CM, body=_cm("a"))
    assert again.status == 409 and again.json()["reason"] == "AlreadyExists"
    other = _cm("b")
    other["metadata"]["namespace"] = "elsewhere"
    mismatch = kubeapi.request("POST", CM, body=other)
    assert mismatch.status == 400
    assert "does not match the namespace" in mismatch.json()["message"]
    wrong_kind = kubeapi.request("POST", CM, body=_pod("p"))
    assert wrong_kind.status == 400 and "does not match the expected kind" in wrong_kind.json()["message"]


def test_create_invalid_object_is_422_with_causes(kubeapi):
    """An object admission refuses: 422 Invalid with one cause per field."""
    bad = _deployment("web", replicas=-1)
    reply = kubeapi.request("POST", DEPLOYMENTS, body=bad)
    assert reply.status == 422, reply.body
    status = reply.json()
    assert status["reason"] == "Invalid" and status["details"]["kind"] == "Deployment"
    assert any(c.get("field") == "spec.replicas" for c in status["details"]["causes"])


def test_dry_run_writes_nothing(kubeapi):
    """dryRun=All: create, update, patch and delete answer as if done and store nothing."""
    reply = kubeapi.request("POST", f"{CM}?dryRun=All", body=_cm("a"))
    assert reply.status == 201 and reply.json()["metadata"]["name"] == "a"
    assert kubeapi.request("GET", f"{CM}/a").status == 404
    _create(kubeapi, CM, _cm("a", x="1"))
    patched = kubeapi.request("PATCH", f"{CM}/a?dryRun=All", body={"data": {"x": "2"}},
                              content_type="application/merge-patch+json")
    assert patched.status == 200 and patched.json()["data"]["x"] == "2"
    assert kubeapi.request("GET", f"{CM}/a").json()["data"]["x"] == "1"
    deleted = kubeapi.request("DELETE", f"{CM}/a?dryRun=All")
    assert deleted.status == 200
    assert kubeapi.request("GET", f"{CM}/a").status == 200
    bad = kubeapi.request("POST", f"{CM}?dryRun=Some", body=_cm("b"))
    assert bad.status == 400 and 'supported values: "All"' in bad.json()["message"]


def test_update_with_stale_resource_version_conflicts(kubeapi):
    """PUT: a current resourceVersion updates; a stale one is 409 Conflict; a different name 400."""
    created = _create(kubeapi, CM, _cm("a", x="1"))
    created["data"] = {"x": "2"}
    updated = kubeapi.request("PUT", f"{CM}/a", body=created)
    assert updated.status == 200 and updated.json()["data"] == {"x": "2"}
    created["data"] = {"x": "3"}
    stale = kubeapi.request("PUT", f"{CM}/a", body=created)
    assert stale.status == 409 and stale.json()["reason"] == "Conflict"
    renamed = kubeapi.request("PUT", f"{CM}/b", body=updated.json())
    assert renamed.status == 400 and "does not match the name on the URL" in renamed.json()["message"]
    missing = kubeapi.request("PUT", f"{CM}/zzz", body=_cm("zzz"))
    assert missing.status == 404


@pytest.mark.parametrize("content_type,patch,expected", [
    ("application/merge-patch+json", {"metadata": {"labels": {"a": "b"}}}, {"a": "b"}),
    ("application/strategic-merge-patch+json", {"metadata": {"labels": {"a": "c"}}}, {"a": "c"}),
    ("application/json-patch+json", [{"op": "add", "path": "/metadata/labels", "value": {"a": "d"}}], {"a": "d"}),
], ids=["merge", "strategic", "json"])
def test_patch_types(kubeapi, content_type, patch, expected):
    """PATCH with each of Kubernetes' three patch types."""
    _create(kubeapi, DEPLOYMENTS, _deployment("web"))
    reply = kubeapi.request("PATCH", f"{DEPLOYMENTS}/web", body=patch, content_type=content_type)
    assert reply.status == 200, reply.body
    assert reply.json()["metadata"]["labels"] == expected


def test_patch_unknown_type_is_415(kubeapi):
    """A patch in a media type Kubernetes does not know: 415 UnsupportedMediaType."""
    _create(kubeapi, CM, _cm("a"))
    reply = kubeapi.request("PATCH", f"{CM}/a", body={"data": {}}, content_type="text/plain")
    assert reply.status == 415 and reply.json()["reason"] == "UnsupportedMediaType"


@pytest.mark.parametrize("validation,status_code", [("Strict", 400), ("Warn", 201), ("Ignore", 201), ("", 201)],
                         ids=["strict", "warn", "ignore", "default-warn"])
def test_field_validation(kubeapi, validation, status_code):
    """fieldValidation: Strict refuses unknown fields (strict decoding error), Warn drops them with a Warning
    header, Ignore drops them silently; the default is Warn, as kube-apiserver's."""
    bad = _deployment("web")
    bad["spec"]["foo"] = 1
    query = f"?fieldValidation={validation}" if validation else ""
    reply = kubeapi.request("POST", f"{DEPLOYMENTS}{query}", body=bad)
    assert reply.status == status_code, reply.body
    if validation == "Strict":
        assert reply.json()["message"] == 'strict decoding error: unknown field "spec.foo"'
        return
    assert "foo" not in reply.json()["spec"]
    warnings = reply.warnings()
    if validation == "Ignore":
        assert warnings == []
    else:
        assert warnings == ['299 - "unknown field \\"spec.foo\\""']


def test_bad_field_validation_value_is_400(kubeapi):
    """fieldValidation must be Strict, Warn or Ignore."""
    reply = kubeapi.request("POST", f"{CM}?fieldValidation=Loose", body=_cm("a"))
    assert reply.status == 400 and "fieldValidation" in reply.json()["message"]


def test_delete_returns_status_or_pending_object(kubeapi):
    """DELETE: a Status Success naming the object once gone; the object itself while a finalizer holds it."""
    created = _create(kubeapi, CM, _cm("a"))
    gone = kubeapi.request("DELETE", f"{CM}/a")
    assert gone.status == 200
    assert gone.json()["status"] == "Success"
    assert gone.json()["details"] == {"name": "a", "group": "", "kind": "configmaps",
                                      "uid": created["metadata"]["uid"]}
    held = _cm("b")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    _create(kubeapi, CM, held)
    pending = kubeapi.request("DELETE", f"{CM}/b", body={"kind": "DeleteOptions", "apiVersion": "v1",
                                                         "propagationPolicy": "Foreground"})
    assert pending.status == 200, pending.body
    assert pending.json()["kind"] == "ConfigMap" and pending.json()["metadata"]["deletionTimestamp"]


@pytest.mark.parametrize("preconditions,status_code", [
    ({"uid": "wrong"}, 409), ({"resourceVersion": "1"}, 409), ({"uid": "RIGHT"}, 200), ({}, 200)],
    ids=["wrong-uid", "stale-rv", "right-uid", "none"])
def test_delete_preconditions(kubeapi, preconditions, status_code):
    """DeleteOptions.preconditions: a uid or resourceVersion that does not match is a 409 Conflict."""
    created = _create(kubeapi, CM, _cm("a"))
    if preconditions.get("uid") == "RIGHT":
        preconditions = {"uid": created["metadata"]["uid"]}
    reply = kubeapi.request("DELETE", f"{CM}/a", body={"preconditions": preconditions})
    assert reply.status == status_code, reply.body
    if status_code == 409:
        assert "Precondition failed" in reply.json()["message"]


def test_delete_collection_with_selector(kubeapi):
    """DELETE on a collection deletes what its selector selects and returns them as a list."""
    _create(kubeapi, CM, _cm("a", {"k": "x"}))
    _create(kubeapi, CM, _cm("b", {"k": "x"}))
    _create(kubeapi, CM, _cm("c", {"k": "y"}))
    reply = kubeapi.request("DELETE", f"{CM}?labelSelector=k%3Dx")
    assert reply.status == 200, reply.body
    assert sorted(i["metadata"]["name"] for i in reply.json()["items"]) == ["a", "b"]
    assert [i["metadata"]["name"] for i in kubeapi.request("GET", CM).json()["items"]] == ["c"]


def test_writes_record_the_request_user_and_field_manager(kubeapi):
    """Writes are made as the authenticated user (admission sees them) with the client's field manager and user
    agent (the audit log's)."""
    from kctl.apiserver import audit, fieldmanager

    seen = []
    original = kubeapi.api.create

    def create(obj, **kwargs):
        who = audit.requester()
        seen.append((who.user if who else None, "system:masters" in (who.groups if who else ()),
                     fieldmanager.current_manager(), audit.user_agent()))
        return original(obj, **kwargs)

    kubeapi.api.create = create
    try:
        _create(kubeapi, CM, _cm("a"))
        kubeapi.request("POST", f"{CM}?fieldManager=mine", body=_cm("b"),
                        headers={"User-Agent": "kubectl-create/v1.32.0 (linux/amd64)"})
        kubeapi.request("POST", CM, body=_cm("c"), headers={"User-Agent": "kubectl-create/v1.32.0 (linux/amd64)"})
    finally:
        kubeapi.api.create = original
    assert seen[0][:2] == ("kctl-admin", True)
    assert [s[2] for s in seen[1:]] == ["mine", "kubectl-create"]
    assert seen[2][3] == "kubectl-create/v1.32.0 (linux/amd64)"  # the audit log's userAgent


# -- subresources -------------------------------------------------------------------------------

def test_status_subresource_get_put_patch(kubeapi):
    """status: GET returns the object, PUT/PATCH write only the status."""
    created = _create(kubeapi, DEPLOYMENTS, _deployment("web"))
    got = kubeapi.request("GET", f"{DEPLOYMENTS}/web/status")
    assert got.status == 200 and got.json()["metadata"]["name"] == "web"
    created["status"] = {"replicas": 3}
    created["spec"]["replicas"] = 5
    put = kubeapi.request("PUT", f"{DEPLOYMENTS}/web/status", body=created)
    assert put.status == 200, put.body
    assert put.json()["status"]["replicas"] == 3 and put.json()["spec"]["replicas"] == 1
    patched = kubeapi.request("PATCH", f"{DEPLOYMENTS}/web/status", body={"status": {"readyReplicas": 2}},
                              content_type="application/merge-patch+json")
    assert patched.status == 200 and patched.json()["status"]["readyReplicas"] == 2
    no_status = kubeapi.request("GET", f"{CM}/x/status")
    assert no_status.status == 404


def test_scale_subresource(kubeapi):
    """scale: an autoscaling/v1 Scale; PUT and PATCH set spec.replicas; a stale Scale conflicts."""
    _create(kubeapi, DEPLOYMENTS, _deployment("web", replicas=2))
    scale = kubeapi.request("GET", f"{DEPLOYMENTS}/web/scale").json()
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"]["replicas"] == 2 and scale["status"]["selector"] == "app=web"
    scale["spec"]["replicas"] = 4
    put = kubeapi.request("PUT", f"{DEPLOYMENTS}/web/scale", body=scale)
    assert put.status == 200 and put.json()["spec"]["replicas"] == 4
    stale = kubeapi.request("PUT", f"{DEPLOYMENTS}/web/scale", body=scale)
    assert stale.status == 409
    patch = kubeapi.request("PATCH", f"{DEPLOYMENTS}/web/scale", body={"spec": {"replicas": 1}},
                            content_type="application/merge-patch+json")
    assert patch.status == 200 and patch.json()["spec"]["replicas"] == 1
    assert kubeapi.request("GET", f"{DEPLOYMENTS}/web").json()["spec"]["replicas"] == 1
    assert kubeapi.request("GET", "/apis/apps/v1/namespaces/default/daemonsets/x/scale").status == 404


def test_pod_binding_and_eviction(kubeapi):
    """pods/binding puts a pod on a node (201 Success); pods/eviction deletes it (201 Success)."""
    _create(kubeapi, "/api/v1/namespaces/default/pods", _pod("p"))
    bound = kubeapi.request("POST", "/api/v1/namespaces/default/pods/p/binding",
                            body={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                                  "target": {"kind": "Node", "name": "n1"}})
    assert bound.status == 201 and bound.json()["status"] == "Success", bound.body
    assert kubeapi.request("GET", "/api/v1/namespaces/default/pods/p").json()["spec"]["nodeName"] == "n1"
    again = kubeapi.request("POST", "/api/v1/namespaces/default/pods/p/binding",
                            body={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                                  "target": {"kind": "Node", "name": "n2"}})
    assert again.status == 409
    evicted = kubeapi.request("POST", "/api/v1/namespaces/default/pods/p/eviction",
                              body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}})
    assert evicted.status == 201 and evicted.json()["status"] == "Success", evicted.body


def test_method_not_allowed(kubeapi):
    """A verb a path does not take (PUT on a collection): 405."""
    reply = kubeapi.request("PUT", CM, body=_cm("a"))
    assert reply.status == 405 and reply.json()["reason"] == "MethodNotAllowed"


def test_yaml_body_and_protobuf_accept(kubeapi):
    """A YAML body is read; a client asking protobuf first is answered JSON (kubectl accepts it)."""
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  k: v\n"
    reply = kubeapi.request("POST", CM, body=body, content_type="application/yaml")
    assert reply.status == 201, reply.body
    got = kubeapi.request("GET", f"{CM}/y", headers={
        "Accept": "application/vnd.kubernetes.protobuf,application/json"})
    assert got.status == 200 and json.loads(got.body)["data"] == {"k": "v"}


TABLE = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
         "application/json")


def test_table_responses_for_get_and_list(kubeapi):
    """Accept as=Table: a meta.k8s.io/v1 Table with kctl's columns, one row per object, metadata in each row."""
    _create(kubeapi, DEPLOYMENTS, _deployment("web", replicas=2))
    listed = kubeapi.request("GET", DEPLOYMENTS, headers={"Accept": TABLE})
    assert listed.status == 200, listed.body
    table = listed.json()
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]][:2] == ["Name", "Ready"]
    assert len(table["rows"]) == 1 and table["rows"][0]["cells"][0] == "web"
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert table["metadata"]["resourceVersion"]
    one = kubeapi.request("GET", f"{DEPLOYMENTS}/web?includeObject=None", headers={"Accept": TABLE}).json()
    assert one["kind"] == "Table" and "object" not in one["rows"][0]


def test_table_watch_events_hold_one_row_tables(kubeapi):
    """A watch asking for Tables: each event's object is a Table of one row."""
    _create(kubeapi, CM, _cm("a"))
    conn, response = kubeapi.stream(f"{CM}?watch=true&timeoutSeconds=10", headers={"Accept": TABLE})
    try:
        event = json.loads(response.readline())
        assert event["type"] == "ADDED" and event["object"]["kind"] == "Table"
        assert [row["cells"][0] for row in event["object"]["rows"]] == ["a"]
    finally:
        conn.close()


@pytest.mark.parametrize("validation,status_code,warned", [("Strict", 400, False), ("Warn", 200, True),
                                                            ("Ignore", 200, False)],
                         ids=["strict", "warn", "ignore"])
@pytest.mark.parametrize("content_type,patch", [
    ("application/merge-patch+json", {"spec": {"foo": 1, "replicas": 3}}),
    ("application/strategic-merge-patch+json", {"spec": {"foo": 1, "replicas": 3}}),
    ("application/json-patch+json", [{"op": "add", "path": "/spec/foo", "value": 1},
                                     {"op": "replace", "path": "/spec/replicas", "value": 3}]),
], ids=["merge", "strategic", "json"])
def test_field_validation_of_patches(kubeapi, content_type, patch, validation, status_code, warned):
    """A patch adding an unknown field: Strict refuses it; Warn and Ignore apply the rest of the patch without it
    (Warn with a Warning header)."""
    _create(kubeapi, DEPLOYMENTS, _deployment("web"))
    reply = kubeapi.request("PATCH", f"{DEPLOYMENTS}/web?fieldValidation={validation}", body=patch,
                            content_type=content_type)
    assert reply.status == status_code, reply.body
    if status_code == 400:
        assert reply.json()["message"] == 'strict decoding error: unknown field "spec.foo"'
        assert kubeapi.request("GET", f"{DEPLOYMENTS}/web").json()["spec"]["replicas"] == 1
        return
    assert reply.json()["spec"]["replicas"] == 3 and "foo" not in reply.json()["spec"]
    assert reply.warnings() == (['299 - "unknown field \\"spec.foo\\""'] if warned else [])


def test_errors_about_another_object_name_that_object(kubeapi):
    """A create in a namespace that does not exist: the NotFound's details name the namespace, not the object."""
    reply = kubeapi.request("POST", "/api/v1/namespaces/nope/configmaps", body=_cm("a"))
    assert reply.status == 404, reply.body
    assert reply.json()["message"] == 'namespaces "nope" not found'
    assert reply.json()["details"] == {"name": "nope", "kind": "namespaces"}
