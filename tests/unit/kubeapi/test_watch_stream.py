"""WATCH over HTTPS (kctl.kubeapi.watch): events as JSON lines, resourceVersion, 410, bookmarks, initial events."""

from __future__ import annotations

import json
import threading
import time

CM = "/api/v1/namespaces/default/configmaps"
#: seconds a test waits for an event that must come (generous: a loaded 2-core machine)
EVENT_WAIT = 30.0


def _cm(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {}}


def _create(kubeapi, obj: dict) -> dict:
    reply = kubeapi.request("POST", CM, body=obj)
    assert reply.status == 201, reply.body
    return reply.json()


class _Watch:
    """A watch request whose events are read one line at a time."""

    def __init__(self, kubeapi, query: str) -> None:
        self.conn, self.response = kubeapi.stream(f"{CM}?watch=true&{query}", timeout=EVENT_WAIT)

    def next(self) -> dict | None:
        line = self.response.readline()
        return json.loads(line) if line else None

    def events(self, count: int) -> list[tuple[str, str]]:
        """The next `count` events as (type, name or resourceVersion for a BOOKMARK)."""
        out = []
        for _ in range(count):
            event = self.next()
            assert event is not None, f"the stream ended after {out}"
            meta = event["object"].get("metadata") or {}
            out.append((event["type"], meta.get("name") or meta.get("resourceVersion")))
        return out

    def close(self) -> None:
        self.conn.close()


def test_watch_from_a_resource_version_sees_only_later_changes(kubeapi):
    """resourceVersion=N: the changes after N (ADDED, MODIFIED, DELETED), as chunked JSON lines."""
    _create(kubeapi, _cm("before"))
    revision = kubeapi.request("GET", CM).json()["metadata"]["resourceVersion"]
    watch = _Watch(kubeapi, f"resourceVersion={revision}")
    try:
        assert watch.response.status == 200
        assert watch.response.getheader("Content-Type") == "application/json"
        _create(kubeapi, _cm("after"))
        kubeapi.request("PATCH", f"{CM}/after", body={"data": {"k": "v"}},
                        content_type="application/merge-patch+json")
        kubeapi.request("DELETE", f"{CM}/after")
        assert watch.events(3) == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]
    finally:
        watch.close()


def test_watch_without_resource_version_starts_with_the_current_state(kubeapi):
    """No resourceVersion: ADDED for each existing object, then later changes."""
    _create(kubeapi, _cm("a"))
    _create(kubeapi, _cm("b"))
    watch = _Watch(kubeapi, "")
    try:
        assert watch.events(2) == [("ADDED", "a"), ("ADDED", "b")]
        _create(kubeapi, _cm("c"))
        assert watch.events(1) == [("ADDED", "c")]
    finally:
        watch.close()


def test_compacted_resource_version_is_an_error_event_410(kubeapi):
    """A resourceVersion behind the compacted horizon: one ERROR event holding a 410 Expired Status."""
    for name in ("a", "b", "c"):
        _create(kubeapi, _cm(name))
    kubeapi.api.store.compact(keep=0)
    watch = _Watch(kubeapi, "resourceVersion=1")
    try:
        event = watch.next()
        assert event["type"] == "ERROR"
        assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
        assert event["object"]["message"].startswith("too old resource version: 1")
        assert watch.next() is None
    finally:
        watch.close()


def test_bookmarks_when_asked(kubeapi):
    """allowWatchBookmarks=true: a quiet watch gets BOOKMARK events carrying the last resourceVersion."""
    created = _create(kubeapi, _cm("a"))
    revision = created["metadata"]["resourceVersion"]
    watch = _Watch(kubeapi, f"resourceVersion={revision}&allowWatchBookmarks=true")
    try:
        event = watch.next()
        assert event["type"] == "BOOKMARK"
        assert event["object"]["kind"] == "ConfigMap" and event["object"]["apiVersion"] == "v1"
        assert event["object"]["metadata"] == {"resourceVersion": revision}
    finally:
        watch.close()


def test_send_initial_events_ends_with_the_annotated_bookmark(kubeapi):
    """sendInitialEvents=true: ADDED per object, then a BOOKMARK annotated k8s.io/initial-events-end."""
    _create(kubeapi, _cm("a"))
    _create(kubeapi, _cm("b"))
    list_rv = kubeapi.request("GET", CM).json()["metadata"]["resourceVersion"]
    watch = _Watch(kubeapi, "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion="
                            "&allowWatchBookmarks=true")
    try:
        assert watch.events(2) == [("ADDED", "a"), ("ADDED", "b")]
        end = watch.next()
        assert end["type"] == "BOOKMARK"
        assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert int(end["object"]["metadata"]["resourceVersion"]) >= int(list_rv)
    finally:
        watch.close()


def test_send_initial_events_needs_not_older_than(kubeapi):
    """sendInitialEvents without resourceVersionMatch=NotOlderThan: 400, as Kubernetes."""
    reply = kubeapi.request("GET", f"{CM}?watch=true&sendInitialEvents=true")
    assert reply.status == 400 and "NotOlderThan" in reply.json()["message"]


def test_timeout_seconds_ends_the_stream(kubeapi):
    """timeoutSeconds: the server ends the response after it."""
    watch = _Watch(kubeapi, "timeoutSeconds=1&resourceVersion=1")
    try:
        assert watch.next() is None
    finally:
        watch.close()


def test_selector_watch_reports_objects_leaving_as_deleted(kubeapi):
    """A labelSelector watch: an object that stops matching is DELETED to it, one that starts is ADDED."""
    _create(kubeapi, _cm("a", tier="web"))
    watch = _Watch(kubeapi, "labelSelector=tier%3Dweb")
    try:
        assert watch.events(1) == [("ADDED", "a")]
        kubeapi.request("PATCH", f"{CM}/a", body={"metadata": {"labels": {"tier": "db"}}},
                        content_type="application/merge-patch+json")
        assert watch.events(1) == [("DELETED", "a")]
        _create(kubeapi, _cm("b", tier="web"))
        assert watch.events(1) == [("ADDED", "b")]
    finally:
        watch.close()


def test_deprecated_watch_prefix(kubeapi):
    """/api/v1/watch/namespaces/NS/configmaps watches as ?watch=true does."""
    _create(kubeapi, _cm("a"))
    conn, response = kubeapi.stream("/api/v1/watch/namespaces/default/configmaps?timeoutSeconds=5")
    try:
        event = json.loads(response.readline())
        assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "a"
    finally:
        conn.close()


def test_stopping_the_server_ends_open_watches(kubeapi):
    """stop() ends every watch (the client sees the stream end) and returns promptly."""
    watch = _Watch(kubeapi, "resourceVersion=1&timeoutSeconds=600")
    ended = threading.Event()

    def read() -> None:
        try:
            while watch.next() is not None:
                pass
        except OSError:
            pass
        ended.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started = time.monotonic()
    kubeapi.stop()
    assert time.monotonic() - started < EVENT_WAIT
    assert ended.wait(EVENT_WAIT)
    watch.close()


def test_send_initial_events_false_starts_now(kubeapi):
    """sendInitialEvents=false without a resourceVersion: no ADDED for what exists, only later changes."""
    _create(kubeapi, _cm("old"))
    watch = _Watch(kubeapi, "sendInitialEvents=false&resourceVersionMatch=NotOlderThan")
    try:
        _create(kubeapi, _cm("new"))
        assert watch.events(1) == [("ADDED", "new")]
    finally:
        watch.close()


def test_selector_watch_from_a_resource_version_reports_known_objects_as_modified(kubeapi):
    """A selector watch from a list's resourceVersion: a change to an object the list held is MODIFIED."""
    _create(kubeapi, _cm("a", tier="web"))
    revision = kubeapi.request("GET", f"{CM}?labelSelector=tier%3Dweb").json()["metadata"]["resourceVersion"]
    watch = _Watch(kubeapi, f"labelSelector=tier%3Dweb&resourceVersion={revision}")
    try:
        kubeapi.request("PATCH", f"{CM}/a", body={"data": {"k": "v"}}, content_type="application/merge-patch+json")
        _create(kubeapi, _cm("b", tier="web"))
        assert watch.events(2) == [("MODIFIED", "a"), ("ADDED", "b")]
    finally:
        watch.close()


def test_a_client_leaving_ends_its_watch_and_the_idle_reader(kubeapi):
    """When the client closes the connection, its watch leaves the kind's shared reader, which then stops."""
    from kctl.kubeapi import watchcache

    cache = watchcache.cache_of(kubeapi.serving.ctx)
    cache.linger = 0  # the reader stops as its last watcher leaves (else a minute later)

    def readers() -> set:  # running ones: a thread still starting is listed too, and cannot be joined yet
        return {t for t in threading.enumerate() if t.name == "kubeapi-watchcache:configmaps" and t.is_alive()}

    before = readers()
    watch = _Watch(kubeapi, "resourceVersion=1&timeoutSeconds=600")
    deadline = time.monotonic() + EVENT_WAIT
    while not readers() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    [mine] = readers() - before
    watch.close()
    mine.join(EVENT_WAIT)
    assert not mine.is_alive()
    assert not [b for b in cache.broadcasters.values() if b.watchers]
