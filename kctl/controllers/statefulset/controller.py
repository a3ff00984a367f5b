"""The StatefulSet controller: pods with stable names and storage, made and replaced in order.

Run by the controller manager in `kctl daemon` (its entry "statefulset" in
kctl/daemon/controllers.py); written after Kubernetes' pkg/controller/statefulset. It
watches StatefulSets, their pods, ControllerRevisions and PersistentVolumeClaims; for a
key it:

1. claims the set's pods (ControllerRefManager: orphans whose name is `<set>-<n>` and
   whose labels match are adopted, owned pods that stopped matching released) and its
   ControllerRevisions (the same, by selector);
2. finds the update revision (the revision of the template now; an equal older one is
   renumbered, else a new one is created, a name collision counted in
   status.collisionCount) and the current revision (status.currentRevision);
3. carries out `update.plan`: creates a pod's claims (claims.py) and then the pod,
   deletes pods (failed ones, scaled-down ones, out-of-date ones), fixes pods' identity
   labels, claims and the claims' ownerReferences (persistentVolumeClaimRetentionPolicy);
4. deletes revisions beyond revisionHistoryLimit and writes the status.

Events are Kubernetes': `SuccessfulCreate` "create Pod web-0 in StatefulSet web
successful", "create Claim www-web-0 Pod web-0 in StatefulSet web success",
`SuccessfulDelete`, `RecreatingFailedPod`, `FailedCreate`/`FailedDelete` with the error.
A pass that waits (OrderedReady) is woken by the pod's next change; with minReadySeconds
it looks again when a ready pod becomes available.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING

from kctl.client.claim import ClaimIncomplete, ControllerRefManager
from kctl.client.statuswriter import StatusWriter
from kctl.controllers.base import clock_now, controller_ref, key_of, owner_key
from kctl.controllers.statefulset import claims as claimutil
from kctl.controllers.statefulset import pods as podutil
from kctl.controllers.statefulset import revisions as revutil
from kctl.controllers.statefulset.update import Action, min_ready_seconds, plan
from kctl.machinery.errors import AlreadyExists, APIError, Conflict, NotFound

if TYPE_CHECKING:
    import datetime as dt

    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext
    from kctl.machinery.selectors import LabelSelector

log = logging.getLogger("kctl.controllers.statefulset")

KIND = "StatefulSet"
#: most attempts at a revision name when hashes collide
MAX_COLLISIONS = 20


class StatefulSetController:
    """Keeps each StatefulSet's ordinals 0..N-1 backed by a pod and its claims, and rolls them out."""

    name = "statefulset"

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.sets = ctx.informers.informer("statefulsets")
        self.pods = ctx.informers.informer("pods")
        self.revisions = ctx.informers.informer("controllerrevisions")
        self.claims = ctx.informers.informer("persistentvolumeclaims")
        self.sets.add_handler(self._enqueue, lambda old, new: self._enqueue(new), self._enqueue)
        self.pods.add_handler(self._on_pod, self._on_pod_update, self._on_pod)
        self.revisions.add_handler(self._on_owned, lambda old, new: self._on_owned(new), self._on_owned)
        self.claims.add_handler(self._on_claim, lambda old, new: self._on_claim(new), self._on_claim)
        self._pod_rt = self.api.resource("pods")
        self._set_rt = self.api.resource("statefulsets")
        self._rev_rt = self.api.resource("controllerrevisions")
        self._claim_rt = self.api.resource("persistentvolumeclaims")
        self.status_writer = StatusWriter(self.api)

    def object_for(self, key: str) -> dict | None:
        """The cached StatefulSet of a key (a permanent failure's Warning Event goes on it)."""
        namespace, _, name = key.rpartition("/")
        return self.sets.get(namespace, name)

    # -- event handlers ------------------------------------------------------------------

    def _enqueue(self, sts: dict) -> None:
        self.queue.add(key_of(sts))

    def _on_owned(self, obj: dict) -> None:
        key = owner_key(obj, KIND)
        if key is not None:
            self.queue.add(key)

    def _on_pod(self, pod: dict) -> None:
        key = owner_key(pod, KIND)
        if key is not None:
            self.queue.add(key)
        elif pod["metadata"].get("labels"):
            self._enqueue_matching(pod)

    def _on_pod_update(self, old: dict, new: dict) -> None:
        old_key, key = owner_key(old, KIND), owner_key(new, KIND)
        if old_key and old_key != key:
            self.queue.add(old_key)
        if key is not None:
            self.queue.add(key)
        elif (old["metadata"].get("labels") != new["metadata"].get("labels")
              or old["metadata"].get("ownerReferences") != new["metadata"].get("ownerReferences")):
            self._enqueue_matching(new)

    def _on_claim(self, claim: dict) -> None:
        """A claim of `<template>-<set>-<n>` wakes the sets of its namespace whose name it carries."""
        meta = claim.get("metadata") or {}
        for sts in self.sets.list(meta.get("namespace")):
            if f"-{sts['metadata']['name']}-" in (meta.get("name") or ""):
                self._enqueue(sts)

    def _enqueue_matching(self, pod: dict) -> None:
        """An orphan pod: a set whose name and selector it matches may adopt it."""
        from kctl.machinery.selectors import from_label_selector_object

        labels = pod["metadata"].get("labels") or {}
        for sts in self.sets.list(pod["metadata"].get("namespace")):
            if not podutil.is_member_of(sts, pod):
                continue
            try:
                if from_label_selector_object((sts.get("spec") or {}).get("selector")).matches(labels):
                    self._enqueue(sts)
            except APIError:
                continue

    # -- reconcile -----------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        namespace, _, name = key.rpartition("/")
        sts = self.sets.get(namespace, name)
        if sts is None:
            return None
        from kctl.machinery.selectors import from_label_selector_object

        try:
            selector = from_label_selector_object((sts.get("spec") or {}).get("selector"))
        except APIError as exc:
            self._event(sts, "Warning", "InvalidSelector", str(exc))
            return None
        if selector.is_empty:
            self._event(sts, "Warning", "InvalidSelector", "empty selector is invalid for statefulset")
            return None
        pods = self._claim(sts, selector, self.pods, self._pod_rt, member_only=True)
        revisions = self._claim(sts, selector, self.revisions, self._rev_rt, member_only=False)
        now = clock_now(getattr(self.ctx, "clock", None))
        current, update, collisions, revisions = self._revisions(sts, revisions)
        claims = {c["metadata"]["name"]: c for c in self.claims.list(namespace)}
        the_plan = plan(sts, pods, current_set=revutil.applied(sts, current), update_set=revutil.applied(sts, update),
                        current=current["metadata"]["name"], update=update["metadata"]["name"], claims=claims,
                        now=now, collision_count=collisions)
        if the_plan.waiting:
            log.debug("statefulset %s: %s", key, the_plan.waiting)
        for action in the_plan.actions:
            self._act(sts, action, claims)
        live = {current["metadata"]["name"], update["metadata"]["name"], *(podutil.revision_of(p) for p in pods)}
        limit = (sts.get("spec") or {}).get("revisionHistoryLimit")
        for old in revutil.history_to_delete(revisions, live, limit):
            try:
                self.api.delete(self._rev_rt, old["metadata"]["name"], namespace=namespace)
            except NotFound:
                pass
        status = the_plan.status
        self.status_writer.write(sts, lambda live_obj: {**(live_obj.get("status") or {}), **status})
        return self._min_ready_requeue(sts, pods, now)

    def _claim(self, sts: dict, selector: "LabelSelector", informer: object, rt: object, *,
               member_only: bool) -> list[dict]:
        """Owned objects of one kind after adoption and release (ClaimPods / adoptOrphanRevisions)."""
        uid = sts["metadata"]["uid"]
        manager = ControllerRefManager(self.api, sts, kind=KIND, owner_rt=self._set_rt, selector=selector)
        owned = [o for o in informer.by_index("owner", uid)  # type: ignore[attr-defined]
                 if (controller_ref(o) or {}).get("uid") == uid]
        owned = [o for o in owned if manager.matches(o) or not o["metadata"].get("deletionTimestamp")]
        orphans = [o for o in informer.list(sts["metadata"].get("namespace"), selector=selector)  # type: ignore
                   if controller_ref(o) is None and (not member_only or podutil.is_member_of(sts, o))]
        result = manager.claim([*owned, *orphans])
        if not result.complete:
            raise ClaimIncomplete(f'statefulset "{sts["metadata"]["name"]}": {result.problem}')
        if member_only:
            return [o for o in result.claimed if podutil.is_member_of(sts, o)]
        return result.claimed

    # -- revisions -----------------------------------------------------------------------

    def _revisions(self, sts: dict, revisions: list[dict]) -> tuple[dict, dict, int, list[dict]]:
        """getStatefulSetRevisions: (current, update, collisionCount, every revision now)."""
        revisions = revutil.sort_revisions(revisions)
        collisions = int((sts.get("status") or {}).get("collisionCount") or 0)
        wanted = revutil.new_revision(sts, revutil.next_revision(revisions), collisions)
        equal = revutil.find_equal(revisions, wanted)
        if equal and revisions and equal[-1]["metadata"]["name"] == revisions[-1]["metadata"]["name"]:
            update = revisions[-1]
        elif equal:
            update = self._renumber(equal[-1], revutil.number(wanted))
            revisions = [update if r["metadata"]["name"] == update["metadata"]["name"] else r for r in revisions]
        else:
            update, collisions = self._create_revision(sts, wanted, collisions)
            revisions = [*revisions, update]
        current_name = (sts.get("status") or {}).get("currentRevision")
        current = next((r for r in revisions if r["metadata"]["name"] == current_name), None) or update
        return current, update, collisions, revisions

    def _renumber(self, revision: dict, number: int) -> dict:
        """UpdateControllerRevision: an older revision becomes the newest again (a rollback)."""
        from kctl.client.retry import retry_on_conflict

        state = {"obj": revision}

        def attempt() -> dict:
            obj = copy.deepcopy(state["obj"])
            if revutil.number(obj) == number:
                return obj
            obj["revision"] = number
            try:
                return self.api.update(obj)
            except Conflict:
                state["obj"] = self.api.get(self._rev_rt, obj["metadata"]["name"],
                                            namespace=obj["metadata"].get("namespace"))
                raise

        return retry_on_conflict(attempt)

    def _create_revision(self, sts: dict, wanted: dict, collisions: int) -> tuple[dict, int]:
        """CreateControllerRevision: a name taken by other data bumps the collision count."""
        namespace = sts["metadata"].get("namespace")
        for _ in range(MAX_COLLISIONS):
            hash_ = revutil.hash_revision(wanted["data"], collisions)
            clone = copy.deepcopy(wanted)
            clone["metadata"]["name"] = revutil.revision_name(sts["metadata"]["name"], hash_)
            try:
                return self.api.create(clone), collisions
            except AlreadyExists:
                existing = self.api.get(self._rev_rt, clone["metadata"]["name"], namespace=namespace)
                if revutil.equal_revision(existing, clone):
                    return existing, collisions
                collisions += 1
        raise APIError(f'statefulset "{sts["metadata"]["name"]}": no free revision name after '
                       f"{MAX_COLLISIONS} hash collisions")

    # -- acting --------------------------------------------------------------------------

    def _act(self, sts: dict, action: Action, claims: dict[str, dict]) -> None:
        if action.verb == "create":
            self._create_pod(sts, action.pod, claims)
        elif action.verb == "delete":
            self._delete_pod(sts, action.pod, failed=action.reason == "failed")
        else:
            self._fix_pod(sts, action.pod, claims)

    def _pod_message(self, verb: str, sts: dict, pod: dict, outcome: str) -> str:
        return f"{verb} Pod {pod['metadata']['name']} in StatefulSet {sts['metadata']['name']} {outcome}"

    def _ensure_claims(self, sts: dict, pod: dict, claims: dict[str, dict]) -> bool:
        """createPersistentVolumeClaims: each missing claim created; False when one could not be."""
        ok = True
        live = pod if pod["metadata"].get("uid") else None
        for claim in claimutil.claims_for(sts, podutil.ordinal_of(pod)):
            name = claim["metadata"]["name"]
            existing = claims.get(name)
            if existing is not None:
                if existing["metadata"].get("deletionTimestamp"):
                    ok = False
                    self._event(sts, "Warning", "FailedCreate", f"pvc {name} is being deleted")
                continue
            refs = claimutil.desired_owner_refs(claim, sts, live, ordinal=podutil.ordinal_of(pod))
            if refs:
                claim["metadata"]["ownerReferences"] = refs
            message = f"create Claim {name} Pod {pod['metadata']['name']} in StatefulSet {sts['metadata']['name']}"
            try:
                claims[name] = self.api.create(claim)
                self._event(sts, "Normal", "SuccessfulCreate", f"{message} success")
            except AlreadyExists:
                continue
            except APIError as exc:
                ok = False
                self._event(sts, "Warning", "FailedCreate", f"{message} failed error: {exc}")
        return ok

    def _create_pod(self, sts: dict, pod: dict, claims: dict[str, dict]) -> None:
        if not self._ensure_claims(sts, pod, claims):
            return
        try:
            self.api.create(pod)
            self._event(sts, "Normal", "SuccessfulCreate", self._pod_message("create", sts, pod, "successful"))
        except AlreadyExists:
            pass
        except APIError as exc:
            self._event(sts, "Warning", "FailedCreate", self._pod_message("create", sts, pod, f"failed error: {exc}"))

    def _delete_pod(self, sts: dict, pod: dict, *, failed: bool) -> None:
        meta = pod["metadata"]
        if failed:
            self._event(sts, "Warning", "RecreatingFailedPod",
                        f"StatefulSet {meta.get('namespace')}/{sts['metadata']['name']} is recreating failed Pod "
                        f"{meta['name']}")
        try:
            self.api.delete(self._pod_rt, meta["name"], namespace=meta.get("namespace"))
            self._event(sts, "Normal", "SuccessfulDelete", self._pod_message("delete", sts, pod, "successful"))
        except NotFound:
            pass
        except APIError as exc:
            self._event(sts, "Warning", "FailedDelete", self._pod_message("delete", sts, pod, f"failed error: {exc}"))

    def _fix_pod(self, sts: dict, pod: dict, claims: dict[str, dict]) -> None:
        """updateStatefulPod: identity labels, missing claims, the claims' owners per the retention policy."""
        if podutil.in_ordinal_range(pod, sts):
            self._ensure_claims(sts, pod, claims)
        for name in claimutil.pod_claim_names(sts, pod):
            claim = claims.get(name)
            if claim is None or claim["metadata"].get("deletionTimestamp"):
                continue
            refs = claimutil.desired_owner_refs(claim, sts, pod)
            if refs == (claim["metadata"].get("ownerReferences") or []):
                continue
            new = copy.deepcopy(claim)
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            try:
                claims[name] = self.api.update(new)
            except (Conflict, NotFound):
                self.queue.add(key_of(sts))  # the claim changed: look again with the fresh one
        if podutil.in_ordinal_range(pod, sts) and not podutil.identity_matches(sts, pod):
            try:
                self.api.update(podutil.with_identity(sts, pod))
            except (Conflict, NotFound):
                self.queue.add(key_of(sts))
            except APIError as exc:
                self._event(sts, "Warning", "FailedUpdate",
                            self._pod_message("update", sts, pod, f"failed error: {exc}"))

    def _min_ready_requeue(self, sts: dict, pods: list[dict], now: "dt.datetime") -> float | None:
        """With minReadySeconds, look again when a ready pod becomes available."""
        from kctl.client import pods as pod_status

        min_ready = min_ready_seconds(sts)
        if min_ready <= 0:
            return None
        waits = []
        for pod in pods:
            if podutil.is_running_and_ready(pod) and not podutil.is_running_and_available(pod, min_ready, now):
                since = pod_status.pod_ready_since(pod)
                if since is not None:
                    waits.append(max(0.0, min_ready - (now - since).total_seconds()))
        return min(waits) + 0.01 if waits else None

    def _event(self, sts: dict, type_: str, reason: str, message: str) -> None:
        recorder = getattr(self.ctx, "recorder", None)
        if recorder is not None:
            recorder.event(sts, type_, reason, message)


__all__ = ["StatefulSetController"]
