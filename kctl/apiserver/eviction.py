"""The pods/eviction subresource: delete a pod only if its PodDisruptionBudget allows it.

As kube-apiserver's EvictionREST (pkg/registry/core/pod/storage/eviction.go), called by
kctl.apiserver.server.APIServer.evict (and so by `kctl drain`, locally or over the remote API):

- the pod does not exist: NotFound;
- the pod is finished (Succeeded/Failed), Pending, or already being deleted: it is deleted,
  no budget consulted (it disrupts nothing more);
- no budget selects the pod: it is deleted;
- more than one does: an InternalError (500) "This pod has more than one
  PodDisruptionBudget, which the eviction subresource does not support.";
- a pod that is not Ready is deleted without touching the budget when the budget's
  unhealthyPodEvictionPolicy is AlwaysAllow, or (IfHealthyBudget, the default) when the
  budget is met already (currentHealthy >= desiredHealthy > 0);
- otherwise the budget decides: its status not yet observed (observedGeneration < generation)
  or disruptionsAllowed 0 -> TooManyRequests (429) "Cannot evict pod as it would violate the
  pod's disruption budget." (a cause names the budget); a negative count or more than 2,000
  unconfirmed disruptions -> Forbidden; else disruptionsAllowed is decremented, the pod is
  recorded in status.disruptedPods, and the pod deleted.

Unlike Kubernetes (a PDB status update, then a pod delete, each retried on Conflict), the
budget's update and the pod's deletion are ONE store transaction, so two evictions racing for
the last allowed disruption cannot both pass. Admission for the pod's DELETE runs before the
transaction (no lock held); a pod or budget that changed meanwhile is a Conflict, and the
whole eviction is looked at again (bounded attempts, jittered back-off). The transaction is
the store's `transact`, which an optimistic store (etcd) runs again when what it read changed
before its commit. The pod gets the DisruptionTarget condition (reason EvictionByEvictionAPI)
as it is deleted. One audit event per eviction (verb create, subresource eviction).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from kctl.machinery import disruption
from kctl.machinery.errors import APIError, Conflict, FieldError, Forbidden, NotFound, TooManyRequests

if TYPE_CHECKING:
    from kctl.apiserver.server import APIServer
    from kctl.store.contract import Transaction

PDB_KIND = "PodDisruptionBudget.policy"
#: Kubernetes' MaxDisruptedPodSize: unconfirmed evictions a budget may hold
MAX_DISRUPTED_PODS = 2000
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
#: how many times an eviction that met a Conflict is looked at again
MAX_ATTEMPTS = 30


class _DryRun(Exception):
    """Rolls the eviction's transaction back after every check passed."""


def evict(server: APIServer, namespace: str | None, name: str, *, grace_period: int | None = None,
          dry_run: bool = False) -> dict:
    """Evict pod namespace/name as the Eviction subresource does; a Status of Success when it is (being) deleted."""
    from kctl.apiserver import audit
    from kctl.apiserver.server import _backoff, _Target

    pods = server.resource("pods")
    ns = server.namespace_of(pods, namespace)
    target = _Target(pods, ns, name, "eviction")
    received = audit.now()
    try:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                rv = _attempt(server, ns, name, grace_period=grace_period, dry_run=dry_run)
                break
            except Conflict:
                if attempt == MAX_ATTEMPTS:
                    raise
            _backoff(attempt)
    except APIError as exc:
        if not dry_run:
            server._audit([server._failure_event("create", target, exc, received)])
        raise
    if not dry_run:
        server._audit([server._ref_event("create", target, 201, received, rv=rv)])
    return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 201}


def _attempt(server: APIServer, ns: str, name: str, *, grace_period: int | None, dry_run: bool) -> str:
    """One look: admission for the pod's delete, then the budget check and the delete in one transaction."""
    pods = server.resource("pods")
    prepared = server._prepare_delete(pods, name, ns, propagation=None, grace_period=grace_period,
                                      resource_version=None, dry_run=dry_run)
    from kctl.store.contract import CommitConflict

    box: list[str] = []

    def decide(txn: Transaction) -> None:
        box[:] = [_decide_and_delete(server, txn, prepared)]
        if dry_run:
            raise _DryRun()

    try:
        server.store.transact(decide)
    except _DryRun:
        pass
    except CommitConflict:  # the store gave up retrying: look at the eviction again, as after a Conflict
        from kctl.apiserver.server import _conflict

        raise _conflict(prepared.rt, name) from None
    return box[0]


def _decide_and_delete(server: APIServer, txn: Transaction, prepared) -> str:
    """Inside the transaction: the checks above, the budget's update, the pod's delete; the revision written."""
    from kctl.apiserver.server import _conflict, now_rfc3339

    ns, name = prepared.namespace, prepared.name
    pod = txn.get("Pod", ns, name)
    if pod is None:
        raise NotFound("pods", name, ns)
    if pod["metadata"]["resourceVersion"] != prepared.expect_rv:
        raise _conflict(prepared.rt, name)  # changed since admission: look again
    now = now_rfc3339()
    if _can_ignore_budget(pod):
        return _delete(server, txn, prepared, pod, now)
    budgets = [b for b in txn.list(PDB_KIND) if disruption.selects(b, pod)]
    if len(budgets) > 1:
        raise APIError(MORE_THAN_ONE)
    if not budgets:
        return _delete(server, txn, prepared, pod, now)
    pdb = budgets[0]
    status = pdb.get("status") or {}
    if not disruption.pod_ready(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        desired = int(status.get("desiredHealthy") or 0)
        if policy == "AlwaysAllow" or (policy == "IfHealthyBudget"
                                       and int(status.get("currentHealthy") or 0) >= desired > 0):
            return _delete(server, txn, prepared, pod, now)
    _check_and_decrement(txn, pdb, name, now)
    return _delete(server, txn, prepared, pod, now)


def _can_ignore_budget(pod: dict) -> bool:
    """canIgnorePDB: finished, Pending, or already being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def _check_and_decrement(txn: Transaction, pdb: dict, pod_name: str, now: str) -> None:
    """checkAndDecrement: refuse (429/403) or take one allowed disruption and record the pod in disruptedPods."""
    meta, status = pdb["metadata"], pdb.get("status") or {}
    pdb_name = meta["name"]
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise _too_many(f"The disruption budget {pdb_name} is still being processed by the server.")
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise Forbidden(f'poddisruptionbudget.policy "{pdb_name}" is forbidden: pdb disruptions allowed is negative')
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise Forbidden(f'poddisruptionbudget.policy "{pdb_name}" is forbidden: DisruptedPods map too big - '
                        f"too many evictions not confirmed by PDB controller")
    if allowed == 0:
        raise _too_many(f"The disruption budget {pdb_name} needs {int(status.get('desiredHealthy') or 0)} healthy "
                        f"pods and has {int(status.get('currentHealthy') or 0)} currently")
    new = copy.deepcopy(pdb)
    new_status = new.setdefault("status", {})
    new_status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        disruption.set_disruption_allowed(new_status, now=now)
    new_status["disruptedPods"] = {**(new_status.get("disruptedPods") or {}), pod_name: now}
    txn.put(PDB_KIND, meta.get("namespace", ""), pdb_name, new, event="MODIFIED")


def _too_many(cause: str) -> TooManyRequests:
    exc = TooManyRequests(VIOLATION)
    exc.causes = [FieldError("", cause)]  # (DisruptionBudget cause; travels with the error over the wire)
    return exc


def _delete(server: APIServer, txn: Transaction, prepared, pod: dict, now: str) -> str:
    """The pod's delete as `delete` commits it, after the DisruptionTarget condition; the revision written."""
    current = pod
    if not pod["metadata"].get("deletionTimestamp"):
        current = copy.deepcopy(pod)
        status = current.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "DisruptionTarget"]
        conditions.append({"type": "DisruptionTarget", "status": "True", "lastTransitionTime": now,
                           "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"})
        status["conditions"] = conditions
        current = txn.put("Pod", prepared.namespace, prepared.name, current, event="MODIFIED")
    result = server._commit_delete(txn, prepared, current)
    return str(result["metadata"].get("resourceVersion", ""))


__all__ = ["MAX_DISRUPTED_PODS", "MORE_THAN_ONE", "VIOLATION", "evict"]
