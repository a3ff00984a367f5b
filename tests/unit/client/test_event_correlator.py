"""events.Correlator: client-go's aggregation of similar Events and its spam filter per source and object."""

from __future__ import annotations

import pytest

from kctl.client import events

RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
      "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
               "template": {"metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(events, "CORRELATOR", events.Correlator(clock=clock))
    return clock


def stored(api) -> list[dict]:
    return api.list(api.resource("events"), namespace="default")[0]


def created(n: int, start: int = 0) -> list[str]:
    return [f"Created pod: web-{i}" for i in range(start, start + n)]


def record_one_by_one(api, obj: dict, messages: list[str], *, reason="SuccessfulCreate") -> None:
    for message in messages:
        events.record(api, obj, type="Normal", reason=reason, message=message, component="replicaset-controller")


def record_batch(api, obj: dict, messages: list[str]) -> None:
    events.record_all(api, [events.EventRequest(obj, "Normal", "SuccessfulCreate", m, "replicaset-controller")
                            for m in messages])


def summary(api) -> tuple[list[str], dict[str, int]]:
    """(messages of the Events of count 1, combined Event message -> count)."""
    single = sorted(e["message"] for e in stored(api) if not e["message"].startswith(events.COMBINED_PREFIX))
    combined = {e["message"]: e["count"] for e in stored(api) if e["message"].startswith(events.COMBINED_PREFIX)}
    return single, combined


@pytest.mark.parametrize("record", [record_one_by_one, record_batch], ids=["one-by-one", "batch"])
def test_similar_events_combined_then_spam_filtered(api, clock, record):
    """100 creations: 9 Events, then one combined Event counting up to the burst of 25; the rest dropped."""
    rs = api.create(RS)
    record(api, rs, created(100))
    single, combined = summary(api)
    assert single == sorted(created(9))
    assert combined == {events.COMBINED_PREFIX + "Created pod: web-24": 16}
    assert sum(e["count"] for e in stored(api)) == events.SPAM_BURST


def test_batches_across_passes_add_to_the_combined_event(api, clock):
    """Two passes of 6 and 8: 9 single Events and the combined one bumped to count 5 with the latest message."""
    rs = api.create(RS)
    record_batch(api, rs, created(6))
    record_batch(api, rs, created(8, start=6))
    single, combined = summary(api)
    assert single == sorted(created(9))
    assert combined == {events.COMBINED_PREFIX + "Created pod: web-13": 5}


def test_bucket_refills_one_event_per_five_minutes(api, clock):
    """An empty bucket drops; 300 s later one more Event passes, and only one."""
    rs = api.create(RS)
    record_one_by_one(api, rs, ["same"] * 30)
    assert [e["count"] for e in stored(api)] == [25]
    clock.now += events.SPAM_REFILL_SECONDS
    record_one_by_one(api, rs, ["same"] * 3)
    assert [e["count"] for e in stored(api)] == [26]


def test_buckets_are_per_object_and_source(api, clock):
    """Another object, or another component about the same object, has its own burst."""
    rs = api.create(RS)
    other = api.create({**RS, "metadata": {"name": "other"}})
    record_one_by_one(api, rs, ["same"] * 30)
    record_one_by_one(api, other, ["same"] * 30)
    events.record(api, rs, type="Normal", reason="Scaled", message="x", component="deployment-controller")
    counts = sorted((e["involvedObject"]["name"], e["source"]["component"], e["count"]) for e in stored(api))
    assert counts == [("other", "replicaset-controller", 25), ("web", "deployment-controller", 1),
                      ("web", "replicaset-controller", 25)]


def test_aggregation_window_restarts_after_ten_minutes(api, clock):
    """Similar Events more than 10 minutes after the last one start a new set: no combined Event."""
    rs = api.create(RS)
    record_one_by_one(api, rs, created(5))
    clock.now += events.AGGREGATE_WINDOW + 1
    record_one_by_one(api, rs, created(5, start=5))
    single, combined = summary(api)
    assert single == sorted(created(10)) and combined == {}
