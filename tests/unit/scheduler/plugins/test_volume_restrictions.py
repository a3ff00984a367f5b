"""VolumeRestrictions: a ReadWriteOncePod claim in use by one pod keeps every other pod out."""

from __future__ import annotations

import pytest
from plugin_harness import make_node, reasons, run_filter, snapshot_of
from storage_objects import claim, pod_with_claims

from kctl.scheduler.framework import Code, Handle
from kctl.scheduler.plugins.volume_restrictions import RWOP_CONFLICT, VolumeRestrictions
from kctl.scheduler.volumelisters import ObjectListers

RWOP = ("ReadWriteOncePod",)

CASES = [
    # (id, claims, placed pods, pod, expected reasons)
    ("no-claims", [], [], pod_with_claims("p"), ()),
    ("rwop-unused", [claim("data", access=RWOP)], [], pod_with_claims("p", "data"), ()),
    ("rwop-used-elsewhere", [claim("data", access=RWOP)], [pod_with_claims("q", "data", node_name="n2")],
     pod_with_claims("p", "data"), (RWOP_CONFLICT,)),
    ("rwop-used-here", [claim("data", access=RWOP)], [pod_with_claims("q", "data", node_name="n1")],
     pod_with_claims("p", "data"), (RWOP_CONFLICT,)),
    ("rwo-shared", [claim("data")], [pod_with_claims("q", "data", node_name="n2")], pod_with_claims("p", "data"),
     ()),
    ("same-name-other-namespace", [claim("data", access=RWOP)],
     [pod_with_claims("q", "data", node_name="n2", namespace="other")], pod_with_claims("p", "data"), ()),
    ("missing-claim-left-to-volume-binding", [], [pod_with_claims("q", "data", node_name="n2")],
     pod_with_claims("p", "data"), ()),
]


@pytest.mark.parametrize("claims,placed,pod,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter(claims, placed, pod, expected):
    """A ReadWriteOncePod claim used by another pod (anywhere, same namespace) rejects the pod on every node."""
    plugin = VolumeRestrictions({}, Handle(), listers=ObjectListers(claims))
    assert reasons(run_filter(plugin, pod, snapshot_of([make_node("n1"), make_node("n2")], placed), "n1")) == expected


def test_conflict_is_resolvable_by_preemption():
    """The conflict is Unschedulable (not unresolvable): evicting the user could help."""
    plugin = VolumeRestrictions({}, Handle(), listers=ObjectListers([claim("data", access=RWOP)]))
    snapshot = snapshot_of([make_node("n1")], [pod_with_claims("q", "data", node_name="n1")])
    status = run_filter(plugin, pod_with_claims("p", "data"), snapshot, "n1")
    assert status is not None and status.code is Code.UNSCHEDULABLE
