"""kube-scheduler's scheduling framework: extension points, Status, CycleState, Framework.

A plugin is one small class with a NAME that implements only the extension points it
needs (the Protocols below, kube's framework/interface.go). A Framework is built from
one scheduler profile (kctl.scheduler.config.Profile) by instantiating the enabled
plugins from the registry (kctl.scheduler.plugins.registry); the scheduling loop
(kctl.scheduler.scheduler) runs it for each pod:

    scheduling cycle:  PreFilter -> Filter (per node) -> PostFilter (when none fit)
                       -> PreScore -> Score (+ NormalizeScore, x weight) -> Reserve -> Permit
    binding cycle:     WaitOnPermit -> PreBind -> Bind -> PostBind   (off the loop thread)

Plugins return a Status with reasons a person can read, or None for success (Go's nil
*Status); they do not raise, and an exception from one becomes an Error status. The
reasons of every node's Filter status are what the FailedScheduling message counts
("0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient
memory."), built by FitError.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from dataclasses import dataclass, field
from itertools import repeat
from operator import add, mul
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, Snapshot

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.client.informer import InformerFactory

log = logging.getLogger("kctl.scheduler")

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
#: Permit may hold a pod at most this long (kube's maxTimeout)
MAX_PERMIT_TIMEOUT = 15 * 60.0


class Code(enum.IntEnum):
    """What a plugin's Status says (kube's framework.Code)."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's answer: a code and the reasons a person can read."""

    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_rejected(self) -> bool:
        """Unschedulable or UnschedulableAndUnresolvable: the pod cannot go there now."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin)


def unschedulable(*reasons: str, unresolvable: bool = False) -> Status:
    """An Unschedulable status (UnschedulableAndUnresolvable: preemption cannot help)."""
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE, reasons)


def error(reason: str) -> Status:
    return Status(Code.ERROR, (reason,))


SUCCESS = Status(Code.SUCCESS)
SKIP = Status(Code.SKIP)
WAIT = Status(Code.WAIT)


def is_ok(status: Status | None) -> bool:
    return status is None or status.code is Code.SUCCESS


class CycleState:
    """Data plugins share during one pod's scheduling and binding cycles (kube's CycleState).

    Keys are by convention "PluginName/what"; `skip_filter` and `skip_score` hold the
    plugins whose PreFilter/PreScore returned Skip, whose Filter/Score then do not run.
    """

    __slots__ = ("_data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def read(self, key: str) -> Any:
        return self._data.get(key)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        c = CycleState()
        c._data = dict(self._data)
        c.skip_filter, c.skip_score = set(self.skip_filter), set(self.skip_score)
        return c


@dataclass(frozen=True)
class PreFilterResult:
    """A PreFilter's narrowing of the nodes to try (None: all of them)."""

    node_names: frozenset[str] | None = None
    #: the plugins that narrowed it (for the message of the nodes left out)
    plugins: tuple[str, ...] = ()

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names, self.plugins + other.plugins)


def default_normalize_score(scores: list[int], *, reverse: bool = False, max_score: int = MAX_NODE_SCORE) -> None:
    """Scale scores to 0..max_score by the highest (kube's helper.DefaultNormalizeScore), in place.

    reverse: a high raw score is bad (counts of untolerated taints).
    """
    top = max(scores, default=0)
    if top == 0:
        if reverse:
            scores[:] = [max_score] * len(scores)
        return
    if reverse:
        scores[:] = [max_score - max_score * s // top for s in scores]
    else:
        scores[:] = [max_score * s // top for s in scores]


# -- cluster events (what makes an unschedulable pod worth trying again) -----------------

class ClusterEvent(str, enum.Enum):
    """A change in the cluster that may make an unschedulable pod schedulable (kube's ClusterEvent)."""

    NODE_ADD = "NodeAdd"
    NODE_DELETE = "NodeDelete"
    NODE_ALLOCATABLE_CHANGE = "NodeAllocatableChange"
    NODE_LABEL_CHANGE = "NodeLabelChange"
    NODE_TAINT_CHANGE = "NodeTaintChange"
    NODE_CONDITION_CHANGE = "NodeConditionChange"
    ASSIGNED_POD_ADD = "AssignedPodAdd"
    ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
    ASSIGNED_POD_DELETE = "AssignedPodDelete"
    #: five minutes in the unschedulable queue (kube's UnschedulableTimeout)
    UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
    #: a failed binding or an internal error: retried on any event
    FORCE_ACTIVATE = "ForceActivate"
    #: storage objects the volume plugins read (kctl.scheduler.plugins.volume_binding)
    PVC_ADD = "PersistentVolumeClaimAdd"
    PVC_UPDATE = "PersistentVolumeClaimUpdate"
    PV_ADD = "PersistentVolumeAdd"
    PV_UPDATE = "PersistentVolumeUpdate"
    STORAGE_CLASS_ADD = "StorageClassAdd"
    STORAGE_CLASS_UPDATE = "StorageClassUpdate"


ALL_EVENTS: frozenset[ClusterEvent] = frozenset(ClusterEvent)


# -- the extension points ------------------------------------------------------------

@runtime_checkable
class Plugin(Protocol):
    NAME: str


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(self, state: CycleState, pod: PodInfo,
                    node_to_status: dict[str, Status]) -> tuple[str | None, Status | None]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """score returns 0..100 (or any int when normalize_score scales it afterwards)."""

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int: ...


@runtime_checkable
class ScoreExtensions(Protocol):
    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    """permit returns (status, timeout seconds); Wait holds the pod until allowed or timed out."""

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]: ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    """bind returns Skip to let the next bind plugin do it."""

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...


@runtime_checkable
class BatchBindPlugin(BindPlugin, Protocol):
    """A binder that can bind many pods at once (one store transaction)."""

    def bind_all(self, items: list[tuple[CycleState, PodInfo, str]]) -> list[Status | None]: ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


EXTENSION_POINTS = ("preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit",
                    "preBind", "bind", "postBind")
_PROTOCOL = {"preFilter": PreFilterPlugin, "filter": FilterPlugin, "postFilter": PostFilterPlugin,
             "preScore": PreScorePlugin, "score": ScorePlugin, "reserve": ReservePlugin,
             "permit": PermitPlugin, "preBind": PreBindPlugin, "bind": BindPlugin, "postBind": PostBindPlugin}
_METHOD = {"preFilter": "pre_filter", "filter": "filter", "postFilter": "post_filter", "preScore": "pre_score",
           "score": "score", "reserve": "reserve", "permit": "permit", "preBind": "pre_bind", "bind": "bind",
           "postBind": "post_bind"}


def implements(plugin: object, point: str) -> bool:
    """Whether a plugin object has the method of an extension point ("filter", "score", ...)."""
    return callable(getattr(plugin, _METHOD[point], None))


# -- what plugins get from the scheduler ---------------------------------------------

class Handle:
    """What a plugin may use besides its arguments (kube's framework.Handle).

    `snapshot` is the current cycle's snapshot; `framework` the profile's Framework (set
    once built; preemption runs its filters); `api` the API server (None in unit tests);
    `informers` the scheduler's InformerFactory (the volume plugins' listers), or None.
    """

    def __init__(self, *, api: API | None = None, snapshot: Snapshot | None = None,
                 clock: Callable[[], float] = time.monotonic, informers: InformerFactory | None = None) -> None:
        self.api = api
        self.informers = informers
        self.snapshot = snapshot if snapshot is not None else Snapshot()  # an empty one is falsy
        self.clock = clock
        self.framework: Framework | None = None
        #: uid -> node name: pods nominated to a node by preemption (kube's PodNominator)
        self.nominated: dict[str, tuple[PodInfo, str]] = {}
        self.lock = threading.Lock()


PluginFactory = Callable[[dict, Handle], Plugin]


@dataclass(frozen=True)
class PluginRef:
    """A plugin enabled at an extension point, with its score weight."""

    name: str
    weight: int = 1


# -- the failure message ----------------------------------------------------------------

@dataclass
class Diagnosis:
    """Why a pod fits nowhere: each node's status, and which plugins said no."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""


class FitError(Exception):
    """No node fits the pod; str() is kube-scheduler's FailedScheduling message."""

    def __init__(self, pod: PodInfo, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        return fit_error_message(self.num_all_nodes, self.diagnosis)


def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis) -> str:
    """"0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient memory."

    Each node's reasons are counted; the "N reason" strings are sorted as strings, as
    kube-scheduler's FitError.Error sorts them; PreFilter's and PostFilter's messages
    follow as their own sentences.
    """
    text = f"0/{num_all_nodes} nodes are available:"
    if diagnosis.pre_filter_msg:
        text += f" {diagnosis.pre_filter_msg}."
    else:
        counts: dict[str, int] = {}
        for status in diagnosis.node_to_status.values():
            for reason in status.reasons:
                counts[reason] = counts.get(reason, 0) + 1
        if counts:
            text += " " + ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items())) + "."
    if diagnosis.post_filter_msg:
        text += f" {diagnosis.post_filter_msg}."
    return text


# -- Permit's waiting pods ---------------------------------------------------------------

class WaitingPod:
    """A pod a Permit plugin holds (kube's waitingPod): allowed by every waiting plugin, or rejected."""

    def __init__(self, pod: PodInfo, pending: dict[str, float], clock: Callable[[], float]) -> None:
        self.pod = pod
        self._pending = {name: clock() + min(timeout, MAX_PERMIT_TIMEOUT) for name, timeout in pending.items()}
        self._cond = threading.Condition()
        self._result: Status | None = None
        self._clock = clock

    def allow(self, plugin: str) -> None:
        with self._cond:
            self._pending.pop(plugin, None)
            if not self._pending and self._result is None:
                self._result = SUCCESS
            self._cond.notify_all()

    def reject(self, plugin: str, reason: str) -> None:
        with self._cond:
            if self._result is None:
                self._result = Status(Code.UNSCHEDULABLE, (reason,), plugin)
            self._cond.notify_all()

    def wait(self) -> Status:
        """Block until allowed, rejected, or the earliest plugin timeout passes."""
        with self._cond:
            while self._result is None:
                deadline = min(self._pending.values())
                left = deadline - self._clock()
                if left <= 0:
                    plugin = min(self._pending, key=self._pending.__getitem__)
                    self._result = Status(Code.UNSCHEDULABLE, (f"rejected due to timeout after waiting at permit "
                                                               f"by plugin {plugin}",), plugin)
                    break
                self._cond.wait(left)
            return self._result


# -- the framework ---------------------------------------------------------------------

class Framework:
    """The plugins of one profile, per extension point, and the runners of each point."""

    def __init__(self, profile_name: str, plugins: dict[str, Plugin], enabled: dict[str, list[PluginRef]], *,
                 handle: Handle, percentage_of_nodes_to_score: int | None = None) -> None:
        self.profile_name = profile_name
        self.plugins = plugins
        self.handle = handle
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.weights: dict[str, int] = {}
        self.points: dict[str, list[Plugin]] = {}
        for point in EXTENSION_POINTS:
            chosen = []
            for ref in enabled.get(point, ()):
                plugin = plugins[ref.name]
                if not implements(plugin, point):
                    raise ValueError(f'plugin "{ref.name}" does not implement extension point {point}')
                chosen.append(plugin)
                if point == "score":
                    self.weights[plugin.NAME] = ref.weight
            self.points[point] = chosen
        self.waiting: dict[str, WaitingPod] = {}
        self._waiting_lock = threading.Lock()
        handle.framework = self

    def has(self, point: str) -> bool:
        return bool(self.points[point])

    def plugin_names(self, point: str) -> list[str]:
        return [p.NAME for p in self.points[point]]

    # scheduling cycle ----------------------------------------------------------------

    def run_pre_filter(self, state: CycleState, pod: PodInfo,
                       snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        """Every PreFilter; a rejection ends the cycle (its plugin named on the status)."""
        result: PreFilterResult | None = None
        for p in self.points["preFilter"]:
            try:
                r, status = p.pre_filter(state, pod, snapshot)
            except Exception as exc:
                log.exception("PreFilter plugin %s failed", p.NAME)
                return None, Status(Code.ERROR, (f"running PreFilter plugin {p.NAME}: {exc}",), p.NAME)
            if status is not None and status.code is Code.SKIP:
                state.skip_filter.add(p.NAME)
                continue
            if not is_ok(status):
                return None, status.with_plugin(p.NAME)
            if r is not None:
                if r.node_names is not None and not r.plugins:
                    r = PreFilterResult(r.node_names, (p.NAME,))
                result = r if result is None else result.merge(r)
                if result.node_names is not None and not result.node_names:
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                        ("node(s) didn't satisfy plugin(s) [" + p.NAME + "]",), p.NAME)
        return result, None

    def active_filters(self, state: CycleState) -> list[tuple[str, Callable[..., Status | None]]]:
        """(name, filter method) of the Filter plugins this cycle runs (not skipped at PreFilter)."""
        return [(p.NAME, p.filter) for p in self.points["filter"] if p.NAME not in state.skip_filter]

    def batch_filters(self, state: CycleState) -> list[tuple[str, Callable[..., list[Status | None]]]] | None:
        """(name, filter_nodes method) of the active Filter plugins, if every one has that
        optional many-nodes form (`filter_nodes(state, pod, nodes) -> [status per node]`)."""
        out = []
        for p in self.points["filter"]:
            if p.NAME in state.skip_filter:
                continue
            batch = getattr(p, "filter_nodes", None)
            if batch is None:
                return None
            out.append((p.NAME, batch))
        return out

    def run_filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        """Every active Filter on one node; the first rejection, with its plugin."""
        for name, f in self.active_filters(state):
            try:
                status = f(state, pod, node)
            except Exception as exc:
                log.exception("Filter plugin %s failed", name)
                return Status(Code.ERROR, (f"running Filter plugin {name}: {exc}",), name)
            if status is not None and status.code:
                return status.with_plugin(name)
        return None

    def run_post_filter(self, state: CycleState, pod: PodInfo,
                        node_to_status: dict[str, Status]) -> tuple[str | None, Status | None]:
        """PostFilter plugins in order until one succeeds (returns a nominated node)."""
        reasons: list[str] = []
        for p in self.points["postFilter"]:
            try:
                nominated, status = p.post_filter(state, pod, node_to_status)
            except Exception as exc:
                log.exception("PostFilter plugin %s failed", p.NAME)
                return None, Status(Code.ERROR, (str(exc),), p.NAME)
            if is_ok(status):
                return nominated, None
            if status.code is Code.ERROR:
                return None, status.with_plugin(p.NAME)
            reasons.extend(status.reasons)
        return None, Status(Code.UNSCHEDULABLE, tuple(reasons))

    def run_pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        for p in self.points["preScore"]:
            try:
                status = p.pre_score(state, pod, nodes)
            except Exception as exc:
                log.exception("PreScore plugin %s failed", p.NAME)
                return Status(Code.ERROR, (f"running PreScore plugin {p.NAME}: {exc}",), p.NAME)
            if status is not None and status.code is Code.SKIP:
                state.skip_score.add(p.NAME)
            elif not is_ok(status):
                return status.with_plugin(p.NAME)
        return None

    def run_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> tuple[list[int], Status | None]:
        """Each node's total: the sum over Score plugins of weight x (normalized) score."""
        totals = [0] * len(nodes)
        first = True
        for p in self.points["score"]:
            if p.NAME in state.skip_score:
                continue
            try:
                score_nodes = getattr(p, "score_nodes", None)
                if score_nodes is not None:
                    scores = score_nodes(state, pod, nodes)
                else:
                    score = p.score
                    scores = [score(state, pod, n) for n in nodes]
                normalize = getattr(p, "normalize_score", None)
                if normalize is not None:
                    normalize(state, pod, scores)
            except Exception as exc:
                log.exception("Score plugin %s failed", p.NAME)
                return totals, Status(Code.ERROR, (f"running Score plugin {p.NAME}: {exc}",), p.NAME)
            weight = self.weights[p.NAME]
            if weight != 1:
                scores = list(map(mul, scores, repeat(weight, len(scores))))
            # the first plugin's scores are the totals so far
            totals = list(scores) if first else list(map(add, totals, scores))
            first = False
        return totals, None

    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for p in self.points["reserve"]:
            try:
                status = p.reserve(state, pod, node_name)
            except Exception as exc:
                log.exception("Reserve plugin %s failed", p.NAME)
                status = error(f"running Reserve plugin {p.NAME}: {exc}")
            if not is_ok(status):
                return status.with_plugin(p.NAME)
        return None

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Every Reserve plugin's unreserve, in reverse order; never fails."""
        for p in reversed(self.points["reserve"]):
            try:
                p.unreserve(state, pod, node_name)
            except Exception:
                log.exception("Unreserve of plugin %s failed", p.NAME)

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Permit plugins: a rejection, Wait (the pod is parked in `waiting`), or None."""
        pending: dict[str, float] = {}
        for p in self.points["permit"]:
            try:
                status, timeout = p.permit(state, pod, node_name)
            except Exception as exc:
                log.exception("Permit plugin %s failed", p.NAME)
                return error(f"running Permit plugin {p.NAME}: {exc}").with_plugin(p.NAME)
            if status is not None and status.code is Code.WAIT:
                pending[p.NAME] = timeout
            elif not is_ok(status):
                return status.with_plugin(p.NAME)
        if pending:
            with self._waiting_lock:
                self.waiting[pod.uid] = WaitingPod(pod, pending, self.handle.clock)
            return WAIT
        return None

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        with self._waiting_lock:
            return self.waiting.get(uid)

    # binding cycle ------------------------------------------------------------------

    def wait_on_permit(self, pod: PodInfo) -> Status | None:
        with self._waiting_lock:
            wp = self.waiting.get(pod.uid)
        if wp is None:
            return None
        try:
            status = wp.wait()
        finally:
            with self._waiting_lock:
                self.waiting.pop(pod.uid, None)
        return None if status.is_success else status

    def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for p in self.points["preBind"]:
            try:
                status = p.pre_bind(state, pod, node_name)
            except Exception as exc:
                log.exception("PreBind plugin %s failed", p.NAME)
                status = error(f"running PreBind plugin {p.NAME}: {exc}")
            if not is_ok(status):
                return status.with_plugin(p.NAME)
        return None

    def run_bind_all(self, items: list[tuple[CycleState, PodInfo, str]]) -> list[Status | None]:
        """Bind many pods: each bind plugin in turn takes those the earlier ones skipped.

        A plugin with bind_all gets its whole share at once (one transaction).
        """
        results: list[Status | None] = [SKIP] * len(items)
        todo = list(range(len(items)))
        for p in self.points["bind"]:
            if not todo:
                break
            share = [items[i] for i in todo]
            try:
                if hasattr(p, "bind_all"):
                    got = p.bind_all(share)
                else:
                    got = [p.bind(*item) for item in share]
            except Exception as exc:
                log.exception("Bind plugin %s failed", p.NAME)
                got = [error(f"running Bind plugin {p.NAME}: {exc}")] * len(share)
            left = []
            for i, status in zip(todo, got):
                if status is not None and status.code is Code.SKIP:
                    left.append(i)
                else:
                    results[i] = None if is_ok(status) else status.with_plugin(p.NAME)
            todo = left
        for i in todo:
            results[i] = error("no bind plugin bound the pod")
        return results

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for p in self.points["postBind"]:
            try:
                p.post_bind(state, pod, node_name)
            except Exception:
                log.exception("PostBind plugin %s failed", p.NAME)

    def events_of(self, plugin_name: str) -> frozenset[ClusterEvent]:
        """The cluster events after which a pod this plugin rejected may fit (all if it says none)."""
        plugin = self.plugins.get(plugin_name)
        events = getattr(plugin, "EVENTS", None)
        return ALL_EVENTS if events is None else frozenset(events)


__all__ = ["ALL_EVENTS", "BatchBindPlugin", "BindPlugin", "ClusterEvent", "Code", "CycleState", "Diagnosis",
           "EXTENSION_POINTS", "FilterPlugin", "FitError", "Framework", "Handle", "MAX_NODE_SCORE",
           "MIN_NODE_SCORE", "PermitPlugin", "Plugin", "PluginFactory", "PluginRef", "PostBindPlugin",
           "PostFilterPlugin", "PreBindPlugin", "PreFilterPlugin", "PreFilterResult", "PreScorePlugin",
           "ReservePlugin", "SKIP", "SUCCESS", "ScoreExtensions", "ScorePlugin", "Status", "WAIT",
           "WaitingPod", "default_normalize_score", "error", "fit_error_message", "implements", "is_ok",
           "unschedulable"]
