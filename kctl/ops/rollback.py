"""Rolling a Deployment or StatefulSet back to an earlier revision: kubectl's `rollout undo` (and what `history` reads).

A Deployment's revisions are the ReplicaSets it owns, numbered by their
`deployment.kubernetes.io/revision` annotation. `rollback` finds the revision to go back to
(`undo_target`), copies its pod template (without pod-template-hash) and annotations into the
Deployment (`rolled_back`) and writes it, re-reading on a Conflict, as kubectl's
DeploymentRollbacker does. A StatefulSet's revisions are the ControllerRevisions it controls
(`owned_revisions`, numbered by their `revision`); `rollback_statefulset` puts one's pod template
back (kubectl's StatefulSetRollbacker). Called by kctl.cli.rollout; the API is passed in, nothing prints.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.client.retry import retry_on_conflict

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.machinery.resources import ResourceType

REVISION = "deployment.kubernetes.io/revision"
HASH_LABEL = "pod-template-hash"
#: Deployment annotations undo keeps rather than taking the ReplicaSet's (kubectl's annotationsToSkip)
UNDO_KEEPS = ("kubectl.kubernetes.io/last-applied-configuration", REVISION,
              "deployment.kubernetes.io/revision-history", "deployment.kubernetes.io/desired-replicas",
              "deployment.kubernetes.io/max-replicas", "deprecated.deployment.rollback.to")
#: how many times a write that hit a Conflict is tried again on a fresh read
ATTEMPTS = 5


class RollbackError(ValueError):
    """The Deployment cannot be rolled back (paused, or no such revision); the message is kubectl's."""


@dataclass(frozen=True)
class RollbackResult:
    """What `rollback` did: rolled back, or skipped because the template already matched `revision`."""

    rolled_back: bool
    revision: int


def revision_of(obj: dict) -> int:
    """An object's `deployment.kubernetes.io/revision` (0 when it has none or it is not a number)."""
    try:
        return int(((obj.get("metadata") or {}).get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def owned_replica_sets(server: API, deployment: dict) -> list[dict]:
    """The ReplicaSets whose controller is `deployment` (by uid), oldest revision first."""
    meta = deployment["metadata"]
    sets, _ = server.list(server.resource("replicasets"), namespace=meta.get("namespace") or "default")
    owned = [rs for rs in sets
             if any(ref.get("controller") and ref.get("uid") == meta.get("uid")
                    for ref in rs["metadata"].get("ownerReferences") or ())]
    return sorted(owned, key=revision_of)


def without_hash(template: dict) -> dict:
    """A copy of a pod template without the pod-template-hash label."""
    template = copy.deepcopy(template)
    labels = (template.get("metadata") or {}).get("labels")
    if labels is not None:
        labels.pop(HASH_LABEL, None)
        if not labels:
            template["metadata"].pop("labels")
    return template


def undo_target(deployment: dict, sets: list[dict], to_revision: int) -> dict:
    """kubectl's deploymentRevision: the ReplicaSet of `to_revision`, or (0) the one before the latest."""
    if to_revision < 0:
        raise RollbackError(f"unable to find specified revision {to_revision} in history")
    revisions = sorted(((revision_of(rs), rs) for rs in sets if revision_of(rs) > 0), key=lambda p: p[0])
    if to_revision > 0:
        for rev, rs in revisions:
            if rev == to_revision:
                return rs
        raise RollbackError(f"unable to find specified revision {to_revision} in history")
    if len(revisions) < 2:
        raise RollbackError(f'no rollout history found for deployment "{deployment["metadata"]["name"]}"')
    return revisions[-2][1]


def rolled_back(deployment: dict, rs: dict) -> dict:
    """The Deployment with `rs`'s pod template (minus pod-template-hash) and annotations."""
    new = copy.deepcopy(deployment)
    new["spec"]["template"] = without_hash((rs.get("spec") or {}).get("template") or {})
    current = deployment["metadata"].get("annotations") or {}
    annotations = {k: current[k] for k in UNDO_KEEPS if k in current}
    annotations.update({k: v for k, v in (rs["metadata"].get("annotations") or {}).items() if k not in UNDO_KEEPS})
    if annotations:
        new["metadata"]["annotations"] = annotations
    else:
        new["metadata"].pop("annotations", None)
    return new


def rollback(server: API, rt: ResourceType, deployment: dict, *, to_revision: int = 0, dry_run: str | None = None
             ) -> RollbackResult:
    """Roll `deployment` back to `to_revision` (0: the previous one); RollbackError when it cannot.

    `dry_run` is kubectl's: "client" writes nothing, "server" sends a dry-run update.
    A Conflict re-reads the Deployment and decides again (kctl.client.retry.retry_on_conflict,
    ATTEMPTS in all); the last Conflict is raised.
    """
    first = True

    def attempt() -> RollbackResult:
        nonlocal first
        obj = deployment
        if not first:
            obj = server.get(rt, deployment["metadata"]["name"], namespace=deployment["metadata"].get("namespace"))
        first = False
        if (obj.get("spec") or {}).get("paused"):
            raise RollbackError("you cannot rollback a paused deployment; resume it first with "
                                "'kctl rollout resume' and try again")
        rs = undo_target(obj, owned_replica_sets(server, obj), to_revision)
        if without_hash(rs["spec"]["template"]) == without_hash(obj["spec"]["template"]):
            return RollbackResult(False, revision_of(rs))
        if dry_run != "client":
            server.update(rolled_back(obj, rs), dry_run=dry_run not in (None, "none"))
        return RollbackResult(True, revision_of(rs))

    return retry_on_conflict(attempt, attempts=ATTEMPTS)


# -- StatefulSets: revisions are ControllerRevisions ------------------------------------------

def owned_revisions(server: API, owner: dict) -> list[dict]:
    """The ControllerRevisions whose controller is `owner` (by uid), lowest revision first."""
    from kctl.controllers.statefulset.revisions import sort_revisions

    meta = owner["metadata"]
    revisions, _ = server.list(server.resource("controllerrevisions"), namespace=meta.get("namespace") or "default")
    owned = [r for r in revisions
             if any(ref.get("controller") and ref.get("uid") == meta.get("uid")
                    for ref in r["metadata"].get("ownerReferences") or ())]
    return sort_revisions(owned)


def revision_target(revisions: list[dict], to_revision: int) -> dict:
    """kubectl's findHistory: the revision numbered `to_revision`, or (0) the one before the latest."""
    from kctl.controllers.statefulset.revisions import number, sort_revisions

    if to_revision < 0:
        raise RollbackError(f"unable to find specified revision {to_revision} in history")
    if len(revisions) <= 1:
        raise RollbackError("no last revision to roll back to")
    if to_revision == 0:
        return sort_revisions(revisions)[-2]
    for revision in revisions:
        if number(revision) == to_revision:
            return revision
    raise RollbackError(f"unable to find specified revision {to_revision} in history")


def rollback_statefulset(server: API, rt: ResourceType, sts: dict, *, to_revision: int = 0,
                         dry_run: str | None = None) -> RollbackResult:
    """kubectl's StatefulSetRollbacker: put a ControllerRevision's pod template back into the set.

    RollbackResult.revision is the revision rolled back to; `rolled_back` is False when the
    set's template already is that revision's. A Conflict re-reads the set and decides again.
    """
    from kctl.controllers.statefulset.revisions import number, template_of_revision

    first = True

    def attempt() -> RollbackResult:
        nonlocal first
        obj = sts
        if not first:
            obj = server.get(rt, sts["metadata"]["name"], namespace=sts["metadata"].get("namespace"))
        first = False
        target = revision_target(owned_revisions(server, obj), to_revision)
        template = template_of_revision(target)
        if template == (obj.get("spec") or {}).get("template"):
            return RollbackResult(False, number(target))
        if dry_run != "client":
            new = copy.deepcopy(obj)
            new.setdefault("spec", {})["template"] = template
            server.update(new, dry_run=dry_run not in (None, "none"))
        return RollbackResult(True, number(target))

    return retry_on_conflict(attempt, attempts=ATTEMPTS)
