"""TaintToleration: NoSchedule/NoExecute taints must be tolerated; PreferNoSchedule scores."""

from __future__ import annotations

import pytest
from plugin_harness import handle_for, make_node, make_pod, reasons, run_filter, run_score, snapshot_of

from kctl.scheduler.framework import Code, CycleState
from kctl.scheduler.nodeinfo import PodInfo
from kctl.scheduler.plugins.taint_toleration import TaintToleration

GPU = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
DRAIN = {"key": "drain", "value": "", "effect": "NoExecute"}
SOFT = {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}

FILTER_CASES = [
    ("no-taints", [], [], ()),
    ("untolerated-noschedule", [GPU], [], ("node(s) had untolerated taint {gpu: true}",)),
    ("untolerated-noexecute", [DRAIN], [], ("node(s) had untolerated taint {drain: }",)),
    ("equal-toleration", [GPU], [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}], ()),
    ("equal-wrong-value", [GPU], [{"key": "gpu", "operator": "Equal", "value": "false"}],
     ("node(s) had untolerated taint {gpu: true}",)),
    ("exists-any-effect", [GPU], [{"key": "gpu", "operator": "Exists"}], ()),
    ("exists-wrong-effect", [GPU], [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}],
     ("node(s) had untolerated taint {gpu: true}",)),
    ("empty-key-exists-tolerates-all", [GPU, DRAIN], [{"operator": "Exists"}], ()),
    ("prefer-no-schedule-does-not-filter", [SOFT], [], ()),
]


@pytest.mark.parametrize("taints,tolerations,expected", [c[1:] for c in FILTER_CASES],
                         ids=[c[0] for c in FILTER_CASES])
def test_filter(taints, tolerations, expected):
    """Each NoSchedule/NoExecute taint needs a matching toleration; the reason names it."""
    snapshot = snapshot_of([make_node("n", taints=taints), make_node("clean")])
    assert reasons(run_filter(TaintToleration(), make_pod("p", tolerations=tolerations), snapshot, "n")) == expected


SCORE_CASES = [
    ("fewer-soft-taints-win", [], {"clean": 100, "one": 50, "two": 0}),
    ("tolerated-soft-taint", [{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}],
     {"clean": 100, "one": 100, "two": 0}),
]


@pytest.mark.parametrize("tolerations,expected", [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES])
def test_score(tolerations, expected):
    """Untolerated PreferNoSchedule taints lower the score, normalized so the best is 100."""
    other = {"key": "cheap", "value": "", "effect": "PreferNoSchedule"}
    snapshot = snapshot_of([make_node("clean"), make_node("one", taints=[SOFT]),
                            make_node("two", taints=[other, {**other, "key": "old"}])])
    assert run_score(TaintToleration(), make_pod("p", tolerations=tolerations), snapshot) == expected


class _Unscanned(list):
    """A node list that fails the test if PreScore iterates over it."""

    def __iter__(self):
        raise AssertionError("PreScore scanned every node's taints")


@pytest.mark.parametrize("taints, with_handle, skipped", [
    ([], True, True),
    ([GPU], True, True),
    ([SOFT], True, False),
    ([SOFT], False, False),
    ([], False, True),
], ids=["no-taints", "only-noschedule", "prefer-no-schedule", "no-handle-soft", "no-handle-clean"])
def test_pre_score_skips_from_the_snapshots_count(taints, with_handle, skipped):
    """With a handle, PreScore skips on the snapshot's count of PreferNoSchedule nodes, not a scan per pod."""
    snapshot = snapshot_of([make_node("n", taints=taints), make_node("clean")])
    plugin = TaintToleration(handle=handle_for(snapshot) if with_handle else None)
    nodes = list(snapshot.node_info_list)
    if with_handle and not any(t["effect"] == "PreferNoSchedule" for t in taints):
        nodes = _Unscanned(nodes)
    status = plugin.pre_score(CycleState(), PodInfo(make_pod("p")), nodes)
    assert (status is not None and status.code is Code.SKIP) == skipped
