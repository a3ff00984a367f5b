"""What the HTTPS API serves, kind by kind: verbs, scope, short names, categories and subresources.

One `Catalog` is built from the API's registry (built-in kinds plus the stored CRDs' served
versions) and the CRD objects; discovery (kctl.kubeapi.discovery.groups), OpenAPI (kctl.kubeapi.discovery.openapi)
and Table (kctl.kubeapi.table, for a custom kind's printer columns) read it. `catalog_for(ctx)`
caches it per registry object: the APIServer makes a new registry whenever a CRD changes, so a
CRD created shows up at the next request.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kctl.machinery.conversion import extra_versions
from kctl.machinery.resources import METRICS_GROUP, Registry, ResourceType

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

__all__ = ["Catalog", "ServedResource", "Subresource", "build_catalog", "cached_resource", "catalog_for", "catalog_of",
           "version_sort_key"]

CRUD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
READ_VERBS = ("get", "list")
STATUS_VERBS = ("get", "patch", "update")
#: the kinds Kubernetes puts in the `all` category (`kubectl get all`)
ALL_CATEGORY = frozenset({"Pod", "Service", "Deployment.apps", "ReplicaSet.apps", "DaemonSet.apps",
                          "StatefulSet.apps", "Job.batch", "CronJob.batch",
                          "HorizontalPodAutoscaler.autoscaling", "ReplicationController"})
#: kube-apiserver's group order in /apis (DefaultGenericAPIServicePriorities); other groups follow by name
GROUP_ORDER = ("", "apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
               "authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io",
               "policy", "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io",
               "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io",
               "discovery.k8s.io", "flowcontrol.apiserver.k8s.io")


@dataclass(frozen=True)
class Subresource:
    """`pods/log`, `deployments/scale`: its verbs and the kind it answers with (group "" = the parent's)."""

    name: str
    verbs: tuple[str, ...]
    kind: str
    group: str = ""
    version: str = ""
    same_group: bool = True


@dataclass(frozen=True)
class ServedResource:
    """One resource at one group-version as discovery lists it."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[Subresource, ...] = ()
    #: the registry's type (None for the virtual review kinds, which are never stored)
    rt: ResourceType | None = field(default=None, compare=False)
    #: the CustomResourceDefinition that defines it (custom kinds only)
    crd: dict | None = field(default=None, compare=False, hash=False)
    #: the version objects are stored at, when it is not this one (a version served by conversion)
    storage_version: str = ""

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_version_hash(self) -> str:
        """kube-apiserver's hash of group/version/kind: base64 of sha256's first 8 bytes."""
        digest = hashlib.sha256(f"{self.group}/{self.storage_version or self.version}/{self.kind}".encode()).digest()
        return base64.b64encode(digest[:8]).decode()


#: create-only kinds answered by the authorization layer (kctl.kubeapi.authz.reviews), never stored
VIRTUAL = (
    ("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", False),
    ("authorization.k8s.io", "v1", "LocalSubjectAccessReview", "localsubjectaccessreviews", True),
    ("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", False),
    ("authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", False),
    ("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", False),
)
_SCALE = Subresource("scale", STATUS_VERBS, "Scale", "autoscaling", "v1", same_group=False)
_POD_SUBRESOURCES = (
    Subresource("attach", ("create", "get"), "PodAttachOptions"),
    Subresource("binding", ("create",), "Binding"),
    Subresource("eviction", ("create",), "Eviction", "policy", "v1", same_group=False),
    Subresource("exec", ("create", "get"), "PodExecOptions"),
    Subresource("log", ("get",), "Pod"),
    Subresource("portforward", ("create", "get"), "PodPortForwardOptions"),
)
_EXTRA_SUBRESOURCES: dict[str, tuple[Subresource, ...]] = {
    "Pod": _POD_SUBRESOURCES,
    "Deployment.apps": (_SCALE,),
    "ReplicaSet.apps": (_SCALE,),
    "StatefulSet.apps": (_SCALE,),
    "ServiceAccount": (Subresource("token", ("create",), "TokenRequest", "authentication.k8s.io", "v1",
                                   same_group=False),),
}


@dataclass
class Catalog:
    """Every served resource, and the groups with their versions (preferred first) in /apis order."""

    resources: tuple[ServedResource, ...]
    groups: tuple[tuple[str, tuple[str, ...]], ...]
    #: per-catalog memo of documents built from it (discovery and OpenAPI bodies)
    memo: dict[Any, Any] = field(default_factory=dict, compare=False)
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False)

    def versions(self, group: str) -> tuple[str, ...]:
        """The group's served versions, preferred first (empty when it is not served)."""
        return next((versions for name, versions in self.groups if name == group), ())

    def in_group_version(self, group: str, version: str) -> list[ServedResource]:
        return [r for r in self.resources if r.group == group and r.version == version]

    def find(self, group: str, version: str, kind: str) -> ServedResource | None:
        return next((r for r in self.resources if (r.group, r.version, r.kind) == (group, version, kind)), None)

    def remember(self, key: Any, make: Any) -> Any:
        """make() once per catalog and key (thread-safe enough: a race builds the same value twice)."""
        with self.lock:
            if key in self.memo:
                return self.memo[key]
        value = make()
        with self.lock:
            return self.memo.setdefault(key, value)


_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_sort_key(version: str) -> tuple:
    """Kubernetes' version priority as a sort key (smaller first): v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > other."""
    match = _KUBE_VERSION.match(version)
    if not match:
        return (3, 0, 0, version)
    major, stage, minor = int(match[1]), match[2], int(match[3] or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor, version)


def _group_sort_key(group: str) -> tuple:
    if group in GROUP_ORDER:
        return (0, GROUP_ORDER.index(group), group)
    # CRD groups and kctl's own before metrics.k8s.io, as an APIService's low priority places it
    return (2 if group == METRICS_GROUP else 1, 0, group)


def _builtin_resource(rt: ResourceType) -> ServedResource:
    if rt.group == METRICS_GROUP:
        verbs: tuple[str, ...] = READ_VERBS
    else:
        verbs = CRUD_VERBS
    subresources = list(_EXTRA_SUBRESOURCES.get(rt.group_kind, ()))
    if rt.has_status and rt.group != METRICS_GROUP:
        subresources.append(Subresource("status", STATUS_VERBS, rt.kind))
    return ServedResource(
        group=rt.group, version=rt.version, kind=rt.kind, plural=rt.plural, singular=rt.singular,
        namespaced=rt.namespaced, verbs=verbs, short_names=rt.short_names,
        categories=("all",) if rt.group_kind in ALL_CATEGORY else (),
        subresources=tuple(sorted(subresources, key=lambda s: s.name)), rt=rt)


def _crd_version(crd: dict, version: str) -> dict:
    return next((v for v in (crd.get("spec") or {}).get("versions") or () if v.get("name") == version), {})


def _custom_resource(rt: ResourceType, crd: dict | None) -> ServedResource:
    names = ((crd or {}).get("spec") or {}).get("names") or {}
    subresources = (_crd_version(crd, rt.version).get("subresources") or {}) if crd else {}
    subs = []
    if isinstance(subresources, dict) and subresources.get("scale") is not None:
        subs.append(_SCALE)
    if rt.has_status:
        subs.append(Subresource("status", STATUS_VERBS, rt.kind))
    return ServedResource(
        group=rt.group, version=rt.version, kind=rt.kind, plural=rt.plural,
        singular=str(names.get("singular") or rt.singular), namespaced=rt.namespaced, verbs=CRUD_VERBS,
        short_names=rt.short_names, categories=tuple(names.get("categories") or ()),
        subresources=tuple(subs), rt=rt, crd=crd)


def build_catalog(registry: Registry, crds: list[dict]) -> Catalog:
    """The catalog of a registry; `crds` are the stored CRDs (for categories, singular names, scale, columns)."""
    by_name = {(crd.get("metadata") or {}).get("name"): crd for crd in crds}
    resources: list[ServedResource] = []
    for rt in registry:
        if rt.is_custom:
            resources.append(_custom_resource(rt, by_name.get(f"{rt.plural}.{rt.group}")))
        else:
            resources.append(_builtin_resource(rt))
            for version in extra_versions(rt.group_kind):  # served by conversion (autoscaling/v1's HPA)
                served = _builtin_resource(dataclasses.replace(rt, version=version))
                resources.append(dataclasses.replace(served, storage_version=rt.version))
    for group, version, kind, plural, namespaced in VIRTUAL:
        resources.append(ServedResource(group=group, version=version, kind=kind, plural=plural,
                                        singular=kind.lower(), namespaced=namespaced, verbs=("create",)))
    resources.sort(key=lambda r: (_group_sort_key(r.group), version_sort_key(r.version), r.plural))
    versions: dict[str, list[str]] = {}
    for r in resources:
        if r.version not in versions.setdefault(r.group, []):
            versions[r.group].append(r.version)
    groups = tuple((group, tuple(sorted(vs, key=version_sort_key)))
                   for group, vs in sorted(versions.items(), key=lambda item: _group_sort_key(item[0])))
    return Catalog(resources=tuple(resources), groups=groups)


class _CatalogCache:
    """The newest catalogs, keyed by the registry object they were built from (kept alive, so ids stay unique)."""

    def __init__(self, *, size: int = 3) -> None:
        self._entries: dict[int, tuple[Registry, Catalog]] = {}
        self._lock = threading.Lock()
        self._size = size

    def get(self, registry: Registry) -> Catalog | None:
        with self._lock:
            entry = self._entries.get(id(registry))
        return entry[1] if entry is not None and entry[0] is registry else None

    def put(self, registry: Registry, catalog: Catalog) -> None:
        with self._lock:
            self._entries[id(registry)] = (registry, catalog)
            while len(self._entries) > self._size:
                self._entries.pop(next(iter(self._entries)))


    def resource(self, rt: ResourceType) -> ServedResource | None:
        """The served resource of rt in the newest cached catalog that has it (None: no catalog has it)."""
        with self._lock:
            catalogs = [catalog for _, catalog in reversed(list(self._entries.values()))]
        for catalog in catalogs:
            served = catalog.find(rt.group, rt.version, rt.kind)
            if served is not None and served.rt == rt:
                return served
        return None


_CACHE = _CatalogCache()


def cached_resource(rt: ResourceType) -> ServedResource | None:
    """rt's served resource from a catalog built earlier, without asking the API (None when none has it)."""
    return _CACHE.resource(rt)


def catalog_of(api: API) -> Catalog:
    """The catalog of an API's current registry (blocking: call it in a worker thread)."""
    registry = api.registry
    catalog = _CACHE.get(registry)
    if catalog is None:
        crds: list[dict] = []
        if any(rt.is_custom for rt in registry):
            crds, _ = api.list(api.resource("customresourcedefinitions.apiextensions.k8s.io"))
        catalog = build_catalog(registry, crds)
        _CACHE.put(registry, catalog)
    return catalog


async def catalog_for(ctx: Any) -> Catalog:
    """The catalog for a request (`ctx` = kctl.kubeapi.app.ServerContext)."""
    return await ctx.run(catalog_of, ctx.api)

