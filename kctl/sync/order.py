"""The order a source's objects are applied in, and the reverse order they are pruned in.

Called by the git-source reconciler. Like Flux and Helm: what other objects need comes
first -- Namespaces, CustomResourceDefinitions, kctl's admission hooks, service accounts
and roles, then ConfigMaps, Secrets and volume claims, Services, then workloads -- and
custom resources and every kind not named here last. The sort is stable: objects of one
rank keep the order they were rendered in. Pruning deletes in the reverse order, so that
workloads go before the ConfigMaps they mount and Namespaces go last.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kctl.sync.render import Rendered

__all__ = ["KIND_ORDER", "apply_order", "kind_rank", "prune_order"]

KIND_ORDER: tuple[tuple[str | None, str], ...] = (
    ("", "Namespace"),
    ("", "ResourceQuota"),
    ("", "LimitRange"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("kctl.io", "MutatingAdmissionHook"),
    ("kctl.io", "ValidatingAdmissionHook"),
    ("", "ServiceAccount"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("", "ConfigMap"),
    ("", "Secret"),
    ("storage.k8s.io", "StorageClass"),
    ("", "PersistentVolume"),
    ("", "PersistentVolumeClaim"),
    ("", "Service"),
    ("", "Endpoints"),
    ("apps", "DaemonSet"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("", "Pod"),
)
"""(API group, kind) in apply order; anything else ranks after all of these."""

_RANK = {entry: rank for rank, entry in enumerate(KIND_ORDER)}
_LAST = len(KIND_ORDER)


def kind_rank(api_version: str, kind: str) -> int:
    """The position of a kind in KIND_ORDER (len(KIND_ORDER) for every other kind)."""
    group = api_version.rpartition("/")[0] if "/" in (api_version or "") else ""
    return _RANK.get((group, kind), _LAST)


def apply_order(items: list[Rendered]) -> list[Rendered]:
    """`items` sorted for applying (a new list; stable within a kind's rank)."""
    return sorted(items, key=lambda item: kind_rank(item.obj.get("apiVersion", ""), item.obj.get("kind", "")))


def prune_order(refs: list[dict]) -> list[dict]:
    """Object references ({apiVersion, kind, namespace, name}) sorted for deleting: the
    reverse of the apply order (a new list; stable within a kind's rank)."""
    return sorted(refs, key=lambda ref: -kind_rank(ref.get("apiVersion", ""), ref.get("kind", "")))
