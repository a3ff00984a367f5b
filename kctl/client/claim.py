"""Claiming dependents: client-go's ControllerRefManager (ClaimObject, AdoptPod, ReleasePod).

A controller (ReplicaSet, DaemonSet, Deployment) owns the objects that carry its
controller ownerReference. Each sync it *claims* the candidates it sees in its cache:

- owned by us and matching the selector: claimed (even while we are being deleted);
- owned by us but no longer matching: released (our ownerReference removed), unless we
  are being deleted; not claimed;
- owned by another controller: ignored;
- an orphan that matches, is not being deleted and lives in our namespace: adopted
  (our controller ownerReference added) and claimed, unless we are being deleted. Before
  the first adoption the owner is read fresh from the API by name and must still have
  our uid and no deletionTimestamp (client-go's RecheckDeletionTimestamp / canAdopt):
  a stale cache must never adopt for an owner that is going away. When it fails no
  object is adopted this pass.

A Conflict or NotFound on an adoption or release is not an error: the object changed or
went, and the next sync (triggered by that change) sees it. A Conflict is recorded in
`ClaimResult.conflicts` so a controller that acts only on a complete claim (ClaimPods'
aggregate error) can requeue. Each write is an update carrying the resourceVersion the
cache saw, a stricter precondition than client-go's uid-only patch (kctl's patch has no
uid precondition): it also fails when someone else changed the owners in between.

An empty selector matches nothing here (Kubernetes' validation forbids it for the
workload controllers; a controller never adopts every object in a namespace).

Used by kctl/controllers/replicaset.py (pods), daemonset.py (pods) and deployment.py
(ReplicaSets). `controller_ref` and `owner_reference` are shared with every controller.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from kctl.machinery.errors import Conflict, NotFound

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.machinery.resources import ResourceType
    from kctl.machinery.selectors import LabelSelector


def controller_ref(obj: dict) -> dict | None:
    """The ownerReference with controller=true, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def owner_reference(owner: dict, kind: str) -> dict:
    """The controller ownerReference a controller puts on what it creates or adopts."""
    return {"apiVersion": owner.get("apiVersion", "apps/v1"), "kind": kind, "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


@dataclass
class ClaimResult:
    """What one claim pass found and did."""

    #: the objects the controller owns after the pass (adopted ones as written), in candidate order
    claimed: list[dict] = field(default_factory=list)
    #: the objects adopted (as written) and released (as written) this pass
    adopted: list[dict] = field(default_factory=list)
    released: list[dict] = field(default_factory=list)
    #: one line per adoption or release that conflicted (the object changed since the cache saw it)
    conflicts: list[str] = field(default_factory=list)
    #: why no orphan was adopted (the owner is gone, replaced or being deleted), or None
    refused: str | None = None

    @property
    def complete(self) -> bool:
        """True when every adoption and release this pass wanted was made (or was moot)."""
        return not self.conflicts and self.refused is None

    @property
    def problem(self) -> str | None:
        """One line saying why the claim is incomplete, or None when it is complete."""
        if self.refused is not None:
            return f"may not adopt: {self.refused}"
        if self.conflicts:
            more = f" (and {len(self.conflicts) - 1} more)" if len(self.conflicts) > 1 else ""
            return self.conflicts[0] + more
        return None


class ClaimIncomplete(Exception):
    """Raised by a controller that acts only on a complete claim: the sync must run again with back-off."""


class ControllerRefManager:
    """Claims candidates for one controller object (`owner`, of `kind`, read from `owner_rt`)."""

    def __init__(self, api: "API", owner: dict, *, kind: str, owner_rt: "ResourceType",
                 selector: "LabelSelector") -> None:
        self.api = api
        self.owner = owner
        self.kind = kind
        self.owner_rt = owner_rt
        self.selector = selector
        meta = owner["metadata"]
        self.uid: str = meta["uid"]
        self.namespace: str | None = meta.get("namespace")
        self.deleting = bool(meta.get("deletionTimestamp"))
        self._can_adopt: str | None | bool = False  # False: not checked yet; None: may adopt; str: why not

    def matches(self, obj: dict) -> bool:
        """Whether obj's labels match the selector (an empty selector matches nothing)."""
        return not self.selector.is_empty and self.selector.matches((obj.get("metadata") or {}).get("labels") or {})

    def claim(self, candidates: Iterable[dict]) -> ClaimResult:
        """ClaimObjects: adopt matching orphans, release owned objects that stopped matching."""
        result = ClaimResult()
        for obj in candidates:
            claimed = self._claim_one(obj, result)
            if claimed is not None:
                result.claimed.append(claimed)
        return result

    def _claim_one(self, obj: dict, result: ClaimResult) -> dict | None:
        """ClaimObject: the object as claimed, or None when it is not ours after this pass."""
        meta = obj.get("metadata") or {}
        ref = controller_ref(obj)
        if ref is not None:
            if ref.get("uid") != self.uid:
                return None  # another controller's
            if self.matches(obj):
                return obj
            if not self.deleting:
                released = self._write(obj, adopt=False, result=result)
                if released:
                    result.released.append(released)
            return None
        if self.deleting or not self.matches(obj) or meta.get("deletionTimestamp"):
            return None
        if (meta.get("namespace") or None) != (self.namespace or None):
            return None
        adopted = self._write(obj, adopt=True, result=result)
        if adopted:
            result.adopted.append(adopted)
            return adopted
        return None

    def _refusal(self) -> str | None:
        """canAdopt (once per manager): why the owner, read fresh by name, may not adopt; None if it may."""
        if self._can_adopt is False:
            name = self.owner["metadata"]["name"]
            try:
                fresh = self.api.get(self.owner_rt, name, namespace=self.namespace)
            except NotFound:
                fresh = None
            if fresh is None:
                self._can_adopt = f'{self.kind} "{name}" is gone'
            elif (fresh.get("metadata") or {}).get("uid") != self.uid:
                self._can_adopt = f'{self.kind} "{name}" was replaced (its uid changed)'
            elif (fresh.get("metadata") or {}).get("deletionTimestamp"):
                self._can_adopt = f'{self.kind} "{name}" is being deleted'
            else:
                self._can_adopt = None
        return self._can_adopt if isinstance(self._can_adopt, str) else None

    def can_adopt(self) -> bool:
        """Whether the owner, read fresh from the API, may adopt (checked once, then remembered)."""
        return self._refusal() is None

    def _write(self, obj: dict, *, adopt: bool, result: ClaimResult) -> dict | None:
        """Add (adopt) or remove (release) our controller reference; None when it went or conflicted."""
        if adopt:
            reason = self._refusal()
            if reason is not None:
                result.refused = reason
                return None
        new = copy.deepcopy(obj)
        refs = [r for r in new["metadata"].get("ownerReferences") or () if r.get("uid") != self.uid]
        if adopt:
            refs.append(owner_reference(self.owner, self.kind))
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            new["metadata"].pop("ownerReferences", None)
        try:
            return self.api.update(new)
        except NotFound:
            return None  # gone: nothing to adopt or release
        except Conflict:
            verb = "adopt" if adopt else "release"
            result.conflicts.append(f'{obj.get("kind", "object")} "{obj["metadata"].get("name")}": '
                                    f"could not {verb} it, it changed")
            return None


__all__ = ["ClaimIncomplete", "ClaimResult", "ControllerRefManager", "controller_ref", "owner_reference"]
