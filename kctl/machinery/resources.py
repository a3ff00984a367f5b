"""The kinds kctl serves: built-in ones and those that CustomResourceDefinitions add.

Everything that turns a user's word ("deploy", "pods", "Deployment.apps") or an object's
apiVersion/kind into a ResourceType goes through here: the API layer, admission, the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from kctl.machinery.errors import ClientSideError


@dataclass(frozen=True)
class ResourceType:
    """One kind at one API version, and how it is named and scoped."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    #: a CRD's kind carries its openAPIV3Schema here; built-ins use schemas/.
    crd_schema: dict | None = field(default=None, compare=False, hash=False)
    has_status: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def group_kind(self) -> str:
        """The store's key for the kind: `Deployment.apps`, `Pod` (version-free)."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def group_resource(self) -> str:
        """kubectl's name in messages: `deployments.apps`, `pods`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def is_custom(self) -> bool:
        return self.crd_schema is not None

    @property
    def schema_name(self) -> str:
        """File name of the kind's JSON Schema in schemas/ (pod-v1.json, deployment-apps-v1.json)."""
        parts = [self.kind.lower()]
        if self.group:
            parts.append(self.group.split(".")[0] if self.group.endswith(".k8s.io") else self.group)
        parts.append(self.version)
        return "-".join(parts) + ".json"


def _rt(group: str, version: str, kind: str, plural: str, namespaced: bool, *short: str,
        has_status: bool = True) -> ResourceType:
    return ResourceType(group, version, kind, plural, namespaced, tuple(short), has_status=has_status)


KCTL_GROUP = "kctl.io"
#: metrics-server's API group (PodMetrics, NodeMetrics): schemas hand-written in schemas/, as kctl.io's
METRICS_GROUP = "metrics.k8s.io"

BUILTIN: tuple[ResourceType, ...] = (
    _rt("", "v1", "Namespace", "namespaces", False, "ns"),
    _rt("", "v1", "Node", "nodes", False, "no"),
    _rt("", "v1", "Pod", "pods", True, "po"),
    _rt("", "v1", "Service", "services", True, "svc"),
    _rt("", "v1", "Endpoints", "endpoints", True, "ep", has_status=False),
    _rt("", "v1", "ConfigMap", "configmaps", True, "cm", has_status=False),
    _rt("", "v1", "Secret", "secrets", True, has_status=False),
    _rt("", "v1", "Event", "events", True, "ev", has_status=False),
    _rt("apps", "v1", "Deployment", "deployments", True, "deploy"),
    _rt("apps", "v1", "ReplicaSet", "replicasets", True, "rs"),
    _rt("apps", "v1", "DaemonSet", "daemonsets", True, "ds"),
    _rt("batch", "v1", "Job", "jobs", True),
    _rt("batch", "v1", "CronJob", "cronjobs", True, "cj"),
    _rt("coordination.k8s.io", "v1", "Lease", "leases", True, has_status=False),
    _rt("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", True, has_status=False),
    _rt("networking.k8s.io", "v1", "ServiceCIDR", "servicecidrs", False),
    _rt("networking.k8s.io", "v1", "IPAddress", "ipaddresses", False, "ip", has_status=False),
    # Stored, shown and deleted; kctl does not act on them yet (docs/kinds.md says what each would do).
    _rt("", "v1", "ServiceAccount", "serviceaccounts", True, "sa", has_status=False),
    _rt("", "v1", "ResourceQuota", "resourcequotas", True, "quota"),
    _rt("", "v1", "LimitRange", "limitranges", True, "limits", has_status=False),
    _rt("rbac.authorization.k8s.io", "v1", "Role", "roles", True, has_status=False),
    _rt("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True, has_status=False),
    _rt("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False, has_status=False),
    _rt("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False, has_status=False),
    _rt("networking.k8s.io", "v1", "Ingress", "ingresses", True, "ing"),
    _rt("networking.k8s.io", "v1", "IngressClass", "ingressclasses", False, has_status=False),
    _rt("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True, "netpol", has_status=False),
    _rt("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, "pdb"),
    # State, scaling and priority (issue 15).
    _rt("apps", "v1", "StatefulSet", "statefulsets", True, "sts"),
    _rt("apps", "v1", "ControllerRevision", "controllerrevisions", True, has_status=False),
    _rt("", "v1", "PersistentVolume", "persistentvolumes", False, "pv"),
    _rt("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, "pvc"),
    _rt("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, "sc", has_status=False),
    _rt("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True, "hpa"),
    _rt("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, "pc", has_status=False),
    # Resource usage as metrics-server serves it (written by the node agents' scrapers: kctl.agent.metrics).
    # Their plurals are "pods" and "nodes", as Kubernetes': `lookup` prefers the core kinds for those names.
    _rt(METRICS_GROUP, "v1beta1", "PodMetrics", "pods", True, has_status=False),
    _rt(METRICS_GROUP, "v1beta1", "NodeMetrics", "nodes", False, has_status=False),
    _rt("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False,
        "crd", "crds"),
    _rt(KCTL_GROUP, "v1alpha1", "MutatingAdmissionHook", "mutatingadmissionhooks", False, "mhook",
        has_status=False),
    _rt(KCTL_GROUP, "v1alpha1", "ValidatingAdmissionHook", "validatingadmissionhooks", False, "vhook",
        has_status=False),
    _rt(KCTL_GROUP, "v1alpha1", "GitSource", "gitsources", True, "gs"),
)


class Registry:
    """Lookup of ResourceTypes by apiVersion+kind or by any name kubectl accepts.

    An apiVersion a built-in kind is served at by conversion (kctl.machinery.conversion:
    autoscaling/v1 HorizontalPodAutoscaler) names the stored kind's ResourceType: whoever
    writes such an object converts it first (`conversion.to_storage`).
    """

    def __init__(self, types: Iterable[ResourceType] = BUILTIN) -> None:
        self._types: list[ResourceType] = []
        self._by_gvk: dict[tuple[str, str], ResourceType] = {}
        self._by_name: dict[str, list[ResourceType]] = {}
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        from kctl.machinery.conversion import extra_versions

        self._types.append(rt)
        self._by_gvk[(rt.api_version, rt.kind)] = rt
        if not rt.is_custom:  # versions served by conversion (autoscaling/v1 HPA) name the stored kind
            for version in extra_versions(rt.group_kind):
                self._by_gvk.setdefault((f"{rt.group}/{version}" if rt.group else version, rt.kind), rt)
        for name in {rt.plural, rt.singular, rt.kind.lower(), *rt.short_names}:
            self._by_name.setdefault(name, []).append(rt)
            if rt.group:
                self._by_name.setdefault(f"{name}.{rt.group}", []).append(rt)

    def __iter__(self):
        return iter(self._types)

    def for_object(self, obj: dict) -> ResourceType:
        """The type named by an object's apiVersion and kind; ClientSideError (a BadRequest) if kctl has none."""
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ClientSideError("kind: Required value: every object needs a kind")
        if not isinstance(api_version, str) or not api_version:
            raise ClientSideError("apiVersion: Required value: every object needs an apiVersion")
        rt = self._by_gvk.get((api_version, kind))
        if rt is None:
            raise ClientSideError(f'no matches for kind "{kind}" in version "{api_version}"')
        return rt

    def served_versions(self, rt: ResourceType) -> tuple[str, ...]:
        """The versions rt's kind is served at: its stored one first, then those served by conversion."""
        from kctl.machinery.conversion import extra_versions

        return (rt.version,) + (() if rt.is_custom else extra_versions(rt.group_kind))

    def by_group_kind(self, group_kind: str) -> ResourceType | None:
        return next((rt for rt in self._types if rt.group_kind == group_kind), None)

    def lookup(self, name: str) -> ResourceType:
        """kubectl's resource argument: plural, singular, short name or Kind, optionally `.group`.

        A name several kinds answer to (`pods`: Pod and PodMetrics.metrics.k8s.io; a CRD's plural
        that a built-in has) means, as kubectl's RESTMapper priority orders them, the core
        (legacy) group's kind, then a built-in kind, then the one registered first.
        """
        key = name.lower()
        found = self._by_name.get(key) or self._by_name.get(key.split("/")[0])
        if not found:
            raise ClientSideError(f'the server doesn\'t have a resource type "{name}"')
        return found[0] if len(found) == 1 else min(found, key=_lookup_priority)


def _lookup_priority(rt: ResourceType) -> tuple[bool, bool]:
    """Sort key of kinds sharing a name: the core group first, then built-ins (min() keeps registration order)."""
    return rt.group != "", rt.is_custom


def builtin_registry() -> Registry:
    return Registry(BUILTIN)
