"""VolumeBinding: a pod's PersistentVolumeClaims decide where it may run (kube-scheduler's volumebinding).

Built by plugins.registry; reads claims, volumes and classes through
kctl.scheduler.volumelisters. For a pod with `persistentVolumeClaim` volumes:

- PreFilter: a claim that does not exist (`persistentvolumeclaim "x" not found`) or is
  being deleted, or an unbound claim whose class binds at once (no class, or
  `volumeBindingMode: Immediate`: "pod has unbound immediate PersistentVolumeClaims"),
  rejects the pod everywhere (UnschedulableAndUnresolvable; a claim event retries it).
  Pods without claims: Skip.
- Filter: a bound claim's PV must allow the node (`spec.nodeAffinity.required`): "node(s)
  had volume node affinity conflict". An unbound claim of a WaitForFirstConsumer class
  fits a node when its `volume.kubernetes.io/selected-node` (written, or assumed by an
  earlier pod this cycle) is that node; else when a static PV of its class fits it
  (available, access modes, capacity, volumeMode, selector, the PV's node affinity), or
  the class has a provisioner (not `kubernetes.io/no-provisioner`) and its
  `allowedTopologies` match the node: otherwise "node(s) didn't find available persistent
  volumes to bind".
- Reserve: on the chosen node, picks for each such claim the smallest fitting static PV,
  or provisioning; remembers it (so the next pod's cycle sees it) until Unreserve.
- PreBind (the bind worker, before the pod's binding is written): writes what Reserve
  chose: a static PV gets `spec.claimRef` (the PV controller completes the binding); a
  claim to provision gets the annotations `volume.kubernetes.io/selected-node: <node>`
  and `volume.kubernetes.io/storage-provisioner: <class provisioner>` (the provisioner,
  kctl.controllers' PV controller, makes the PV there). Unlike kube-scheduler, PreBind
  does not wait for the claim to be bound: the node agent waits for it before it mounts.
"""

from __future__ import annotations

import copy
import threading
from kctl.machinery.persistentvolumes import (
    ANN_BETA_CLASS as ANN_BETA_STORAGE_CLASS,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    NO_PROVISIONER,
)
from dataclasses import dataclass, field

from kctl.client.retry import retry_on_conflict
from kctl.machinery.errors import APIError, Conflict, NotFound
from kctl.machinery.quantity import parse_quantity
from kctl.machinery.selectors import from_label_selector_object
from kctl.scheduler.framework import SKIP, ClusterEvent, CycleState, Handle, PreFilterResult, Status, error, \
    unschedulable
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, Snapshot
from kctl.scheduler.plugins.node_affinity import Term
from kctl.scheduler.volumelisters import VolumeListers, claim_names, listers_for

NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"

_STATE = "VolumeBinding/state"
_DECISIONS = "VolumeBinding/decisions"


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def claim_class(claim: dict) -> str:
    """The claim's storage class name ("" for none), as kube's GetPersistentVolumeClaimClass."""
    beta = (_meta(claim).get("annotations") or {}).get(ANN_BETA_STORAGE_CLASS)
    if beta is not None:
        return str(beta)
    return str((claim.get("spec") or {}).get("storageClassName") or "")


def volume_fits_node(pv: dict, node: NodeInfo) -> bool:
    """Whether a PV's required node affinity allows the node (no affinity: every node)."""
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if required is None:
        return True
    return any(Term.parse(t).matches(node) for t in required.get("nodeSelectorTerms") or ())


def _topology_fits(storage_class: dict, node: NodeInfo) -> bool:
    """A class's allowedTopologies (none: everywhere) against the node's labels."""
    terms = storage_class.get("allowedTopologies") or ()
    if not terms:
        return True
    for term in terms:
        if all(node.labels.get(str(e.get("key", ""))) in [str(v) for v in e.get("values") or ()]
               for e in term.get("matchLabelExpressions") or ()):
            return True
    return False


def _storage(obj: dict | None) -> float:
    try:
        return float(parse_quantity(str(obj.get("storage")))) if obj and obj.get("storage") is not None else 0.0
    except ValueError:
        return 0.0


def volume_matches_claim(pv: dict, claim: dict) -> bool:
    """A static PV that could be bound to the claim, node aside (kube's FindMatchingVolume checks)."""
    spec, cspec = pv.get("spec") or {}, claim.get("spec") or {}
    if _meta(pv).get("deletionTimestamp"):
        return False
    ref = spec.get("claimRef")
    if ref:
        cmeta = _meta(claim)
        if ref.get("name") != cmeta.get("name") or (ref.get("namespace") or "") != (cmeta.get("namespace") or ""):
            return False
        if ref.get("uid") and ref.get("uid") != cmeta.get("uid"):
            return False
    elif (pv.get("status") or {}).get("phase") not in (None, "Available"):
        return False
    if str(spec.get("storageClassName") or "") != claim_class(claim):
        return False
    if (spec.get("volumeMode") or "Filesystem") != (cspec.get("volumeMode") or "Filesystem"):
        return False
    if not set(cspec.get("accessModes") or ()) <= set(spec.get("accessModes") or ()):
        return False
    if _storage(spec.get("capacity")) < _storage((cspec.get("resources") or {}).get("requests")):
        return False
    if cspec.get("selector"):
        try:
            selector = from_label_selector_object(cspec["selector"])
        except APIError:
            return False
        if not selector.matches(_meta(pv).get("labels") or {}):
            return False
    return True


@dataclass
class _PodClaims:
    """A pod's claims, sorted as the plugin needs them."""

    #: bound claims: (claim, its PV)
    bound: list[tuple[dict, dict]] = field(default_factory=list)
    #: unbound claims of a WaitForFirstConsumer class: (claim, class)
    delayed: list[tuple[dict, dict]] = field(default_factory=list)


@dataclass(frozen=True)
class _Decision:
    """What Reserve chose for one delayed claim: a static PV to bind, or provisioning."""

    claim: dict
    volume: dict | None = None
    provisioner: str = ""


class VolumeBinding:
    """PreFilter + Filter + Reserve + PreBind for PersistentVolumeClaims (see the module docstring)."""

    NAME = "VolumeBinding"
    EVENTS = frozenset({ClusterEvent.PVC_ADD, ClusterEvent.PVC_UPDATE, ClusterEvent.PV_ADD, ClusterEvent.PV_UPDATE,
                        ClusterEvent.STORAGE_CLASS_ADD, ClusterEvent.STORAGE_CLASS_UPDATE, ClusterEvent.NODE_ADD,
                        ClusterEvent.NODE_LABEL_CHANGE})

    def __init__(self, args: dict | None = None, handle: Handle | None = None, *,
                 listers: VolumeListers | None = None) -> None:
        self.handle = handle or Handle()
        self.listers = listers if listers is not None else listers_for(self.handle)
        self._lock = threading.Lock()
        #: claim uid -> node name chosen by a pod still between Reserve and its claim's update
        self._assumed_nodes: dict[str, str] = {}
        #: PV name -> claim uid: static PVs chosen for a claim, not yet written
        self._assumed_volumes: dict[str, str] = {}

    # -- scheduling cycle ---------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        names = claim_names(pod.pod)
        if not names:
            return None, SKIP
        claims = _PodClaims()
        immediate = False
        for name in names:
            claim = self.listers.claim(pod.namespace, name)
            if claim is None:
                return None, unschedulable(f'persistentvolumeclaim "{name}" not found', unresolvable=True)
            if _meta(claim).get("deletionTimestamp"):
                return None, unschedulable(f'persistentvolumeclaim "{name}" is being deleted', unresolvable=True)
            volume_name = (claim.get("spec") or {}).get("volumeName")
            if volume_name:
                pv = self.listers.volume(volume_name)
                if pv is None:
                    return None, unschedulable(f'persistentvolume "{volume_name}" not found', unresolvable=True)
                claims.bound.append((claim, pv))
                continue
            class_name = claim_class(claim)
            storage_class = self.listers.storage_class(class_name) if class_name else None
            if storage_class is not None and storage_class.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER:
                claims.delayed.append((claim, storage_class))
            else:
                immediate = True
        if immediate:
            return None, unschedulable(UNBOUND_IMMEDIATE, unresolvable=True)
        state.write(_STATE, claims)
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        claims: _PodClaims | None = state.read(_STATE)
        if claims is None:
            return None
        for _claim, pv in claims.bound:
            if not volume_fits_node(pv, node):
                return unschedulable(NODE_CONFLICT, unresolvable=True)
        if claims.delayed and self._decide(claims, node) is None:
            return unschedulable(BIND_CONFLICT, unresolvable=True)
        return None

    def _decide(self, claims: _PodClaims, node: NodeInfo) -> list[_Decision] | None:
        """What binding the delayed claims on `node` takes; None when one of them cannot be."""
        decisions: list[_Decision] = []
        taken: set[str] = set()
        with self._lock:
            assumed_nodes, assumed_volumes = dict(self._assumed_nodes), dict(self._assumed_volumes)
        static: list[dict] | None = None
        for claim, storage_class in claims.delayed:
            uid = str(_meta(claim).get("uid", ""))
            selected = (_meta(claim).get("annotations") or {}).get(ANN_SELECTED_NODE) or assumed_nodes.get(uid)
            provisioner = str(storage_class.get("provisioner") or "")
            if selected:
                if selected != node.name:
                    return None
                decisions.append(_Decision(claim, provisioner=provisioner))
                continue
            if static is None:
                static = self.listers.volumes()
            fitting = [pv for pv in static
                       if _meta(pv).get("name") not in taken
                       and assumed_volumes.get(_meta(pv).get("name", ""), uid) == uid
                       and volume_matches_claim(pv, claim) and volume_fits_node(pv, node)]
            if fitting:
                best = min(fitting, key=lambda pv: (_storage((pv.get("spec") or {}).get("capacity")),
                                                    _meta(pv).get("name", "")))
                taken.add(_meta(best).get("name", ""))
                decisions.append(_Decision(claim, volume=best))
                continue
            if not provisioner or provisioner == NO_PROVISIONER or not _topology_fits(storage_class, node):
                return None
            decisions.append(_Decision(claim, provisioner=provisioner))
        return decisions

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        claims: _PodClaims | None = state.read(_STATE)
        if claims is None or not claims.delayed:
            return None
        node = self.handle.snapshot.get(node_name) or NodeInfo(name=node_name)
        decisions = self._decide(claims, node)
        if decisions is None:
            return unschedulable(BIND_CONFLICT)
        with self._lock:
            for d in decisions:
                uid = str(_meta(d.claim).get("uid", ""))
                if d.volume is not None:
                    self._assumed_volumes[_meta(d.volume).get("name", "")] = uid
                else:
                    self._assumed_nodes[uid] = node_name
        state.write(_DECISIONS, decisions)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        decisions: list[_Decision] | None = state.read(_DECISIONS)
        if not decisions:
            return
        self._forget(decisions)

    def _forget(self, decisions: list[_Decision]) -> None:
        with self._lock:
            for d in decisions:
                uid = str(_meta(d.claim).get("uid", ""))
                if d.volume is not None:
                    name = _meta(d.volume).get("name", "")
                    if self._assumed_volumes.get(name) == uid:
                        del self._assumed_volumes[name]
                else:
                    self._assumed_nodes.pop(uid, None)

    # -- binding cycle ----------------------------------------------------------------------

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        decisions: list[_Decision] | None = state.read(_DECISIONS)
        if not decisions:
            return None
        api = self.handle.api
        if api is None:
            return None
        try:
            for d in decisions:
                if d.volume is not None:
                    retry_on_conflict(lambda d=d: self._bind_static(api, d))
                else:
                    retry_on_conflict(lambda d=d: self._select_node(api, d, node_name))
        except _BindError as exc:
            return error(f"binding volumes: {exc}")
        except Conflict:
            return error("binding volumes: the claim kept changing")
        except APIError as exc:
            return error(f"binding volumes: {exc}")
        return None

    def _current_claim(self, api, claim: dict) -> dict:
        meta = _meta(claim)
        try:
            current = api.get(api.resource("persistentvolumeclaims"), meta.get("name", ""),
                              namespace=meta.get("namespace"))
        except NotFound:
            raise _BindError(f'persistentvolumeclaim "{meta.get("name")}" was deleted') from None
        if _meta(current).get("uid") != meta.get("uid") or _meta(current).get("deletionTimestamp"):
            raise _BindError(f'persistentvolumeclaim "{meta.get("name")}" was deleted')
        return current

    def _select_node(self, api, d: _Decision, node_name: str) -> None:
        """Annotate the claim for the provisioner (nothing to do if bound or annotated already)."""
        current = self._current_claim(api, d.claim)
        if (current.get("spec") or {}).get("volumeName"):
            return
        annotations = _meta(current).get("annotations") or {}
        selected = annotations.get(ANN_SELECTED_NODE)
        if selected == node_name and (not d.provisioner or annotations.get(ANN_STORAGE_PROVISIONER)):
            return
        if selected and selected != node_name:
            raise _BindError(f'persistentvolumeclaim "{_meta(current).get("name")}" is to be provisioned on '
                             f'node "{selected}"')
        updated = copy.deepcopy(current)
        new = updated["metadata"].setdefault("annotations", {})
        new[ANN_SELECTED_NODE] = node_name
        if d.provisioner:
            new.setdefault(ANN_STORAGE_PROVISIONER, d.provisioner)
        api.update(updated)

    def _bind_static(self, api, d: _Decision) -> None:
        """Point the chosen PV's claimRef at the claim (the PV controller binds both ways)."""
        assert d.volume is not None
        name = _meta(d.volume).get("name", "")
        claim = self._current_claim(api, d.claim)
        if (claim.get("spec") or {}).get("volumeName"):
            return
        try:
            pv = api.get(api.resource("persistentvolumes"), name)
        except NotFound:
            raise _BindError(f'persistentvolume "{name}" was deleted') from None
        cmeta = _meta(claim)
        ref = (pv.get("spec") or {}).get("claimRef")
        if ref and ref.get("uid") == cmeta.get("uid"):
            return
        if not volume_matches_claim(pv, claim):
            raise _BindError(f'persistentvolume "{name}" is no longer available')
        updated = copy.deepcopy(pv)
        updated.setdefault("spec", {})["claimRef"] = {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": cmeta.get("namespace"),
            "name": cmeta.get("name"), "uid": cmeta.get("uid"), "resourceVersion": cmeta.get("resourceVersion")}
        updated["metadata"].setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
        api.update(updated)

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """The pod is bound: what Reserve assumed is written; the informers now carry it."""
        decisions: list[_Decision] | None = state.read(_DECISIONS)
        if decisions:
            self._forget(decisions)


class _BindError(Exception):
    """A claim or PV changed between Reserve and PreBind (the pod is scheduled again)."""


__all__ = ["ANN_SELECTED_NODE", "ANN_STORAGE_PROVISIONER", "BIND_CONFLICT", "NODE_CONFLICT", "UNBOUND_IMMEDIATE",
           "VolumeBinding", "claim_class", "volume_fits_node", "volume_matches_claim"]
