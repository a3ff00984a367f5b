"""kctl's REST client (kctl.apiserver.rest.client.RESTAPIClient) against kctl's own HTTPS API, in process.

The client implements the API contract over the Kubernetes REST API: these tests call it as
kctl's CLI, controllers and node agent do and check it answers as the in-process APIServer would
(objects, revisions, the same error classes, warnings), over a real TLS connection with the
admin's client certificate from the fixture's kubeconfig.
"""

from __future__ import annotations

import threading
import time

import pytest

from kctl.apiserver.contract import Binding
from kctl.apiserver.rest import kubeconfig
from kctl.apiserver.rest.client import RESTAPIClient
from kctl.apiserver.rest.status import Unauthorized
from kctl.machinery.errors import (AlreadyExists, BadRequest, ClientSideError, Conflict, Gone, Invalid, NotFound)
from kctl.machinery.selectors import parse_field_selector, parse_label_selector

#: generous bound for anything that should be quick (a loaded 2-core machine)
WAIT = 20.0


@pytest.fixture
def client(kubeapi):
    """A RESTAPIClient from the fixture's kubeconfig; its warnings collected in client.seen."""
    seen: list[str] = []
    api = RESTAPIClient(kubeconfig.load(str(kubeapi.kubeconfig)), warn=seen.append)
    api.seen = seen
    yield api
    api.close()


def pod(name: str, namespace: str = "default", **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def cm(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def test_reads_match_the_server_objects_and_revision(client, kubeapi):
    """get, find, list (namespace, all, selectors) and revision answer as the APIServer behind them."""
    for name, ns, app in (("a", "default", "web"), ("b", "default", "db"), ("c", "other", "web")):
        if ns != "default" and kubeapi.api.find(kubeapi.api.resource("namespaces"), ns) is None:
            kubeapi.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        kubeapi.api.create(pod(name, ns, app=app))
    pods = client.resource("pods")
    assert client.get(pods, "a") == kubeapi.api.get(pods, "a")
    assert client.find(pods, "nope") is None
    items, rev = client.list(pods, namespace="default")
    assert sorted(p["metadata"]["name"] for p in items) == ["a", "b"]
    assert rev == kubeapi.api.revision() == client.revision()
    assert all(p["kind"] == "Pod" and p["apiVersion"] == "v1" for p in items)
    everywhere, _ = client.list(pods)
    assert sorted(p["metadata"]["name"] for p in everywhere) == ["a", "b", "c"]
    web, _ = client.list(pods, label_selector=parse_label_selector("app in (web)"))
    assert sorted(p["metadata"]["name"] for p in web) == ["a", "c"]
    named, _ = client.list(pods, field_selector=parse_field_selector("metadata.name=b", kind="Pod"))
    assert [p["metadata"]["name"] for p in named] == ["b"]


def test_list_follows_continue_pages(client, kubeapi, monkeypatch):
    """A LIST bigger than a page is read page by page and returned whole."""
    from kctl.apiserver.rest import client as module

    monkeypatch.setattr(module, "LIST_CHUNK", 2)
    for i in range(5):
        kubeapi.api.create(cm(f"cm{i}"))
    items, _ = client.list(client.resource("configmaps"), namespace="default")
    assert sorted(o["metadata"]["name"] for o in items) == [f"cm{i}" for i in range(5)]


ERRORS = [
    ("not-found", lambda c: c.get(c.resource("pods"), "ghost"), NotFound, 'pods "ghost" not found'),
    ("already-exists", lambda c: c.create(cm("dup")), AlreadyExists, 'configmaps "dup" already exists'),
    ("conflict", lambda c: c.update({**cm("dup"), "metadata": {"name": "dup", "resourceVersion": "1"}}), Conflict,
     "the object has been modified"),
    ("invalid", lambda c: c.create({**pod("bad"), "spec": {"containers": []}}), Invalid, "is invalid"),
    ("unknown-kind", lambda c: c.resource("frobnicators"), ClientSideError, "frobnicators"),
    ("by-uid", lambda c: c.get_by_uid("x"), BadRequest, "no form in the Kubernetes REST API"),
    ("backup", lambda c: c.backup("/tmp/x"), ClientSideError, "not supported with --server over HTTPS"),
]


@pytest.mark.parametrize("call,cls,message", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_are_the_kctl_error_classes(client, kubeapi, call, cls, message):
    """Each refusal raises the kctl.machinery.errors class (and message) a local APIServer raises."""
    kubeapi.api.create(cm("dup"))
    with pytest.raises(cls, match=message):
        call(client)


def test_writes_create_update_status_patch_and_delete(client, kubeapi):
    """create, update, update_status, the three patch types, and delete with a resourceVersion precondition."""
    pods = client.resource("pods")
    created = client.create(pod("w"))
    assert created["metadata"]["uid"] == kubeapi.api.get(pods, "w")["metadata"]["uid"]
    created["metadata"].setdefault("labels", {})["x"] = "1"
    updated = client.update(created)
    assert updated["metadata"]["labels"]["x"] == "1"
    client.update_status({**updated, "status": {"phase": "Running"}})
    assert kubeapi.api.get(pods, "w")["status"]["phase"] == "Running"
    client.patch(pods, "w", {"metadata": {"labels": {"s": "1"}}}, patch_type="strategic")
    client.patch(pods, "w", {"metadata": {"labels": {"m": "1"}}}, patch_type="merge")
    client.patch(pods, "w", [{"op": "add", "path": "/metadata/labels/j", "value": "1"}], patch_type="json")
    assert {"x", "s", "m", "j"} <= set(kubeapi.api.get(pods, "w")["metadata"]["labels"])
    with pytest.raises(Conflict):
        client.delete(pods, "w", resource_version="1", grace_period=0)
    client.delete(pods, "w", grace_period=0)
    assert kubeapi.api.find(pods, "w") is None


def test_dry_run_writes_nothing(client, kubeapi):
    """dry_run=True sends dryRun=All: the answer is the would-be object, the store is unchanged."""
    before = kubeapi.api.revision()
    out = client.create(cm("dry"), dry_run=True)
    assert out["metadata"]["name"] == "dry"
    assert kubeapi.api.find(client.resource("configmaps"), "dry") is None and kubeapi.api.revision() == before


def test_delete_of_an_object_gone_at_once_gives_its_identity(client, kubeapi):
    """A delete answered by a Status still returns an object with the name, namespace and uid."""
    uid = kubeapi.api.create(cm("gone"))["metadata"]["uid"]
    out = client.delete(client.resource("configmaps"), "gone")
    assert out["metadata"] == {"name": "gone", "namespace": "default", "uid": uid}


def test_apply_creates_configures_and_leaves_unchanged(client, kubeapi):
    """Client-side apply: created, configured (three-way merge keeps others' fields), unchanged."""
    first = client.apply(cm("app", a="1", b="2"))
    assert (first.action, first.error) == ("created", None)
    kubeapi.api.patch(kubeapi.api.resource("configmaps"), "app", {"data": {"other": "x"}}, patch_type="merge")
    second = client.apply(cm("app", a="1"))
    assert second.action == "configured"
    assert kubeapi.api.get(kubeapi.api.resource("configmaps"), "app")["data"] == {"a": "1", "other": "x"}
    assert client.apply(cm("app", a="1")).action == "unchanged"
    stale = client.apply({**cm("app", a="2"), "metadata": {"name": "app", "resourceVersion": "1"}})
    assert isinstance(stale.error, Conflict)


def test_write_all_reports_each_write_and_refuses_atomic_batches(client, kubeapi):
    """Each op succeeds or fails alone, in order; atomic=True of several writes is one BadRequest."""
    kubeapi.api.create(cm("exists"))
    results = client.write_all([("create", cm("new")), ("create", cm("exists")), ("apply", cm("applied")),
                                ("delete", cm("exists"))])
    assert [r.action if r.error is None else type(r.error) for r in results] == \
        ["created", AlreadyExists, "created", "deleted"]
    with pytest.raises(BadRequest, match="atomic"):
        client.write_all([("create", cm("x")), ("create", cm("y"))], atomic=True)
    assert client.write_all([("create", cm("one"))], atomic=True)[0].action == "created"


def test_admission_warnings_reach_warn_or_the_write_result(client, kubeapi, monkeypatch):
    """Warning headers go to the warn callback for one write, into WriteResult.warnings for a batch."""
    from kctl.admission import hooks

    def warn_always(hooks_, request, *, namespace_labels, warnings=None):
        if warnings is not None:
            warnings.append("careful: test warning")

    monkeypatch.setattr(hooks, "run_validating_hooks", warn_always)
    client.create(cm("w1"))
    assert client.seen == ["careful: test warning"]
    [result] = client.write_all([("create", cm("w2"))])
    assert result.warnings == ["careful: test warning"] and client.seen == ["careful: test warning"]


def test_bind_and_evict(client, kubeapi):
    """pods/binding puts a pod on a node (a second bind is a Conflict); pods/eviction deletes it."""
    pods = client.resource("pods")
    kubeapi.api.create(pod("b1"))
    kubeapi.api.create(pod("b2"))
    bound = client.bind("default", "b1", "node-1")
    assert bound["spec"]["nodeName"] == "node-1"
    results = client.bind_all([Binding("default", "b2", "node-1"), Binding("default", "b1", "node-2")])
    assert [r.action if r.error is None else type(r.error) for r in results] == ["bound", Conflict]
    status = client.evict("default", "b2", grace_period=0)
    assert status.get("kind") == "Status"
    deadline = time.monotonic() + WAIT
    while kubeapi.api.find(pods, "b2") is not None and not kubeapi.api.get(pods, "b2")["metadata"].get(
            "deletionTimestamp") and time.monotonic() < deadline:
        time.sleep(0.05)
    gone = kubeapi.api.find(pods, "b2")
    assert gone is None or gone["metadata"].get("deletionTimestamp")


def test_watch_streams_changes_after_since_and_stops_on_its_event(client, kubeapi):
    """A watch yields the changes after `since`; setting its stop event ends it promptly."""
    cms = client.resource("configmaps")
    since = kubeapi.api.revision()
    stop = threading.Event()
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def follow():
        try:
            for kind, obj in client.watch(cms, namespace="default", since=since, stop=stop):
                seen.append((kind, obj["metadata"]["name"]))
        finally:
            done.set()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    kubeapi.api.create(cm("w"))
    kubeapi.api.patch(cms, "w", {"data": {"a": "1"}}, patch_type="merge")
    kubeapi.api.delete(cms, "w")
    deadline = time.monotonic() + WAIT
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]
    stop.set()
    assert done.wait(WAIT), "the watch did not end when its stop event was set"
    thread.join(WAIT)


def test_watch_timeout_ends_it_and_a_compacted_revision_is_gone(client, kubeapi):
    """A watch with a timeout ends by itself; one from a compacted revision raises Gone."""
    cms = client.resource("configmaps")
    assert list(client.watch(cms, since=kubeapi.api.revision(), timeout=0.5)) == []
    store = kubeapi.api.store
    store.history = 0
    for i in range(5):
        kubeapi.api.create(cm(f"old{i}"))
    while store.compact():
        pass
    with pytest.raises(Gone):
        list(client.watch(cms, since=1, timeout=WAIT))


def test_custom_kinds_come_from_the_servers_crds(client, kubeapi):
    """A CRD made on the server is a kind of the client's registry, and its objects are served."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    kubeapi.api.create(crd)
    rt = client.resource("widgets")
    assert rt.group_kind == "Widget.example.com" and rt.is_custom
    result = client.apply({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                           "spec": {"size": 1}})
    assert result.error is None and result.action == "created"
    assert client.apply({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                         "spec": {"size": 2}}).action == "configured"
    assert client.get(rt, "w")["spec"] == {"size": 2}


def test_context_namespace_is_the_default_namespace(kubeapi):
    """The kubeconfig context's namespace is where objects without one go, as kubectl."""
    kubeapi.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    conn = kubeconfig.load(str(kubeapi.kubeconfig))
    from dataclasses import replace

    with RESTAPIClient(replace(conn, namespace="team")) as api:
        created = api.create(cm("here"))
        assert created["metadata"]["namespace"] == "team"
        assert api.namespace_of(api.resource("pods"), None, {}) == "team"


def test_user_is_the_certificates_common_name(client):
    """API.user: the CN of the kubeconfig's client certificate (the admin)."""
    from kctl.kubeapi.pki import ADMIN_USER

    assert client.user == ADMIN_USER


def test_no_credentials_is_unauthorized_and_a_wrong_ca_is_refused(kubeapi, tmp_path):
    """Without a certificate the server answers 401 (one kubectl line); a CA that did not sign it is refused."""
    from dataclasses import replace

    from kctl.apiserver.wire import ServerUnavailable

    conn = kubeconfig.load(str(kubeapi.kubeconfig))
    with RESTAPIClient(replace(conn, cert_data=None, key_data=None, cert_file=None, key_file=None)) as anonymous:
        with pytest.raises(Unauthorized, match="You must be logged in"):
            anonymous.list(anonymous.resource("pods"))
    other = tmp_path / "other-ca"
    from kctl.kubeapi.pki import PKI

    stranger = PKI.for_store(other / "kctl.db")
    stranger.ensure(sans=["127.0.0.1"])
    with RESTAPIClient(replace(conn, ca_data=stranger.ca_pem(), ca_file=None)) as untrusting:
        with pytest.raises(ServerUnavailable, match="not trusted"):
            untrusting.revision()


def test_keep_alive_reuses_connections_across_threads(client, kubeapi):
    """Many threads share the pool: every request succeeds and few connections are opened."""
    from kctl.apiserver.rest import transport

    opened = []
    real = transport._Conn.connect

    def counting(self):
        opened.append(1)
        real(self)

    kubeapi.api.create(cm("k"))
    cms = client.resource("configmaps")
    errors: list[BaseException] = []

    def work():
        try:
            for _ in range(20):
                client.get(cms, "k")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    transport._Conn.connect = counting
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT * 3)
    finally:
        transport._Conn.connect = real
    assert errors == []
    assert len(opened) <= 4 + 1


@pytest.mark.parametrize("how", ["timeout", "stop"])
def test_ending_a_silent_watch_is_clean(client, kubeapi, how):
    """A watch ended by its deadline or stop event while blocked in a read ends without an error, every time."""
    cms = client.resource("configmaps")
    for _ in range(5):
        stop = threading.Event()
        if how == "stop":
            threading.Timer(0.2, stop.set).start()
            changes = client.watch(cms, since=kubeapi.api.revision(), stop=stop)
        else:
            changes = client.watch(cms, since=kubeapi.api.revision(), timeout=0.2)
        started = time.monotonic()
        assert list(changes) == []
        assert time.monotonic() - started < WAIT


def test_server_side_apply_and_its_conflicts(client, kubeapi):
    """apply_server_side creates and merges by field manager; another manager's field is an ApplyConflict
    (with its field causes) unless forced."""
    from kctl.machinery.managedfields import ApplyConflict

    cms = client.resource("configmaps")
    made = client.apply_server_side(cms, "ssa", cm("ssa", a="1"), field_manager="alice")
    assert made["data"] == {"a": "1"}
    assert [m["manager"] for m in made["metadata"].get("managedFields") or ()] == ["alice"]
    with pytest.raises(ApplyConflict) as caught:
        client.apply_server_side(cms, "ssa", cm("ssa", a="2"), field_manager="bob")
    assert caught.value.causes and "data.a" in caught.value.causes[0].path
    forced = client.apply_server_side(cms, "ssa", cm("ssa", a="2"), field_manager="bob", force=True)
    assert forced["data"] == {"a": "2"}


def _service_account_client(kubeapi, client, name: str) -> RESTAPIClient:
    """A client authenticated by a ServiceAccount token from the server's TokenRequest (create_token)."""
    from dataclasses import replace

    kubeapi.api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name,
                                                                                   "namespace": "default"}})
    answer = client.create_token("default", name, {"spec": {"expirationSeconds": 3600}})
    token = answer["status"]["token"]
    conn = kubeconfig.load(str(kubeapi.kubeconfig))
    return RESTAPIClient(replace(conn, cert_data=None, key_data=None, cert_file=None, key_file=None, token=token))


def test_bearer_token_authenticates_as_the_service_account(client, kubeapi):
    """A TokenRequest's token is a bearer credential: the server knows the ServiceAccount (403, not 401)."""
    from kctl.machinery.errors import Forbidden

    with _service_account_client(kubeapi, client, "robot") as robot:
        assert robot.user == "system:serviceaccount:default:robot"
        with pytest.raises(Forbidden, match='User "system:serviceaccount:default:robot" cannot list'):
            robot.list(robot.resource("secrets"))


def test_custom_kinds_come_from_discovery_when_crds_may_not_be_listed(client, kubeapi):
    """A user who may read widgets but not CRDs still resolves the kind, through /apis discovery."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gadgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    kubeapi.api.create(crd)
    kubeapi.api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                        "metadata": {"name": "gadget-reader"},
                        "rules": [{"apiGroups": ["example.com"], "resources": ["gadgets"],
                                   "verbs": ["get", "list"]}]})
    kubeapi.api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                        "metadata": {"name": "gadget-reader"},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                    "name": "gadget-reader"},
                        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]})
    kubeapi.api.create({"apiVersion": "example.com/v1", "kind": "Gadget",
                        "metadata": {"name": "g1", "namespace": "default"}})
    with _service_account_client(kubeapi, client, "reader") as reader:
        rt = reader.resource("gd")
        assert (rt.group_kind, rt.plural, rt.namespaced, rt.is_custom, rt.has_status) == \
            ("Gadget.example.com", "gadgets", True, True, True)
        assert [o["metadata"]["name"] for o in reader.list(rt)[0]] == ["g1"]


def test_a_crd_written_by_this_client_is_a_kind_at_once(client, kubeapi):
    """Applying a CRD then its object in one batch works although the registry was just read."""
    def crd(plural: str, kind: str) -> dict:
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced",
                         "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                         "versions": [{"name": "v1", "served": True, "storage": True,
                                       "schema": {"openAPIV3Schema": {"type": "object",
                                                                      "x-kubernetes-preserve-unknown-fields": True}}}]}}

    def obj(kind: str) -> dict:
        return {"apiVersion": "example.com/v1", "kind": kind, "metadata": {"name": "one"}}

    results = client.write_all([("apply", crd("apples", "Apple")), ("apply", obj("Apple")),
                                ("apply", crd("pears", "Pear")), ("apply", obj("Pear"))])
    assert [(r.action, r.error) for r in results] == [("created", None)] * 4


@pytest.mark.parametrize("verb", ["create", "apply"])
def test_an_autoscaling_v1_object_is_sent_at_the_stored_version(client, verb):
    """A v1 HPA written over HTTPS is converted to v2 first (the path names v2), as the local API server does."""
    hpa = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": f"web-{verb}", "namespace": "default"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 70}}
    if verb == "create":
        stored = client.create(hpa)
    else:
        result = client.apply(hpa)
        assert result.error is None, result.error
        stored = result.obj
    assert stored["apiVersion"] == "autoscaling/v2"
    assert stored["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 70
