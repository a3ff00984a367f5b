"""The node-side deleter of kctl's local volumes: the Podman volume of a released PV goes, then the PV.

A NodeAgent (kctl.agent.agent) runs one `LocalVolumeDeleter` for its host, as it runs the
pod network. It watches PersistentVolumes (its own informer) and, for every PV that

- was provisioned by `kctl.io/local-volume` (annotation `pv.kubernetes.io/provisioned-by`),
- has a node affinity naming this node (`kubernetes.io/hostname In [<node>]`),
- is `Released` (its claim is gone) with `persistentVolumeReclaimPolicy: Delete`,

removes the Podman named volume (its `csi.volumeHandle`, only if labelled `io.kctl.pv=<PV>`)
and then deletes the PV object (the pv-protection controller lets it go, as it is not
Bound). This is the part of Kubernetes' external provisioner's deleter that must run on
the host: the PV controller (kctl.controllers.persistentvolume) leaves such PVs Released
for it. While the host cannot be reached (the heartbeat says so) nothing is tried: the PV
stays Released until the host returns. A failure is logged once and retried.
"""

from __future__ import annotations

import logging
import threading
from kctl.machinery.persistentvolumes import ANN_PROVISIONED_BY, HOSTNAME_LABEL
from typing import TYPE_CHECKING, Callable

from kctl.agent.volumes import LABEL_PV, LOCAL_VOLUME_DRIVER
from kctl.client.informer import Informer
from kctl.machinery.errors import APIError, Conflict, NotFound
from kctl.runtime.interface import RuntimeError_

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.runtime.interface import Runtime

log = logging.getLogger("kctl.agent.localvolumes")

#: a pass every this many seconds even without PV events; sooner after a failure
RESYNC_SECONDS = 30.0
RETRY_SECONDS = 5.0


def volume_node(pv: dict) -> str | None:
    """The one node a PV's required node affinity names by kubernetes.io/hostname In [node], or None."""
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    nodes = {str(v) for term in required.get("nodeSelectorTerms") or () for e in term.get("matchExpressions") or ()
             if e.get("key") == HOSTNAME_LABEL and e.get("operator") == "In" for v in e.get("values") or ()}
    return nodes.pop() if len(nodes) == 1 else None


def to_delete(pv: dict, node_name: str) -> bool:
    """Whether this node's deleter removes the PV (see the module docstring)."""
    meta, spec = pv.get("metadata") or {}, pv.get("spec") or {}
    return ((meta.get("annotations") or {}).get(ANN_PROVISIONED_BY) == LOCAL_VOLUME_DRIVER
            and (spec.get("csi") or {}).get("driver") == LOCAL_VOLUME_DRIVER
            and spec.get("persistentVolumeReclaimPolicy") == "Delete"
            and (pv.get("status") or {}).get("phase") == "Released"
            and volume_node(pv) == node_name)


class LocalVolumeDeleter:
    """Deletes this node's released kctl.io/local-volume PVs and their Podman volumes."""

    def __init__(self, api: API, node_name: str, runtime: Runtime, *, resync: float = RESYNC_SECONDS,
                 paused: Callable[[], bool] = lambda: False) -> None:
        self.api = api
        self.node_name = node_name
        self.runtime = runtime
        self.resync = resync
        self.paused = paused
        self.volumes = Informer(api, "persistentvolumes")
        self.volumes.add_handler(self._on_change, lambda _old, new: self._on_change(new), None)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._informer_thread: threading.Thread | None = None
        self._warned: set[tuple[str, str]] = set()
        self._started = False
        self.deleted: list[str] = []  # PV names deleted by this deleter (tests, logs)

    def start(self) -> None:
        """Watch PVs and delete in a thread of its own until stop()."""
        if self._thread is not None:
            return
        self._stop = threading.Event()
        if self._started:
            self.volumes = Informer(self.api, "persistentvolumes")  # an informer runs once
            self.volumes.add_handler(self._on_change, lambda _old, new: self._on_change(new), None)
        self._started = True
        self._informer_thread = self.volumes.start(self._stop)
        self._thread = threading.Thread(target=self._run, name=f"localvolumes-{self.node_name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        for thread in (self._thread, self._informer_thread):
            if thread is not None:
                thread.join(timeout)
        self._thread = self._informer_thread = None

    def _on_change(self, pv: dict) -> None:
        if to_delete(pv, self.node_name):
            self._wake.set()

    def _run(self) -> None:
        while not self.volumes.wait_for_sync(0.5):
            if self._stop.is_set():
                return
        while not self._stop.is_set():
            self._wake.clear()
            ok = True
            if not self.paused():
                ok = self.reconcile()
            self._wake.wait(self.resync if ok else RETRY_SECONDS)

    def reconcile(self) -> bool:
        """One pass over the cached PVs; False when a deletion failed (retried sooner)."""
        ok = True
        for pv in self.volumes.list():
            if to_delete(pv, self.node_name) and not self._stop.is_set():
                ok = self.delete(pv) and ok
        return ok

    def delete(self, pv: dict) -> bool:
        """Remove the PV's Podman volume, then the PV object; False on a failure."""
        meta = pv.get("metadata") or {}
        name = str(meta.get("name", ""))
        handle = str(((pv.get("spec") or {}).get("csi") or {}).get("volumeHandle") or name)
        try:
            if handle in self.runtime.list_volumes({LABEL_PV: name}):
                self.runtime.remove_volume(handle)
                log.info("node %s: removed the Podman volume %s of released PV %s", self.node_name, handle, name)
        except RuntimeError_ as error:
            self._warn(name, f"cannot remove the Podman volume {handle} of PV {name}: {error}")
            return False
        try:
            self.api.delete(self.api.resource("persistentvolumes"), name,
                            resource_version=meta.get("resourceVersion"))
        except NotFound:
            pass
        except Conflict:
            return False  # changed meanwhile (re-bound, or made again): the next pass looks again
        except APIError as error:
            self._warn(name, f"cannot delete PV {name}: {error}")
            return False
        self.deleted.append(name)
        log.info("node %s: deleted released PV %s (reclaim policy Delete)", self.node_name, name)
        return True

    def _warn(self, name: str, message: str) -> None:
        key = (name, message)
        (log.debug if key in self._warned else log.warning)("node %s: %s", self.node_name, message)
        self._warned.add(key)


__all__ = ["ANN_PROVISIONED_BY", "LocalVolumeDeleter", "to_delete", "volume_node"]
