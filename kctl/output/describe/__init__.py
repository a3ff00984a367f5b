"""`kctl describe`: one object as kubectl describe shows it, with its events.

`describe` looks the object's kind up in `DESCRIBERS` (kind -> describer, `Kind.group` or `Kind`
for the core group, as kctl.output.tables' TABLES); kinds not listed get kubectl's generic
describer (generic.py), which prints the object's fields as indented `Key:  value` lines.
Adding a kind's layout is one describer function (in the module of its group: pods, workloads,
nodes, networking, config) and one `DESCRIBERS` entry. The text is aligned exactly as kubectl's
tabwriter aligns it (writer.py); the sections kinds share (labels, annotations, events ...) are
in sections.py, a pod spec's (containers, volumes, pod template) in podspec.py. A Secret's
values are never printed, only their sizes. Called by the `describe` command (kctl.cli.get),
which fetches the object, its events, and (for a Deployment) its ReplicaSets, (for a Service)
its EndpointSlices; `rollout history --revision` (kctl.cli.rollout) uses describe_pod_template.
"""

from __future__ import annotations

from datetime import datetime, timezone

from kctl.machinery.resources import ResourceType
from kctl.output.describe.autoscaling import describe_hpa
from kctl.output.describe.config import describe_configmap, describe_secret
from kctl.output.describe.context import Context, Describer
from kctl.output.describe.disruption import describe_pdb
from kctl.output.describe.generic import describe_generic, smart_label
from kctl.output.describe.networking import describe_service
from kctl.output.describe.networkpolicy import describe_network_policy
from kctl.output.describe.nodes import describe_node
from kctl.output.describe.podspec import describe_pod_template
from kctl.output.describe.pods import describe_pod
from kctl.output.describe.policy import describe_limit_range, describe_priority_class, describe_quota
from kctl.output.describe.rbac import describe_binding, describe_role
from kctl.output.describe.sections import rfc1123z
from kctl.output.describe.statefulset import describe_statefulset
from kctl.output.describe.storage import (describe_persistent_volume, describe_persistent_volume_claim,
                                            describe_storage_class)
from kctl.output.describe.workloads import describe_deployment
from kctl.output.describe.writer import PrefixWriter, tabwrite

__all__ = ["DESCRIBERS", "PrefixWriter", "describe", "describe_pod_template", "rfc1123z", "smart_label",
           "tabwrite"]

#: kind (`Kind.group`, `Kind` for the core group) -> its layout; other kinds use describe_generic
DESCRIBERS: dict[str, Describer] = {
    "Pod": describe_pod,
    "Deployment.apps": describe_deployment,
    "StatefulSet.apps": describe_statefulset,
    "HorizontalPodAutoscaler.autoscaling": describe_hpa,
    "Node": describe_node,
    "Secret": describe_secret,
    "ConfigMap": describe_configmap,
    "Service": describe_service,
    "NetworkPolicy.networking.k8s.io": describe_network_policy,
    "PodDisruptionBudget.policy": describe_pdb,
    "ResourceQuota": describe_quota,
    "LimitRange": describe_limit_range,
    "PriorityClass.scheduling.k8s.io": describe_priority_class,
    "PersistentVolume": describe_persistent_volume,
    "PersistentVolumeClaim": describe_persistent_volume_claim,
    "StorageClass.storage.k8s.io": describe_storage_class,
    "Role.rbac.authorization.k8s.io": describe_role,
    "ClusterRole.rbac.authorization.k8s.io": describe_role,
    "RoleBinding.rbac.authorization.k8s.io": describe_binding,
    "ClusterRoleBinding.rbac.authorization.k8s.io": describe_binding,
}


def describe(obj: dict, rt: ResourceType, events: list[dict], *, now: datetime | None = None,
             replica_sets: list[dict] | None = None, endpoint_slices: list[dict] | None = None,
             pods: list[dict] | None = None) -> str:
    """kubectl describe's text for `obj` (ends with a newline).

    events: the events whose involvedObject is `obj` (any order; sorted here).
    replica_sets: for a Deployment, the ReplicaSets in its namespace (those it controls
    are picked out to print OldReplicaSets/NewReplicaSet); None omits those lines.
    endpoint_slices: for a Service, its EndpointSlices (label kubernetes.io/service-name),
    for the `Endpoints:` line of each port; None prints `<none>` there.
    pods: for a StatefulSet, the pods of its namespace (those it controls are counted); for a
    PersistentVolumeClaim, its namespace's pods (`Used By:` names those that use it).
    """
    if now is None:
        now = datetime.now(timezone.utc)
    ctx = Context(now=now if now.tzinfo else now.replace(tzinfo=timezone.utc),
                  events=list(events or ()), replica_sets=replica_sets,
                  endpoint_slices=list(endpoint_slices or ()), pods=pods)
    w = PrefixWriter()
    DESCRIBERS.get(rt.group_kind, describe_generic)(w, obj, ctx)
    return w.text()
