"""The one `tolerates` (kctl.client.tolerations) that the scheduler and the controllers share."""

from __future__ import annotations

import pytest

from kctl.client.tolerations import tolerates

NO_SCHEDULE_KV = {"key": "k", "value": "v", "effect": "NoSchedule"}


@pytest.mark.parametrize("toleration, taint, expected", [
    ({"key": "k", "value": "v", "effect": "NoSchedule"}, NO_SCHEDULE_KV, True),
    ({"key": "k", "value": "v"}, NO_SCHEDULE_KV, True),
    ({"key": "k", "operator": "Equal", "value": "v"}, NO_SCHEDULE_KV, True),
    ({"key": "k", "value": "w", "effect": "NoSchedule"}, NO_SCHEDULE_KV, False),
    ({"key": "k"}, {"key": "k", "effect": "NoSchedule"}, True),
    ({"key": "k", "operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True),
    ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, {"key": "k", "effect": "NoExecute"}, False),
    ({"operator": "Exists"}, {"key": "x", "effect": "NoExecute"}, True),
    ({"operator": "Exists", "effect": "NoExecute"}, {"key": "x", "effect": "NoSchedule"}, False),
    ({"key": "j", "operator": "Exists"}, {"key": "k", "effect": "NoExecute"}, False),
    ({"operator": "Equal", "value": "v"}, NO_SCHEDULE_KV, False),
    ({"value": ""}, {"key": "", "effect": "NoSchedule"}, False),
    ({"key": "k", "operator": "Lt", "value": "v"}, NO_SCHEDULE_KV, False),
    ({"operator": "Lt"}, {"effect": "NoSchedule"}, False),
], ids=["equal", "operator-defaults-to-equal", "equal-explicit", "value-differs", "empty-values-equal", "exists",
        "effect-differs", "empty-key-exists-tolerates-all", "empty-key-exists-other-effect", "key-differs",
        "empty-key-equal-tolerates-nothing", "empty-key-empty-value", "unknown-operator", "unknown-operator-empty-key"])
def test_tolerates(toleration, taint, expected):
    """A toleration matches a taint as v1 Toleration.ToleratesTaint does (an unknown operator matches nothing)."""
    assert tolerates(toleration, taint) is expected


@pytest.mark.parametrize("module, name", [
    ("kctl.controllers.daemonset", "tolerates"),
    ("kctl.controllers.taintmanager", "tolerates"),
    ("kctl.scheduler.plugins.taint_toleration", "tolerates"),
    ("kctl.scheduler.plugins.node_unschedulable", "tolerates"),
], ids=["daemonset", "taintmanager", "taint-toleration", "node-unschedulable"])
def test_every_reader_uses_the_one_definition(module, name):
    """The scheduler plugins and the controllers use kctl.client.tolerations' function, not a copy."""
    import importlib

    assert getattr(importlib.import_module(module), name) is tolerates
