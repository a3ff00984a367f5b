"""The scale subresource of a workload, client-side: client-go's scale client (k8s.io/client-go/scale).

Kubernetes serves `deployments/scale`, `replicasets/scale` and `statefulsets/scale` as an
autoscaling/v1 `Scale`: the parent's name, namespace, uid and resourceVersion, `spec.replicas`
and `status.replicas` and `status.selector` (the parent's label selector as a string). A
writer updates only `spec.replicas`, with the Scale's resourceVersion as a precondition.

kctl's API has no subresource read, so `get_scale` builds the Scale from the parent object
(exactly what the subresource returns) and `update_scale` writes the parent's spec.replicas by a
merge patch pinned to the Scale's resourceVersion: a Scale read before someone else changed the
object conflicts (Conflict), as a stale scale update does in Kubernetes, and nothing but
spec.replicas is touched. Used by the HorizontalPodAutoscaler controller
(kctl/controllers/podautoscaler) and `kctl autoscale` (which only checks that a kind is scalable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.machinery.errors import BadRequest
from kctl.machinery.selectors import from_label_selector_object

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.machinery.resources import ResourceType

#: the kinds that have a scale subresource (Kubernetes' built-ins kctl serves)
SCALABLE_KINDS: tuple[str, ...] = ("Deployment.apps", "ReplicaSet.apps", "StatefulSet.apps")


class NotScalable(BadRequest):
    """The kind has no scale subresource (`could not find scale subresource for apps/v1, Resource=daemonsets`)."""


def is_scalable(rt: ResourceType) -> bool:
    """Whether objects of rt have a scale subresource."""
    return rt.group_kind in SCALABLE_KINDS


def check_scalable(rt: ResourceType) -> None:
    """NotScalable, worded as Kubernetes' discovery scale kind resolver, when rt has no scale subresource."""
    if not is_scalable(rt):
        raise NotScalable(f"could not find scale subresource for {rt.api_version}, Resource={rt.plural} "
                          "in discovery information")


def scale_of(obj: dict) -> dict:
    """The autoscaling/v1 Scale the scale subresource returns for a scalable object."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    selector = spec.get("selector")
    try:
        text = str(from_label_selector_object(selector)) if selector is not None else ""
    except Exception:  # noqa: BLE001 - an invalid stored selector: the Scale shows none, as a nil one
        text = ""
    scale_meta = {key: meta[key] for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                  if meta.get(key) is not None}
    scale_status: dict = {"replicas": int(status.get("replicas") or 0)}
    if text:
        scale_status["selector"] = text
    return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": scale_meta,
            "spec": {"replicas": int(spec.get("replicas", 1))}, "status": scale_status}


def get_scale(api: API, rt: ResourceType, name: str, *, namespace: str | None = None) -> dict:
    """GET .../{plural}/{name}/scale: the object's Scale; NotFound when absent, NotScalable for other kinds."""
    check_scalable(rt)
    return scale_of(api.get(rt, name, namespace=namespace))


def update_scale(api: API, rt: ResourceType, scale: dict, *, dry_run: bool = False) -> dict:
    """PUT .../{plural}/{name}/scale: write scale.spec.replicas; Conflict when the Scale's resourceVersion is stale.

    Returns the new Scale. Only spec.replicas changes (a merge patch), and admission sees
    an UPDATE of the parent, as the scale subresource's update does.
    """
    check_scalable(rt)
    meta = scale.get("metadata") or {}
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise BadRequest(f"Scale.spec.replicas must be a whole number >= 0, not {replicas!r}")
    patch: dict = {"spec": {"replicas": replicas}}
    if meta.get("resourceVersion"):
        patch["metadata"] = {"resourceVersion": str(meta["resourceVersion"])}
    updated = api.patch(rt, meta["name"], patch, patch_type="merge", namespace=meta.get("namespace"),
                        dry_run=dry_run)
    return scale_of(updated)


__all__ = ["NotScalable", "SCALABLE_KINDS", "check_scalable", "get_scale", "is_scalable", "scale_of",
           "update_scale"]
