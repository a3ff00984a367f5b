"""Tests of the HPA's stabilization and scaling policies (kctl/controllers/podautoscaler/behavior.py)."""

from __future__ import annotations

import pytest

from kctl.controllers.podautoscaler import behavior as bh


def behavior(spec: dict | None, *, window: float = 300) -> bh.Behavior | None:
    return bh.behavior_of({"spec": {"behavior": spec}} if spec is not None else {"spec": {}},
                          downscale_stabilization=window)


def test_defaults_fill_what_the_behavior_leaves_out():
    """Kubernetes' defaults: scaleUp 0 s, Pods 4 and Percent 100 per 15 s, Max; scaleDown the flag's window."""
    assert behavior(None) is None
    got = behavior({}, window=120)
    assert got.scale_up == bh.ScalingRules(0, "Max", (bh.ScalingPolicy("Pods", 4, 15),
                                                      bh.ScalingPolicy("Percent", 100, 15)))
    assert got.scale_down == bh.ScalingRules(120, "Max", (bh.ScalingPolicy("Percent", 100, 15),))
    given = behavior({"scaleDown": {"stabilizationWindowSeconds": 30, "selectPolicy": "Min",
                                    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}})
    assert given.scale_down == bh.ScalingRules(30, "Min", (bh.ScalingPolicy("Pods", 1, 60),))
    assert given.scale_up == bh.DEFAULT_SCALE_UP


@pytest.mark.parametrize("rules,current,ups,downs,expected", [
    (bh.DEFAULT_SCALE_UP, 1, [], [], 5),
    (bh.DEFAULT_SCALE_UP, 10, [], [], 20),
    (bh.ScalingRules(0, "Min", bh.DEFAULT_SCALE_UP.policies), 10, [], [], 14),
    (bh.DEFAULT_SCALE_UP, 5, [(4, 95)], [], 5),
    (bh.DEFAULT_SCALE_UP, 5, [(4, 80)], [], 10),
    (bh.ScalingRules(0, "Disabled", bh.DEFAULT_SCALE_UP.policies), 3, [], [], 3),
    (bh.ScalingRules(0, "Max", (bh.ScalingPolicy("Percent", 50, 60),)), 3, [], [], 5),
], ids=["pods-policy-wins-small", "percent-policy-wins-large", "select-min", "period-started-lower",
        "old-event-outside-period", "disabled", "percent-rounds-up"])
def test_scale_up_limit(rules, current, ups, downs, expected):
    """The most replicas the scale-up policies allow, counting scale events of each policy's period."""
    history = bh.History()
    history.scale_up_events["k"] = [bh.ScaleEvent(change, at) for change, at in ups]
    history.scale_down_events["k"] = [bh.ScaleEvent(change, at) for change, at in downs]
    assert history.scale_up_limit("k", current, rules, 100.0) == expected


@pytest.mark.parametrize("rules,current,downs,expected", [
    (bh.ScalingRules(300, "Max", (bh.ScalingPolicy("Percent", 100, 15),)), 10, [], 0),
    (bh.ScalingRules(300, "Max", (bh.ScalingPolicy("Percent", 50, 15),)), 5, [], 2),
    (bh.ScalingRules(300, "Max", (bh.ScalingPolicy("Pods", 1, 60),)), 5, [(1, 70)], 5),
    (bh.ScalingRules(300, "Min", (bh.ScalingPolicy("Pods", 1, 60), bh.ScalingPolicy("Percent", 50, 60))), 10, [],
     9),
], ids=["percent-100-allows-all", "percent-rounds-down", "pods-per-period-used-up", "select-min-smallest-change"])
def test_scale_down_limit(rules, current, downs, expected):
    """The fewest replicas the scale-down policies allow."""
    history = bh.History()
    history.scale_down_events["k"] = [bh.ScaleEvent(change, at) for change, at in downs]
    assert history.scale_down_limit("k", current, rules, 100.0) == expected


def test_stabilize_without_behavior_keeps_the_window_highest():
    """Behavior-less stabilization: the highest recommendation of the window, the oldest sample reused."""
    history = bh.History()
    history.record_initial("k", 5, 0.0)
    assert history.stabilize("k", 2, 10.0, 300) == 5
    assert history.stabilize("k", 3, 200.0, 300) == 5
    assert history.stabilize("k", 1, 305.0, 300) == 3
    assert len(history.recommendations["k"]) == 3


def test_stabilize_with_behaviors_between_both_windows():
    """With behaviors the count stays between the scale-up window's lowest and the scale-down window's highest."""
    rules = bh.Behavior(bh.ScalingRules(60, "Max", ()), bh.ScalingRules(120, "Max", ()))
    history = bh.History()
    history.record_initial("k", 4, 0.0)
    assert history.stabilize_with_behaviors("k", 4, 8, rules, 30.0)[:2] == (4, "ScaleUpStabilized")
    assert history.stabilize_with_behaviors("k", 4, 2, rules, 90.0)[:2] == (4, "ScaleDownStabilized")
    assert history.stabilize_with_behaviors("k", 4, 8, rules, 100.0)[0] == 4  # 2 at t=90 is within scale-up's 60 s
    assert history.stabilize_with_behaviors("k", 4, 8, rules, 200.0)[0] == 8


@pytest.mark.parametrize("current,desired,minimum,maximum,expected,limited,reason", [
    (2, 3, 1, 10, 3, False, "DesiredWithinRange"),
    (2, 9, 1, 10, 4, True, "ScaleUpLimit"),
    (2, 9, 1, 3, 3, True, "TooManyReplicas"),
    (2, 0, 1, 10, 1, True, "TooFewReplicas"),
], ids=["within", "scale-up-limit", "too-many", "too-few"])
def test_normalize_without_behavior(current, desired, minimum, maximum, expected, limited, reason):
    """convertDesiredReplicasWithRules: min, max and the max(2 x current, 4) rate, with Kubernetes' reasons."""
    got = bh.normalize(bh.History(), "k", current=current, desired=desired, min_replicas=minimum,
                       max_replicas=maximum, behavior=None, downscale_stabilization=0, now=1.0)
    assert (got.replicas, got.limited, got.limited_reason) == (expected, limited, reason)


def test_store_scale_event_reuses_outdated_entries():
    """Scale events older than the longest policy period are overwritten, not accumulated."""
    rules = bh.behavior_of({"spec": {"behavior": {}}}, downscale_stabilization=0)
    history = bh.History()
    history.store_scale_event("k", rules, 1, 5, 0.0)
    history.store_scale_event("k", rules, 5, 10, 10.0)
    history.store_scale_event("k", rules, 10, 12, 100.0)
    assert [(e.change, e.at) for e in history.scale_up_events["k"]] == [(4, 0.0), (2, 100.0)]
    history.store_scale_event("k", None, 12, 1, 101.0)
    assert "k" not in history.scale_down_events
