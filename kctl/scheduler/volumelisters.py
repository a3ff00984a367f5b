"""What the scheduler's volume plugins read: PersistentVolumeClaims, PersistentVolumes, StorageClasses.

kube-scheduler's VolumeBinding and VolumeRestrictions plugins read these through listers
(informer caches). kctl.scheduler.plugins.volume_binding and volume_restrictions get theirs
from `listers_for(handle)`:

- with the scheduler's InformerFactory (`Handle.informers`): the shared informers' caches;
  an informer that has not listed yet (a scheduler driven by hand in tests, or just
  starting) is read through the API instead, so a claim that exists is never "not found";
- with only an API: straight API reads;
- with neither (plugin unit tests): `ObjectListers` over the objects given.

Objects handed out are shared with the informer caches: never change one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Protocol

from kctl.machinery.errors import NotFound

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.client.informer import InformerFactory
    from kctl.scheduler.framework import Handle

CLAIMS, VOLUMES, CLASSES = "persistentvolumeclaims", "persistentvolumes", "storageclasses"


class VolumeListers(Protocol):
    """Reads of the storage objects (None: there is no such object)."""

    def claim(self, namespace: str, name: str) -> dict | None: ...

    def volume(self, name: str) -> dict | None: ...

    def volumes(self) -> list[dict]: ...

    def storage_class(self, name: str) -> dict | None: ...


class ObjectListers:
    """Listers over fixed objects (tests; a scheduler with no API at all)."""

    def __init__(self, objects: Iterable[dict] = ()) -> None:
        self._by_kind: dict[str, dict[tuple[str, str], dict]] = {}
        for obj in objects:
            self.put(obj)

    def put(self, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        self._by_kind.setdefault(str(obj.get("kind")), {})[(meta.get("namespace") or "", meta.get("name", ""))] = obj

    def claim(self, namespace: str, name: str) -> dict | None:
        return self._by_kind.get("PersistentVolumeClaim", {}).get((namespace, name))

    def volume(self, name: str) -> dict | None:
        return self._by_kind.get("PersistentVolume", {}).get(("", name))

    def volumes(self) -> list[dict]:
        return list(self._by_kind.get("PersistentVolume", {}).values())

    def storage_class(self, name: str) -> dict | None:
        return self._by_kind.get("StorageClass", {}).get(("", name))


class APIListers:
    """Listers reading the API on every call."""

    def __init__(self, api: API) -> None:
        self.api = api

    def _get(self, resource: str, name: str, namespace: str | None = None) -> dict | None:
        try:
            return self.api.get(self.api.resource(resource), name, namespace=namespace)
        except NotFound:
            return None

    def claim(self, namespace: str, name: str) -> dict | None:
        return self._get(CLAIMS, name, namespace)

    def volume(self, name: str) -> dict | None:
        return self._get(VOLUMES, name)

    def volumes(self) -> list[dict]:
        return self.api.list(self.api.resource(VOLUMES))[0]

    def storage_class(self, name: str) -> dict | None:
        return self._get(CLASSES, name)


class InformerListers:
    """Listers over the scheduler's shared informers (the API until an informer has listed)."""

    def __init__(self, informers: InformerFactory) -> None:
        self._claims = informers.informer(CLAIMS)
        self._volumes = informers.informer(VOLUMES)
        self._classes = informers.informer(CLASSES)
        self._api = APIListers(informers.api)

    def claim(self, namespace: str, name: str) -> dict | None:
        if self._claims.has_synced():
            return self._claims.get(namespace, name)
        return self._api.claim(namespace, name)

    def volume(self, name: str) -> dict | None:
        if self._volumes.has_synced():
            return self._volumes.get(None, name)
        return self._api.volume(name)

    def volumes(self) -> list[dict]:
        if self._volumes.has_synced():
            return self._volumes.list()
        return self._api.volumes()

    def storage_class(self, name: str) -> dict | None:
        if self._classes.has_synced():
            return self._classes.get(None, name)
        return self._api.storage_class(name)


def listers_for(handle: Handle) -> VolumeListers:
    """The listers a volume plugin built with `handle` reads (see the module docstring)."""
    if handle.informers is not None:
        return InformerListers(handle.informers)
    if handle.api is not None:
        return APIListers(handle.api)
    return ObjectListers()


def claim_names(pod: dict) -> list[str]:
    """The claimName of each persistentVolumeClaim volume of a pod, in order."""
    names = []
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        source = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
        if isinstance(source, dict) and source.get("claimName"):
            names.append(str(source["claimName"]))
    return names


__all__ = ["APIListers", "InformerListers", "ObjectListers", "VolumeListers", "claim_names", "listers_for"]
