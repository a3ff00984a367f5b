"""Kubernetes' built-in admission plugins that read other objects, one plugin per module.

kube-apiserver runs admission plugins beside webhooks: some mutate a new object from
what is stored (LimitRanger fills a container's defaults from the namespace's
LimitRanges, Priority resolves `priorityClassName`, DefaultStorageClass names the default
class on a claim, StorageObjectInUseProtection adds the protection finalizers), some only
validate (ResourceQuota refuses what would exceed `spec.hard`). kctl.admission.chain calls
`mutate` after defaulting and before the mutating hooks, and `validate` after schema
validation and Pod Security; ResourceQuota last, after the validating hooks, as in
Kubernetes.

A plugin is a module with a `PLUGIN` (an AdmissionPlugin): its name (Kubernetes'), the
kinds it looks at, and `mutate(attrs, lister)` and/or `validate(attrs, lister)`. The API
layer (kctl.apiserver.server) hands in a Lister that reads stored objects by group kind
(`"Pod"`, `"StorageClass.storage.k8s.io"`) and namespace; plugins never write.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Protocol

from kctl.machinery.resources import ResourceType


class Lister(Protocol):
    """Stored objects of one group kind, in one namespace or (None) all."""

    def __call__(self, group_kind: str, namespace: str | None = None) -> list[dict]: ...


@dataclass(frozen=True)
class Attributes:
    """One request as a plugin sees it (kube-apiserver's admission.Attributes)."""

    operation: str            # CREATE, UPDATE or DELETE
    rt: ResourceType
    namespace: str | None
    name: str
    obj: dict | None          # the object to store (plugins' own copy; mutate may change it); None on DELETE
    old_obj: dict | None      # the stored object on UPDATE and DELETE
    subresource: str | None = None
    dry_run: bool = False


Mutate = Callable[[Attributes, Lister], None]
Validate = Callable[[Attributes, Lister], None]   # raises kctl.machinery.errors.Forbidden / Invalid


@dataclass(frozen=True)
class AdmissionPlugin:
    """One built-in plugin: `mutate` changes attrs.obj in place; `validate` raises to refuse."""

    name: str
    kinds: frozenset[str] = field(default_factory=frozenset)  # group kinds it looks at; empty = all
    mutate: Mutate | None = None
    validate: Validate | None = None
    #: runs after the validating hooks (ResourceQuota), not before them
    last: bool = False

    def handles(self, rt: ResourceType) -> bool:
        return not self.kinds or rt.group_kind in self.kinds


@functools.cache
def builtin_plugins() -> tuple[AdmissionPlugin, ...]:
    """The enabled plugins, in kube-apiserver's recommended order; each module defines PLUGIN."""
    import importlib

    modules = (
        "limitranger",                    # LimitRanger
        "serviceaccount",                 # ServiceAccount
        "priority",                       # Priority
        "defaultstorageclass",            # DefaultStorageClass
        "storageobjectinuseprotection",   # StorageObjectInUseProtection
        "storagevalidation",              # claim/volume/class checks + PersistentVolumeClaimResize
        "resourcequota",                  # ResourceQuota (last=True: after the validating hooks)
    )
    return tuple(importlib.import_module(f"{__name__}.{module}").PLUGIN for module in modules)


def per_request(lister: Lister) -> Lister:
    """`lister` remembering what it listed: the chain wraps its Lister in one per request, so plugins that
    read the same objects (LimitRanger's mutate and validate, ...) list them once."""
    seen: dict[tuple[str, str | None], list[dict]] = {}

    def cached(group_kind: str, namespace: str | None = None) -> list[dict]:
        key = (group_kind, namespace)
        if key not in seen:
            seen[key] = lister(group_kind, namespace)
        return seen[key]

    return cached


def run_mutating(attrs: Attributes, lister: Lister) -> None:
    """Every plugin's `mutate` that handles the kind, in order (they change attrs.obj)."""
    for plugin in builtin_plugins():
        if plugin.mutate is not None and plugin.handles(attrs.rt):
            plugin.mutate(attrs, lister)


def run_validating(attrs: Attributes, lister: Lister, *, last: bool) -> None:
    """Every plugin's `validate` that handles the kind: those before the hooks, or (last) after them."""
    for plugin in builtin_plugins():
        if plugin.validate is not None and plugin.last == last and plugin.handles(attrs.rt):
            plugin.validate(attrs, lister)


__all__ = ["AdmissionPlugin", "Attributes", "Lister", "builtin_plugins", "per_request", "run_mutating",
           "run_validating"]
