"""The daemon's one name -> factory table of controllers and its `--controllers` list (kctl.daemon.controllers)."""

from __future__ import annotations

import dataclasses

import pytest

from kctl.daemon.controllers import (CONTROLLER_NAMES, CONTROLLERS, UnknownController, enabled_controllers,
                                     new_controllers)
from kctl.daemon.settings import DaemonSettings

ALL = CONTROLLER_NAMES


@pytest.mark.parametrize("spec, expected", [
    ("*", ALL),
    ("*,-garbagecollector", tuple(n for n in ALL if n != "garbagecollector")),
    ("*,-garbagecollector,-podgc", tuple(n for n in ALL if n not in ("garbagecollector", "podgc"))),
    ("-podgc,*", tuple(n for n in ALL if n != "podgc")),
    ("replicaset,deployment", ("replicaset", "deployment")),
    ("deployment,replicaset", ("replicaset", "deployment")),
    ("replicaset", ("replicaset",)),
    ("replicaset,-replicaset", ("replicaset",)),
    ("-replicaset,replicaset,*", tuple(n for n in ALL if n != "replicaset")),
    ("-replicaset", ()),
    ("", ()),
    (" * , -podgc ,", tuple(n for n in ALL if n != "podgc")),
    (["replicaset", "job"], ("replicaset", "job")),
], ids=["star", "star-minus-gc", "star-minus-two", "disable-before-star", "two-names", "table-order",
        "one-name", "first-entry-decides", "first-disable-decides", "disable-only", "empty",
        "spaces-and-trailing-comma", "entries-as-a-list"])
def test_enabled_controllers(spec, expected):
    """kube-controller-manager's rules: `*` all, `name` on, `-name` off, the first entry naming one decides."""
    assert enabled_controllers(spec) == expected


@pytest.mark.parametrize("spec, named", [
    ("gc", ['"gc"']),
    ("*,-gc", ['"-gc"']),
    ("replicaset,bogus,-nope", ['"bogus"', '"-nope"']),
    ("-*", ['"-*"']),
    ("ReplicaSet", ['"ReplicaSet"']),
], ids=["unknown", "unknown-disabled", "two-unknown", "minus-star", "kind-not-name"])
def test_unknown_controllers_are_one_clear_error(spec, named):
    """An entry that names no controller is refused, naming it and listing every known name."""
    with pytest.raises(UnknownController) as info:
        enabled_controllers(spec)
    message = str(info.value)
    assert "\n" not in message
    for entry in named:
        assert entry in message
    assert all(name in message for name in CONTROLLERS)


@pytest.mark.parametrize("name", list(CONTROLLERS), ids=list(CONTROLLERS))
def test_each_factory_makes_the_controller_it_is_named_for(name):
    """Every table entry makes a fresh controller whose name is its key (the manager's queue name)."""
    first, second = CONTROLLERS[name](DaemonSettings()), CONTROLLERS[name](DaemonSettings())
    assert first.name == name
    assert first is not second


def test_new_controllers_carry_the_settings():
    """The daemon's settings reach the event TTL, node lifecycle and taint manager controllers."""
    settings = DaemonSettings(event_ttl=60, node_monitor_grace_period=12, default_toleration_seconds=7)
    made = {c.name: c for c in new_controllers(settings)}
    assert tuple(made) == ALL
    assert made["eventttl"].settings.ttl_seconds == 60
    assert made["nodelifecycle"].settings.grace_period == 12
    assert made["taintmanager"].settings.default_toleration_seconds == 7


def test_new_controllers_makes_only_the_chosen_in_table_order():
    """Only the controllers the settings name are made, in the table's order."""
    made = new_controllers(DaemonSettings(controllers=("deployment", "replicaset")))
    assert [c.name for c in made] == ["replicaset", "deployment"]


def test_new_controllers_refuses_an_unknown_name():
    """Settings built in code with a name the table lacks fail loudly, not silently run less."""
    with pytest.raises(UnknownController, match='"gc"'):
        new_controllers(DaemonSettings(controllers=("replicaset", "gc")))


def test_settings_are_frozen_and_default_to_every_controller():
    """DaemonSettings cannot change once built; without flags every controller runs."""
    settings = DaemonSettings()
    assert settings.controllers == ALL and settings.control_plane and settings.agents
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.workers = 9  # type: ignore[misc]
