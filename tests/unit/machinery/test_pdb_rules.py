"""kctl.machinery.disruption: a budget's selector, intstr scaling and the DisruptionAllowed condition, as Kubernetes."""

from __future__ import annotations

import pytest

from kctl.machinery import disruption


def _pdb(selector: dict | None, namespace: str = "default") -> dict:
    spec = {} if selector is None else {"selector": selector}
    return {"metadata": {"name": "b", "namespace": namespace}, "spec": spec}


POD = {"metadata": {"name": "p", "namespace": "default", "labels": {"app": "web", "tier": "fe"}}}


@pytest.mark.parametrize("pdb, selected", [
    (_pdb({"matchLabels": {"app": "web"}}), True),
    (_pdb({"matchLabels": {"app": "db"}}), False),
    (_pdb({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe", "be"]}]}), True),
    (_pdb({}), True),                                          # policy/v1: an empty selector selects every pod
    (_pdb(None), False),                                       # no selector: none
    (_pdb({"matchLabels": {"app": "web"}}, "other"), False),   # another namespace
    (_pdb({"matchExpressions": [{"key": "tier", "operator": "Bogus"}]}), False),  # invalid: none
])
def test_selects(pdb, selected):
    """A budget covers the pods of its namespace its selector matches."""
    assert disruption.selects(pdb, POD) is selected


@pytest.mark.parametrize("value, total, expected", [(2, 10, 2), ("50%", 3, 2), ("34%", 3, 2), ("0%", 5, 0),
                                                     ("100%", 4, 4)])
def test_scaled_value_rounds_percentages_up(value, total, expected):
    """An int is itself; N% of total is rounded up (GetScaledValueFromIntOrPercent with roundUp)."""
    assert disruption.scaled_value(value, total) == expected


@pytest.mark.parametrize("value", ["two", "50", True, None, 1.5])
def test_scaled_value_refuses_what_is_not_an_int_or_percentage(value):
    """Anything else is a ValueError (the controller's sync then fails safe)."""
    with pytest.raises(ValueError):
        disruption.scaled_value(value, 10)


def test_condition_follows_disruptions_allowed_and_keeps_its_transition_time():
    """True/SufficientPods when > 0, else False/InsufficientPods; lastTransitionTime moves only with the status."""
    status = {"disruptionsAllowed": 1, "observedGeneration": 3}
    disruption.set_disruption_allowed(status, now="2026-12-04T10:00:00Z")
    assert status["conditions"] == [{"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods",
                                     "message": "", "observedGeneration": 3,
                                     "lastTransitionTime": "2026-12-04T10:00:00Z"}]
    assert disruption.conditions_up_to_date(status)
    disruption.set_disruption_allowed(status, now="2026-12-04T11:00:00Z")
    assert status["conditions"][0]["lastTransitionTime"] == "2026-12-04T10:00:00Z"
    status["disruptionsAllowed"] = 0
    assert not disruption.conditions_up_to_date(status)
    disruption.set_disruption_allowed(status, now="2026-12-04T12:00:00Z")
    assert [(c["status"], c["reason"], c["lastTransitionTime"]) for c in status["conditions"]] == \
        [("False", "InsufficientPods", "2026-12-04T12:00:00Z")]
    assert disruption.conditions_up_to_date(status)


@pytest.mark.parametrize("conditions, ready", [
    ([{"type": "Ready", "status": "True"}], True),
    ([{"type": "Ready", "status": "False"}], False),
    ([{"type": "ContainersReady", "status": "True"}], False),
    ([], False),
])
def test_pod_ready(conditions, ready):
    """Healthy is the Ready condition True (podutil.IsPodReady)."""
    assert disruption.pod_ready({"status": {"conditions": conditions}}) is ready
