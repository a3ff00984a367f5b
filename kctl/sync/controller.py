"""The GitSource controller: `kctl daemon` keeps every GitSource in sync, each at its interval.

Run by the controller manager (kctl/controllers/manager.py; wired in
kctl/daemon/controlplane.py). It watches GitSources through a shared informer and
queues a source's key ("namespace/name") when it appears, when its spec (generation),
finalizers or deletion change, and when a source it depends on changes its Ready
condition. `reconcile(key)` re-reads the source from the cache (not found is success),
leaves a suspended source alone (`kctl sync --once` stores its sources suspended) except
to finish its deletion, and otherwise calls kctl.sync.reconcile.reconcile: the same
function `kctl sync` runs. The key comes back after spec.interval (5 s while waiting for
a dependency); an API error re-queues it with back-off. Fetched repositories are kept in
`git-cache/` beside the store (0700; `cache_dir_for`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from kctl.controllers.base import clock_now, key_of

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.sync.controller")

CACHE_DIR_NAME = "git-cache"
_DEPENDS_INDEX = "dependsOn"


def cache_dir_for(api: API) -> Path:
    """Where fetched repositories are kept: `git-cache/` beside a local store, else the user's cache dir."""
    if api.local_path is not None:
        folder = Path(os.path.abspath(api.local_path)).parent / CACHE_DIR_NAME
    else:  # a store reached over SSH: the fetch happens here, so the cache does too
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = Path(base) / "kctl" / CACHE_DIR_NAME
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.stat().st_mode & 0o077:
        os.chmod(folder, 0o700)
    return folder


def dependency_keys(source: dict) -> list[str]:
    """The keys of the sources `source` depends on (their namespace defaults to its own)."""
    namespace = (source.get("metadata") or {}).get("namespace") or "default"
    return [f"{d.get('namespace') or namespace}/{d['name']}"
            for d in (source.get("spec") or {}).get("dependsOn") or () if isinstance(d, dict) and d.get("name")]


def _ready_of(source: dict) -> tuple:
    from kctl.sync.reconcile import condition

    status = source.get("status") or {}
    ready = condition(status.get("conditions"), "Ready") or {}
    return ready.get("status"), status.get("observedGeneration")


def _needs_reconcile(old: dict, new: dict) -> bool:
    """Spec, finalizers, deletion or annotations changed (not our own status writes)."""
    o, n = old.get("metadata") or {}, new.get("metadata") or {}
    return any(o.get(k) != n.get(k) for k in ("generation", "finalizers", "deletionTimestamp", "annotations", "uid"))


class GitSourceController:
    """Reconciles kctl.io/v1alpha1 GitSources (see the module doc)."""

    name = "gitsource"

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.cache_dir = cache_dir_for(ctx.api)
        self.sources = ctx.informers.informer("gitsources")
        self.sources.add_index(_DEPENDS_INDEX, dependency_keys)
        self.sources.add_handler(self._on_add, self._on_update, self._on_delete)

    def object_for(self, key: str) -> dict | None:
        """The cached GitSource of a key (a permanent failure's Warning Event goes on it)."""
        namespace, _, name = key.rpartition("/")
        return self.sources.get(namespace, name)

    # -- event handlers -----------------------------------------------------------------------

    def _on_add(self, source: dict) -> None:
        self.queue.add(key_of(source))
        self._enqueue_dependents(source)

    def _on_update(self, old: dict, new: dict) -> None:
        if _needs_reconcile(old, new):
            self.queue.add(key_of(new))
        if _ready_of(old) != _ready_of(new):
            self._enqueue_dependents(new)

    def _on_delete(self, source: dict) -> None:
        self._enqueue_dependents(source)

    def _enqueue_dependents(self, source: dict) -> None:
        for dependent in self.sources.by_index(_DEPENDS_INDEX, key_of(source)):
            self.queue.add(key_of(dependent))

    # -- reconcile ----------------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        from kctl.sync.reconcile import reconcile

        namespace, _, name = key.rpartition("/")
        source = self.sources.get(namespace, name)
        if source is None:
            return None
        deleting = bool(source["metadata"].get("deletionTimestamp"))
        if (source.get("spec") or {}).get("suspend") and not deleting:
            return None
        result = reconcile(self.api, key, cache_dir=self.cache_dir, now=clock_now(self.ctx.clock))
        if not result.fast_path:
            self._event(source, result)
        return result.requeue

    def _event(self, source: dict, result) -> None:
        """A Warning when the revision failed; a Normal event when something was written or pruned."""
        if not result.ready and result.reason not in ("DependencyNotReady", "NotFound", "Deleting"):
            log.info("gitsource %s: %s: %s", result.key, result.reason, result.error_line())
            self.ctx.recorder(source, "Warning", result.reason, result.error_line())
        elif any(r.action in ("created", "configured", "pruned") for r in result.results):
            counts: dict[str, int] = {}
            for r in result.results:
                counts[r.action] = counts.get(r.action, 0) + 1
            summary = ", ".join(f"{n} {action}" for action, n in sorted(counts.items()))
            log.info("gitsource %s: %s (%s)", result.key, result.message, summary)
            self.ctx.recorder(source, "Normal", result.reason, f"{result.message} ({summary})")


__all__ = ["CACHE_DIR_NAME", "GitSourceController", "cache_dir_for", "dependency_keys"]
