"""managedFields on every write and server-side apply (kctl.apiserver.fieldmanager through APIServer).

Every create and update records its manager's fields as Kubernetes' field manager does;
`apply_server_side` merges a configuration as structured-merge-diff's Apply does: ownership,
removal of what a manager no longer applies, conflicts with Kubernetes' text, force, the
client-side apply migration, and the same over the SSH wire protocol (kctl.apiserver.serve).
"""

from __future__ import annotations

import copy
import socket
import threading

import pytest

from kctl.apiserver import fieldmanager, serve
from kctl.apiserver import server as server_module
from kctl.apiserver.fieldmanager import managing
from kctl.apiserver.remote import RemoteAPIServer
from kctl.machinery.errors import APIError, BadRequest
from kctl.machinery.managedfields import ApplyConflict

WAIT = 30.0  # seconds a served connection may take to end


def _cm(name: str = "c", **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _deployment(*, replicas: int | None = 2, image: str = "nginx:1", labels: dict | None = None,
                containers: list[str] = ("web",)) -> dict:
    spec: dict = {"selector": {"matchLabels": {"app": "web"}}, "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": n, "image": image} for n in containers]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    meta: dict = {"name": "web"}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}


def _entries(obj: dict) -> dict[tuple[str, str], dict]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields") or ()}


def _fields(obj: dict, manager: str, operation: str) -> dict:
    return _entries(obj)[(manager, operation)]["fieldsV1"]


@pytest.mark.parametrize("agent,manager", [
    ("kctl/0.9.0 (apply)", "kctl-client-side-apply"),
    ("kctl/0.9.0 (create)", "kctl-create"),
    ("kctl/0.9.0 (rollout restart)", "kctl-rollout"),
    ("kctl/0.9.0 (daemon/deployment-controller)", "kctl-daemon"),
    ("kctl/0.9.0 ()", "kctl"),
    ("kubectl/v1.32.0 (linux/amd64) kubernetes/70d3cc9", "kubectl"),
    ("", "unknown"),
])
def test_default_manager(agent, manager):
    """The manager of a write with no explicit one: kctl's command, else the user agent up to '/'."""
    assert fieldmanager.default_manager(agent) == manager


def test_create_records_an_update_entry(api):
    """A create records its manager's fields (Update, apiVersion, time, FieldsV1), not the server's."""
    with managing("alice-tool"):
        stored = api.create(_cm(a="1", b="2"))
    [entry] = stored["metadata"]["managedFields"]
    assert entry["manager"] == "alice-tool" and entry["operation"] == "Update" and entry["apiVersion"] == "v1"
    assert entry["fieldsType"] == "FieldsV1" and entry["time"].endswith("Z") and "subresource" not in entry
    assert entry["fieldsV1"] == {"f:data": {".": {}, "f:a": {}, "f:b": {}}}
    assert api.get(api.resource("cm"), "c")["metadata"]["managedFields"] == stored["metadata"]["managedFields"]


def test_update_takes_changed_fields_and_removal_leaves_everyone(api):
    """An update owns what it changed (the old owner loses it); a removed field leaves every manager."""
    with managing("first"):
        api.create(_cm(a="1", b="2", c="3"))
    live = api.get(api.resource("cm"), "c")
    live["data"] = {"a": "changed", "b": "2"}
    with managing("second"):
        stored = api.update(live)
    assert _fields(stored, "first", "Update") == {"f:data": {".": {}, "f:b": {}}}
    assert _fields(stored, "second", "Update") == {"f:data": {"f:a": {}}}


def test_same_manager_updates_merge_into_one_entry(api):
    """Two updates by one manager are one entry holding both changes."""
    with managing("m"):
        api.create(_cm(a="1"))
        api.patch(api.resource("cm"), "c", {"data": {"b": "2"}})
    entries = api.get(api.resource("cm"), "c")["metadata"]["managedFields"]
    assert [e["manager"] for e in entries] == ["m"]
    assert entries[0]["fieldsV1"] == {"f:data": {".": {}, "f:a": {}, "f:b": {}}}


def test_status_writes_are_recorded_with_their_subresource(api):
    """A status write is its own entry (subresource status, status fields only); the main path never owns status."""
    with managing("creator"):
        api.create(_deployment())
    live = api.get(api.resource("deployments"), "web")
    live["status"] = {"replicas": 2}
    with managing("controller"):
        stored = api.update_status(live)
    entry = _entries(stored)[("controller", "Update")]
    assert entry["subresource"] == "status" and entry["fieldsV1"] == {"f:status": {".": {}, "f:replicas": {}}}
    assert "f:status" not in _fields(stored, "creator", "Update")


def test_unchanged_update_writes_nothing(api):
    """An update that changes nothing keeps the object, resourceVersion and entries as they were."""
    with managing("m"):
        stored = api.create(_cm(a="1"))
    again = api.update(copy.deepcopy(stored))
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert again["metadata"]["managedFields"] == stored["metadata"]["managedFields"]


def test_cleared_managed_fields_stay_untracked_until_server_side_apply(api):
    """`managedFields: [{}]` clears them; later updates are not tracked (Kubernetes); an apply starts again."""
    cms = api.resource("cm")
    with managing("creator"):
        api.create(_cm(a="1"))
    api.patch(cms, "c", {"metadata": {"managedFields": [{}]}})
    assert "managedFields" not in api.get(cms, "c")["metadata"]
    with managing("editor"):
        api.patch(cms, "c", {"data": {"a": "2"}})
    assert "managedFields" not in api.get(cms, "c")["metadata"]
    with pytest.raises(ApplyConflict, match='conflict with "before-first-apply" using v1: .data.a'):
        api.apply_server_side(cms, "c", _cm(a="3"), field_manager="tool")
    stored = api.apply_server_side(cms, "c", _cm(a="3"), field_manager="tool", force=True)
    assert stored["data"] == {"a": "3"}
    assert set(_entries(stored)) == {("tool", "Apply")}


def test_invalid_managed_fields_from_a_client_keep_the_stored_ones(api):
    """A client's managedFields that are not valid are ignored: the stored entries stay."""
    with managing("owner"):
        stored = api.create(_cm(a="1"))
    bad = copy.deepcopy(stored)
    bad["metadata"]["managedFields"] = [{"manager": "x", "operation": "Steal", "fieldsV1": {}}]
    bad["data"]["a"] = "2"
    with managing("owner"):
        after = api.update(bad)
    assert set(_entries(after)) == {("owner", "Update")}


def test_a_client_may_rewrite_managed_fields(api):
    """Valid managedFields sent with a resourceVersion are used (kubectl's client-side apply migration)."""
    with managing("old"):
        stored = api.create(_cm(a="1"))
    entry = dict(stored["metadata"]["managedFields"][0], manager="new", operation="Apply")
    entry.pop("apiVersion")
    entry["apiVersion"] = "v1"
    after = api.patch(api.resource("cm"), "c", [
        {"op": "test", "path": "/metadata/resourceVersion", "value": stored["metadata"]["resourceVersion"]},
        {"op": "replace", "path": "/metadata/managedFields", "value": [entry]}], patch_type="json")
    assert set(_entries(after)) == {("new", "Apply")}


def test_kctl_own_creates_start_untracked_then_later_writes_are_recorded(api):
    """A create with no explicit manager stores no managedFields; once applied, kctl's own writes are recorded."""
    cms = api.resource("cm")
    stored = api.create(_cm(a="1"))
    assert "managedFields" not in stored["metadata"]
    api.patch(cms, "c", {"data": {"a": "2"}})
    assert "managedFields" not in api.get(cms, "c")["metadata"]
    api.apply_server_side(cms, "c", _cm(a="2", b="1"), field_manager="tool")
    after = api.patch(cms, "c", {"data": {"c": "3"}})
    assert set(_entries(after)) == {("before-first-apply", "Update"), ("tool", "Apply"),
                                    (fieldmanager.default_manager(), "Update")}


def test_update_managers_are_capped(api):
    """More than 10 Update managers: the oldest merge into ancient-changes."""
    cms = api.resource("cm")
    with managing("creator"):
        api.create(_cm(a="0"))
    for i in range(12):
        with managing(f"m{i:02d}"):
            api.patch(cms, "c", {"data": {f"k{i}": "v"}})
    entries = api.get(cms, "c")["metadata"]["managedFields"]
    assert len(entries) == 11 and any(e["manager"] == "ancient-changes" for e in entries)


# -- server-side apply ---------------------------------------------------------------------------

def test_apply_creates_with_one_apply_entry(api):
    """Applying what does not exist creates it, owned by the applier alone (no Update entry)."""
    deployments = api.resource("deployments")
    stored = api.apply_server_side(deployments, "web", _deployment(), field_manager="kubectl")
    assert set(_entries(stored)) == {("kubectl", "Apply")}
    fields = _fields(stored, "kubectl", "Apply")
    assert fields["f:spec"]["f:replicas"] == {} and fields["f:spec"]["f:selector"] == {}
    assert fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"web"}'] == \
        {".": {}, "f:image": {}, "f:name": {}}
    assert api.get(deployments, "web")["metadata"]["uid"] == stored["metadata"]["uid"]


def test_reapply_unchanged_writes_nothing(api):
    """The same configuration again changes nothing: same resourceVersion, same entry time."""
    deployments = api.resource("deployments")
    first = api.apply_server_side(deployments, "web", _deployment(), field_manager="kubectl")
    again = api.apply_server_side(deployments, "web", _deployment(), field_manager="kubectl")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert again["metadata"]["managedFields"] == first["metadata"]["managedFields"]


@pytest.mark.parametrize("before,after,kept", [
    (_deployment(labels={"a": "1", "b": "2"}), _deployment(labels={"a": "1"}), {"a": "1"}),
    (_deployment(containers=["web", "side"]), _deployment(containers=["web"]), None),
])
def test_fields_no_longer_applied_are_removed(api, before, after, kept):
    """A label or list item the manager applied before and no longer applies is removed."""
    deployments = api.resource("deployments")
    api.apply_server_side(deployments, "web", before, field_manager="tool")
    stored = api.apply_server_side(deployments, "web", after, field_manager="tool")
    assert stored["metadata"].get("labels") == kept
    assert [c["name"] for c in stored["spec"]["template"]["spec"]["containers"]] == \
        [c["name"] for c in after["spec"]["template"]["spec"]["containers"]]


def test_a_field_another_applier_owns_stays(api):
    """Two appliers of the same value share it; when one stops applying it, the other keeps it."""
    deployments = api.resource("deployments")
    api.apply_server_side(deployments, "web", _deployment(labels={"team": "x"}), field_manager="one")
    api.apply_server_side(deployments, "web", _deployment(labels={"team": "x"}), field_manager="two")
    stored = api.apply_server_side(deployments, "web", _deployment(labels={}), field_manager="one")
    assert stored["metadata"]["labels"] == {"team": "x"}
    assert "f:labels" in _fields(stored, "two", "Apply")["f:metadata"]


def test_conflict_names_the_manager_and_field_then_force_takes_it(api, monkeypatch):
    """Another manager's different value is a 409 with Kubernetes' text and causes, never retried; force wins."""
    deployments = api.resource("deployments")
    api.apply_server_side(deployments, "web", _deployment(), field_manager="kubectl")
    with managing("kubectl-scale"):
        api.patch(deployments, "web", {"spec": {"replicas": 5}})
    backoffs: list[int] = []
    monkeypatch.setattr(server_module, "_backoff", backoffs.append)
    with pytest.raises(ApplyConflict) as caught:
        api.apply_server_side(deployments, "web", _deployment(), field_manager="kubectl")
    assert backoffs == []
    exc = caught.value
    assert exc.code == 409 and exc.reason == "Conflict"
    assert exc.message == 'Apply failed with 1 conflict: conflict with "kubectl-scale" using apps/v1: .spec.replicas'
    assert exc.status()["details"]["causes"] == [{"reason": "FieldManagerConflict", "field": ".spec.replicas",
                                                  "message": 'conflict with "kubectl-scale" using apps/v1'}]
    assert api.get(deployments, "web")["spec"]["replicas"] == 5
    stored = api.apply_server_side(deployments, "web", _deployment(), field_manager="kubectl", force=True)
    assert stored["spec"]["replicas"] == 2
    assert set(_entries(stored)) == {("kubectl", "Apply")}


def test_the_same_value_is_no_conflict(api):
    """Applying the value another manager set is no conflict: both own the field."""
    deployments = api.resource("deployments")
    api.apply_server_side(deployments, "web", _deployment(replicas=None), field_manager="kubectl")
    with managing("scaler"):
        api.patch(deployments, "web", {"spec": {"replicas": 4}})
    stored = api.apply_server_side(deployments, "web", _deployment(replicas=4), field_manager="kubectl")
    assert "f:replicas" in _fields(stored, "scaler", "Update")["f:spec"]
    assert "f:replicas" in _fields(stored, "kubectl", "Apply")["f:spec"]


def test_several_conflicts_are_listed_by_manager(api):
    """Conflicts with several fields list each manager's paths, as Kubernetes does."""
    deployments = api.resource("deployments")
    api.apply_server_side(deployments, "web", _deployment(), field_manager="a")
    with pytest.raises(ApplyConflict) as caught:
        api.apply_server_side(deployments, "web", _deployment(replicas=3, image="nginx:2"), field_manager="b")
    assert caught.value.message == (
        'Apply failed with 2 conflicts: conflicts with "a":\n- .spec.replicas\n'
        '- .spec.template.spec.containers[name="web"].image')
    assert len(caught.value.causes) == 2


@pytest.mark.parametrize("manager,conflicts", [("kubectl", False), ("other-tool", True)])
def test_client_side_applied_fields_go_to_kubectl(api, manager, conflicts):
    """What kubectl apply (client side) set may be changed by `kubectl apply --server-side`, not by another manager."""
    deployments = api.resource("deployments")
    with managing("kubectl-client-side-apply"):
        result = api.apply(_deployment())
    assert result.error is None
    if conflicts:
        with pytest.raises(ApplyConflict, match='conflict with "kubectl-client-side-apply" using apps/v1'):
            api.apply_server_side(deployments, "web", _deployment(image="nginx:2"), field_manager=manager)
        return
    stored = api.apply_server_side(deployments, "web", _deployment(image="nginx:2"), field_manager=manager)
    assert stored["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    last = stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    assert "nginx:2" in last  # kubectl's server-side apply keeps the annotation up to date


def test_kubectl_may_not_take_what_changed_since_the_client_side_apply(api):
    """A field someone changed after kubectl's client-side apply still conflicts for kubectl."""
    deployments = api.resource("deployments")
    with managing("kubectl-client-side-apply"):
        api.apply(_deployment())
    with managing("kubectl-scale"):
        api.patch(deployments, "web", {"spec": {"replicas": 7}})
    with pytest.raises(ApplyConflict, match=r'conflict with "kubectl-scale" using apps/v1: \.spec\.replicas'):
        api.apply_server_side(deployments, "web", _deployment(), field_manager="kubectl")


def test_dry_run_stores_nothing(api):
    """A dry-run apply answers the object it would store and writes nothing."""
    deployments = api.resource("deployments")
    answer = api.apply_server_side(deployments, "web", _deployment(), field_manager="kubectl", dry_run=True)
    assert answer["metadata"]["managedFields"][0]["manager"] == "kubectl"
    assert api.find(deployments, "web") is None


@pytest.mark.parametrize("obj,manager,message", [
    (dict(_deployment(), metadata={"name": "other"}), "m", "does not match the name on the URL"),
    (_cm("web"), "m", "does not match the kind of the request"),
    ({"metadata": {"name": "web"}}, "m", "apiVersion and kind must be set"),
    (_deployment(), "", "require a fieldManager"),
    (dict(_deployment(), metadata={"name": "web", "managedFields": [{}]}), "m", "managedFields must be nil"),
])
def test_bad_apply_requests_are_refused(api, obj, manager, message):
    """A configuration for another object or kind, without a manager, or carrying managedFields is a BadRequest."""
    with pytest.raises(BadRequest, match=message):
        api.apply_server_side(api.resource("deployments"), "web", obj, field_manager=manager)


def test_a_stale_resource_version_is_a_conflict(api):
    """A resourceVersion in the configuration is a precondition."""
    deployments = api.resource("deployments")
    api.apply_server_side(deployments, "web", _deployment(), field_manager="m")
    stale = _deployment(replicas=3)
    stale["metadata"]["resourceVersion"] = "1"
    with pytest.raises(APIError, match="the object has been modified"):
        api.apply_server_side(deployments, "web", stale, field_manager="m")


@pytest.fixture
def remote(api):
    """A RemoteAPIServer talking to `api` through kctl.apiserver.serve on a socketpair."""
    ends: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def channel():
        client, server_end = socket.socketpair()
        ends.extend((client, server_end))
        served = serve.Server(api, server_end.makefile("rb"), server_end.makefile("wb"), workers=2)
        thread = threading.Thread(target=served.run, daemon=True)
        thread.start()
        threads.append(thread)

        class Channel:
            rfile, wfile = client.makefile("rb"), client.makefile("wb")

            def failure(self) -> str:
                return "the test server went away"

            def close(self) -> None:
                for sock in (client, server_end):
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        return Channel()

    client = RemoteAPIServer("test://served", channel_factory=channel)
    yield client
    client.close()
    for thread in threads:
        thread.join(WAIT)
    for sock in ends:
        sock.close()


def test_apply_server_side_over_the_wire(api, remote):
    """The SSH protocol carries apply_server_side and its conflict (409, the same class, message and fields)."""
    deployments = remote.resource("deployments")
    stored = remote.apply_server_side(deployments, "web", _deployment(), field_manager="kubectl")
    assert set(_entries(stored)) == {("kubectl", "Apply")}
    with pytest.raises(ApplyConflict) as caught:
        remote.apply_server_side(deployments, "web", _deployment(replicas=9), field_manager="other")
    assert caught.value.code == 409
    assert caught.value.message == 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas'
    assert [c.path for c in caught.value.causes] == [".spec.replicas"]
