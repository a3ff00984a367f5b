"""Watch-fed caches of the kinds the API server reads on every request, for stores whose reads are remote (etcd).

As kube-apiserver's admission plugins and CRD handler read informer caches rather than etcd,
APIServer (kctl.apiserver.server, its only caller) reads CustomResourceDefinitions (its
registry), the admission hook kinds, Namespaces (labels for hook namespaceSelectors) and the
kinds the built-in admission plugins list (LimitRange, ResourceQuota, PriorityClass,
StorageClass, Service) from here when `store.reads_are_remote`; on SQLite it keeps reading
the store (a local read).

Only a process that keeps reading starts them: APIServer makes its ConfigCache with
`read_through=READ_THROUGH`, so the first READ_THROUGH reads of each kind go to the store (one
range read each, as on SQLite) and the next one starts the kind's cache. A one-shot command
(`kctl get`, `kctl apply` of a file or two) thus never opens a watch; the daemon, `kctl serve`
and other long-running processes have every kind they read often cached after a few requests.
(kube-apiserver is always long-running and always has its informers; kctl's CLI is often the
API server for one request.)

`KindCache`: one kind, started lazily on first use by one thread of its own: list, then
watch from the list's revision (the store's watch adds a stream-reader thread), a new list
on Gone, a pause and a new list when the store does not answer. A read before the first
list completes waits for it (bounded); if that list fails, its error (e.g. StoreUnavailable)
is the reader's; later, while the watch or a new list fails, reads go to the store.
`version` changes with every change applied (the registry's rebuild key).

Read-your-writes in this process: APIServer calls `written(kind, revision)` after it commits
an object of a cached kind; the next read of that kind waits (at most WRITE_WAIT seconds)
until the watch has delivered that revision, else reads the store. Other processes' writes
arrive by the watch within milliseconds. Checks that must be exact (AlreadyExists, Conflict,
a terminating namespace) stay in the transactions. `ConfigCache.close()` (APIServer.close)
stops every thread.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Callable

from kctl.machinery.errors import APIError, Gone
from kctl.machinery.resources import KCTL_GROUP
from kctl.store.contract import Store

log = logging.getLogger("kctl.apiserver.configcache")

CRD_KIND = "CustomResourceDefinition.apiextensions.k8s.io"
NAMESPACE = "Namespace"
HOOK_KINDS = ("MutatingAdmissionHook." + KCTL_GROUP, "ValidatingAdmissionHook." + KCTL_GROUP)
#: the kinds read on every request: the registry's, the hooks', Namespaces and the admission plugins' listers
CACHED_KINDS = frozenset({CRD_KIND, NAMESPACE, *HOOK_KINDS, "LimitRange", "ResourceQuota",
                          "PriorityClass.scheduling.k8s.io", "StorageClass.storage.k8s.io", "Service"})
#: longest a read waits for the first list, or for the watch to deliver this process's own write
FIRST_LIST_WAIT = 10.0
WRITE_WAIT = 5.0
#: longest close() waits for the threads to end
CLOSE_WAIT = 5.0
#: pause before listing again after the store did not answer
RETRY_PAUSE = 0.5
#: reads of a kind the API server sends to the store before it starts the kind's cache
READ_THROUGH = 16


class KindCache:
    """The objects of one kind, kept by list + watch in a thread of its own; see the module docstring."""

    def __init__(self, store: Store, kind: str) -> None:
        self.store = store
        self.kind = kind
        self.version = 0
        self._objects: dict[str, dict[str, dict]] = {}  # namespace ("": cluster-scoped) -> name -> object
        self._revision = 0  # the last revision applied
        self._needed = 0  # the highest revision of this process's own writes
        self._listed = False
        self._failed = False  # the last list failed (reads go to the store until one succeeds)
        self._error: APIError | None = None  # why, while no list has succeeded yet
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kctl-cache-{kind}", daemon=True)
        self._thread.start()

    # -- reads ----------------------------------------------------------------------------

    def list(self, namespace: str | None = None) -> list[dict]:
        """The kind's objects (in one namespace or all), in (namespace, name) order (copies: callers may change)."""
        if not self._fresh():
            return self.store.list(self.kind, namespace)[0]
        with self._cond:
            spaces = sorted(self._objects) if namespace is None else [namespace]
            found = [obj for ns in spaces for _, obj in sorted((self._objects.get(ns) or {}).items())]
        return copy.deepcopy(found)

    def get(self, namespace: str, name: str) -> dict | None:
        """One object (a copy), or None."""
        if not self._fresh():
            return self.store.get(self.kind, namespace, name)
        with self._cond:
            found = (self._objects.get(namespace) or {}).get(name)
        return copy.deepcopy(found)

    def fresh_version(self) -> int | None:
        """`version` once the cache may answer (see list); None when reads go to the store."""
        if not self._fresh():
            return None
        with self._cond:
            return self.version

    def written(self, revision: int) -> None:
        """This process committed an object of the kind at `revision`: the next read waits until it is seen."""
        with self._cond:
            self._needed = max(self._needed, revision)

    def _fresh(self) -> bool:
        """Whether the cache may answer: listed, and up to this process's own writes (waits a bounded time)."""
        deadline = time.monotonic() + FIRST_LIST_WAIT
        with self._cond:
            while not self._listed and not self._failed and not self._stop.is_set():
                if not self._cond.wait(max(0.0, deadline - time.monotonic())):
                    return False
            if not self._listed and self._error is not None:
                raise self._error  # the first list's error (asking the store again would wait as long again)
            if not self._listed or self._failed:
                return False
            deadline = time.monotonic() + WRITE_WAIT
            while self._revision < self._needed:
                if not self._cond.wait(max(0.0, deadline - time.monotonic())) or self._failed:
                    return self._revision >= self._needed
            return True

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._relist()
                self._follow()
            except Gone:
                continue  # compacted past what we saw (or a restore): list again
            except APIError as error:  # the store does not answer: serve what we have, list again later
                with self._cond:
                    self._failed, self._error = True, error
                    self._cond.notify_all()
                log.debug("cache of %s: %s", self.kind, error.message)
                self._stop.wait(RETRY_PAUSE)
            except Exception as error:  # never let the thread die silently: reads fall back to the store
                log.warning("the API server's cache of %s failed (reads go to the store): %s", self.kind, error)
                with self._cond:
                    self._failed = True
                    self._cond.notify_all()
                self._stop.wait(RETRY_PAUSE)

    def _relist(self) -> None:
        items, revision = self.store.list(self.kind)
        objects: dict[str, dict[str, dict]] = {}
        for obj in items:
            objects.setdefault(obj["metadata"].get("namespace") or "", {})[obj["metadata"]["name"]] = obj
        with self._cond:
            self._objects = objects
            self._revision = max(self._revision, revision)
            self._listed, self._failed, self._error = True, False, None
            self.version += 1
            self._cond.notify_all()

    def _follow(self) -> None:
        for change in self.store.watch(self._revision, stop=self._stop, kind=self.kind):
            with self._cond:
                space = self._objects.setdefault(change.namespace, {})
                if change.type == "DELETED":
                    space.pop(change.name, None)
                    if not space:
                        del self._objects[change.namespace]
                else:
                    space[change.name] = change.obj
                self._revision = max(self._revision, change.revision)
                self.version += 1
                self._cond.notify_all()

    def stop(self) -> None:
        """Tell the thread to end (it checks at least every 50 ms while watching)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    def join(self, timeout: float) -> None:
        """Wait at most `timeout` seconds for the thread to end."""
        self._thread.join(timeout=timeout)


class ConfigCache:
    """The KindCaches of one APIServer, each started on its kind's first read after `read_through` reads."""

    def __init__(self, store: Store, *, factory: Callable[[Store, str], KindCache] = KindCache,
                 read_through: int = 0) -> None:
        """read_through: how many reads of each kind go to the store before its cache starts."""
        self.store = store
        self._factory = factory
        self._read_through = read_through
        self._reads: dict[str, int] = {}  # kind -> reads sent to the store so far (kinds whose cache is not started)
        self._caches: dict[str, KindCache] = {}
        self._lock = threading.Lock()
        self._closed = False

    def cache(self, kind: str) -> KindCache | None:
        """The kind's cache (started now if it is not yet), for one read; None when that read goes to the store:
        a kind not cached, one of its first `read_through` reads, or once closed."""
        if kind not in CACHED_KINDS:
            return None
        found = self._caches.get(kind)
        if found is not None:
            return found
        with self._lock:
            if self._closed:
                return None
            if kind not in self._caches:
                reads = self._reads.get(kind, 0)
                if reads < self._read_through:
                    self._reads[kind] = reads + 1
                    return None
                self._caches[kind] = self._factory(self.store, kind)
            return self._caches[kind]

    def list(self, kind: str, namespace: str | None = None) -> list[dict]:
        """The kind's objects from its cache (a kind not cached: from the store)."""
        cache = self.cache(kind)
        return cache.list(namespace) if cache is not None else self.store.list(kind, namespace)[0]

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        """One object from its kind's cache (a kind not cached: from the store), or None."""
        cache = self.cache(kind)
        return cache.get(namespace, name) if cache is not None else self.store.get(kind, namespace, name)

    def written(self, kind: str, obj: dict | None) -> None:
        """This process committed `obj` of `kind` (its resourceVersion is the commit's revision)."""
        cache = self._caches.get(kind)
        if cache is None or not obj:
            return
        try:
            cache.written(int((obj.get("metadata") or {}).get("resourceVersion") or 0))
        except (TypeError, ValueError):
            pass

    def close(self) -> None:
        """Stop every cache's thread (waits at most CLOSE_WAIT seconds in all); later reads go to the store."""
        with self._lock:
            self._closed = True
            caches, self._caches = list(self._caches.values()), {}
        for cache in caches:
            cache.stop()
        deadline = time.monotonic() + CLOSE_WAIT
        for cache in caches:  # (a thread still in a request to an etcd that does not answer is a daemon thread)
            cache.join(max(0.0, deadline - time.monotonic()))
