"""The framework's shared pieces: the FailedScheduling message, score normalizing, how many
nodes to look at, extension-point runners (Skip, errors, Permit, batched Bind)."""

from __future__ import annotations

import threading

import pytest
from scheduler_harness import pod

from kctl.scheduler.framework import (SKIP, Code, CycleState, Diagnosis, Framework, Handle, PluginRef, Status,
                                      default_normalize_score, fit_error_message, unschedulable)
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo
from kctl.scheduler.scheduler import num_feasible_nodes_to_find, preemption_message

TAINT = "node(s) had untolerated taint {k: v}"


@pytest.mark.parametrize("num, statuses, pre, post, expected", [
    (3, {"a": ["Insufficient memory"], "b": ["Insufficient memory"], "c": [TAINT]}, "", "",
     "0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient memory."),
    (2, {"a": ["Insufficient cpu", "Insufficient memory"], "b": ["Insufficient cpu"]}, "", "",
     "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu."),
    (5, {"a": ["node(s) didn't match Pod's node affinity/selector"]}, "", "",
     "0/5 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."),
    (4, {}, "node(s) didn't satisfy plugin(s) [NodeAffinity]", "",
     "0/4 nodes are available: node(s) didn't satisfy plugin(s) [NodeAffinity]."),
    (1, {"a": ["Too many pods"]}, "", "preemption: 0/1 nodes are available: 1 No preemption victims found "
     "for incoming pod",
     "0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 No preemption "
     "victims found for incoming pod."),
    (0, {}, "no nodes available to schedule pods", "", "0/0 nodes are available: no nodes available to "
     "schedule pods."),
], ids=["issue-example", "two-reasons-one-node", "affinity", "prefilter", "with-postfilter", "no-nodes"])
def test_fit_error_message(num, statuses, pre, post, expected):
    """Each node's reasons counted, "N reason" sorted as strings, as kube-scheduler's FitError prints."""
    diagnosis = Diagnosis({n: Status(Code.UNSCHEDULABLE, tuple(r)) for n, r in statuses.items()},
                          pre_filter_msg=pre, post_filter_msg=post)
    assert fit_error_message(num, diagnosis) == expected


def test_preemption_message_counts_hopeless_nodes():
    """Nodes rejected as unresolvable are "not helpful" for preemption; the others get the plugin's reason."""
    diagnosis = Diagnosis({"a": unschedulable(TAINT, unresolvable=True), "b": unschedulable("Insufficient cpu"),
                           "c": unschedulable("Insufficient cpu")})
    status = unschedulable("No preemption victims found for incoming pod.")
    assert preemption_message(3, diagnosis, status) == (
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod")


@pytest.mark.parametrize("scores, reverse, expected", [
    ([0, 5, 10], False, [0, 50, 100]),
    ([0, 5, 10], True, [100, 50, 0]),
    ([0, 0], False, [0, 0]),
    ([0, 0], True, [100, 100]),
    ([3, 1], False, [100, 33]),
], ids=["scale", "reverse", "all-zero", "all-zero-reverse", "floor"])
def test_default_normalize_score(scores, reverse, expected):
    """Scores scale to 0..100 by the highest (reversed: the highest raw score gets 0)."""
    default_normalize_score(scores, reverse=reverse)
    assert scores == expected


@pytest.mark.parametrize("percentage, nodes, expected", [
    (None, 50, 50), (None, 100, 100), (None, 1000, 420), (None, 5000, 500), (None, 6000, 300),
    (None, 20000, 1000), (30, 1000, 300), (100, 1000, 1000), (1, 1000, 100),
], ids=["small", "100", "1000", "5000", "floor-5pct", "20000", "configured", "all", "at-least-100"])
def test_num_feasible_nodes_to_find(percentage, nodes, expected):
    """kube-scheduler's adaptive percentage: 50 - nodes/125 %, at least 5%, at least 100 nodes."""
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


# -- runners -------------------------------------------------------------------------------

class Recorder:
    """A plugin at many points that records calls and answers as told."""

    def __init__(self, name: str, *, pre_filter=None, filter_=None, permit=None, bind=None) -> None:
        self.NAME = name
        self.calls: list[str] = []
        self._pre_filter, self._filter, self._permit, self._bind = pre_filter, filter_, permit, bind

    def pre_filter(self, state, pod, snapshot):
        self.calls.append("pre_filter")
        return None, self._pre_filter

    def filter(self, state, pod, node):
        self.calls.append("filter")
        if isinstance(self._filter, Exception):
            raise self._filter
        return self._filter

    def reserve(self, state, pod, node_name):
        self.calls.append("reserve")

    def unreserve(self, state, pod, node_name):
        self.calls.append("unreserve")

    def permit(self, state, pod, node_name):
        self.calls.append("permit")
        return self._permit, 60.0

    def bind(self, state, pod, node_name):
        self.calls.append("bind")
        return self._bind


def framework(*plugins: Recorder, points: tuple[str, ...] = ("preFilter", "filter", "reserve", "permit", "bind")):
    enabled = {p: [PluginRef(x.NAME) for x in plugins] for p in points}
    return Framework("test", {p.NAME: p for p in plugins}, enabled, handle=Handle())


def test_prefilter_skip_leaves_filter_out():
    """A PreFilter answering Skip keeps that plugin's Filter from running this cycle."""
    a, b = Recorder("A", pre_filter=SKIP), Recorder("B")
    fwk = framework(a, b)
    state = CycleState()
    assert fwk.run_pre_filter(state, PodInfo(pod("p")), None) == (None, None)
    assert [name for name, _ in fwk.active_filters(state)] == ["B"]


def test_filter_exception_becomes_error_status():
    """A plugin that raises is reported as an Error status naming it, not an exception."""
    fwk = framework(Recorder("A", filter_=RuntimeError("boom")))
    status = fwk.run_filter(CycleState(), PodInfo(pod("p")), NodeInfo(name="n"))
    assert status.code is Code.ERROR and status.plugin == "A" and "boom" in status.message()


def test_permit_wait_then_allow():
    """Permit Wait parks the pod until the plugin allows it."""
    fwk = framework(Recorder("Gate", permit=Status(Code.WAIT)))
    pi = PodInfo(pod("p", uid="u1"))
    assert fwk.run_permit(CycleState(), pi, "n").code is Code.WAIT
    result = []
    t = threading.Thread(target=lambda: result.append(fwk.wait_on_permit(pi)))
    t.start()
    fwk.get_waiting_pod("u1").allow("Gate")
    t.join(30)
    assert result == [None] and fwk.get_waiting_pod("u1") is None


def test_permit_wait_then_reject():
    """A rejected waiting pod gets an Unschedulable status naming the plugin."""
    fwk = framework(Recorder("Gate", permit=Status(Code.WAIT)))
    pi = PodInfo(pod("p", uid="u2"))
    fwk.run_permit(CycleState(), pi, "n")
    fwk.get_waiting_pod("u2").reject("Gate", "not now")
    status = fwk.wait_on_permit(pi)
    assert status.code is Code.UNSCHEDULABLE and status.reasons == ("not now",) and status.plugin == "Gate"


def test_bind_skip_goes_to_next_binder():
    """A bind plugin answering Skip leaves the pod to the next one."""
    first, second = Recorder("First", bind=SKIP), Recorder("Second")
    fwk = framework(first, second)
    results = fwk.run_bind_all([(CycleState(), PodInfo(pod("p")), "n")])
    assert results == [None] and first.calls == ["bind"] and second.calls == ["bind"]
