"""Recording Events: their shape, de-duplication into a count, and never raising."""

from __future__ import annotations

import logging

import pytest

from kctl.client import events

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


@pytest.fixture
def pod(api):
    return api.create(POD)


def stored_events(api, namespace="default"):
    return api.list(api.resource("events"), namespace=namespace)[0]


def test_event_shape(api, pod):
    """An Event names the object, its source and times, with count 1, in the object's namespace."""
    events.record(api, pod, type="Normal", reason="Pulled", message="image pulled", component="kubelet",
                  field_path="spec.containers{c}", host="n1")
    [event] = stored_events(api)
    assert event["metadata"]["name"].startswith("web.")
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"] == {
        "apiVersion": "v1", "kind": "Pod", "name": "web", "namespace": "default", "uid": pod["metadata"]["uid"],
        "resourceVersion": pod["metadata"]["resourceVersion"], "fieldPath": "spec.containers{c}"}
    assert event["source"] == {"component": "kubelet", "host": "n1"}
    assert (event["type"], event["reason"], event["message"], event["count"]) == ("Normal", "Pulled",
                                                                                  "image pulled", 1)
    assert event["firstTimestamp"] == event["lastTimestamp"]


def test_repeat_bumps_count(api, pod):
    """The same event three times is one Event with count 3."""
    for _ in range(3):
        events.record(api, pod, type="Warning", reason="BackOff", message="restarting", component="kubelet",
                      host="n1")
    [event] = stored_events(api)
    assert event["count"] == 3


def test_a_new_process_does_not_list_to_dedupe(api, pod, monkeypatch):
    """Without the in-memory index (a new process) a repeat is a new Event, as client-go's
    in-memory correlator does: recording never lists the namespace's Events."""
    events.record(api, pod, type="Normal", reason="Started", message="started", component="kubelet")
    monkeypatch.setattr(events, "_INDEX", events._Index(16))
    monkeypatch.setattr(api, "list", lambda *a, **k: pytest.fail("record listed Events"))
    events.record(api, pod, type="Normal", reason="Started", message="started", component="kubelet")
    events.record(api, pod, type="Normal", reason="Started", message="started", component="kubelet")
    monkeypatch.undo()
    assert sorted(e["count"] for e in stored_events(api)) == [1, 2]


def test_index_entry_of_a_deleted_event_is_dropped(api, pod):
    """An Event deleted behind the index's back is created anew."""
    events.record(api, pod, type="Normal", reason="Started", message="started", component="kubelet")
    [event] = stored_events(api)
    api.delete(api.resource("events"), event["metadata"]["name"], namespace="default")
    events.record(api, pod, type="Normal", reason="Started", message="started", component="kubelet")
    [again] = stored_events(api)
    assert again["count"] == 1 and again["metadata"]["uid"] != event["metadata"]["uid"]


@pytest.mark.parametrize("change", [
    {"reason": "Killing"},
    {"message": "other"},
    {"component": "scheduler"},
    {"host": "n2"},
    {"field_path": "spec.containers{d}"},
], ids=["reason", "message", "component", "host", "field-path"])
def test_different_events_are_kept_apart(api, pod, change):
    """Events differing in reason, message, source or field path are separate objects."""
    base = dict(type="Normal", reason="Started", message="started", component="kubelet", host="n1",
                field_path="")
    events.record(api, pod, **base)
    events.record(api, pod, **{**base, **change})
    assert sorted(e["count"] for e in stored_events(api)) == [1, 1]


def test_cluster_scoped_object_events_go_to_default(api):
    """Events about a Node land in the default namespace, without involvedObject.namespace."""
    node = api.create(NODE)
    events.record(api, node, type="Normal", reason="NodeReady", message="ready", component="kubelet")
    [event] = stored_events(api)
    assert "namespace" not in event["involvedObject"] and event["involvedObject"]["kind"] == "Node"


def test_never_raises(api, caplog):
    """An Event that cannot be written (no such namespace) is logged, not raised."""
    ghost = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "nope", "uid": "u1"}}
    with caplog.at_level(logging.WARNING, logger="kctl.events"):
        events.record(api, ghost, type="Normal", reason="Started", message="m", component="kubelet")
    assert "cannot record event Started" in caplog.text
    assert stored_events(api, "nope") == []


def test_long_message_is_truncated(api, pod):
    """Messages are cut to 1024 characters, as Kubernetes does."""
    events.record(api, pod, type="Warning", reason="Failed", message="x" * 5000, component="kubelet")
    [event] = stored_events(api)
    assert len(event["message"]) == events.MAX_MESSAGE
