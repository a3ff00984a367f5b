"""The API layer: the only writer of the store, with Kubernetes' semantics.

Every change from every client (CLI, controllers, scheduler, node agents, git sync)
goes through APIServer (clients hold it as a kctl.apiserver.contract.API, which the remote
client kctl.apiserver.remote implements too): resolve the kind, admission
(kctl.admission.chain), optimistic concurrency on resourceVersion, then one store
transaction that writes the object and its change record. Reads and watches go through it too, so selectors behave alike
everywhere.

A write is two steps, `_prepare_*` (admission; no lock held, so slow hooks never block
other writers) and `_commit_*` (inside the transaction: preconditions re-checked, then
written). `write_all` prepares many objects and commits them in one transaction, which
is what makes applying 1,000 objects fast and `--atomic` possible. A commit that meets
a Conflict is prepared again, outside any transaction, and retried (a bounded number of
times with a small jittered back-off), as kube-apiserver's GuaranteedUpdate does: an
admission hook never runs while the SQLite write lock is held.

Every transaction is the store's `transact(fn)`: an optimistic store (etcd) runs fn again
from scratch when what it read changed before its commit, so each fn resets what it fills;
a CommitConflict the store gives up on is the object's Conflict. A store that bounds its
transactions (`max_writes_per_transaction`, etcd: 32) gets a non-atomic batch, and
bind_all's bindings, in transactions of at most that many writes (counted as made: a
Service is several); an atomic batch that needs more is refused with BadRequest before
anything is written. StoreUnavailable (etcd's quorum lost) fails the writes not yet
committed (a 503).

On a store whose reads are remote (etcd), what every request reads (the CRDs of the registry,
the admission hooks, Namespaces' labels, the admission plugins' lists) comes from watch-fed
caches (kctl.apiserver.configcache; this server's own writes of those kinds are seen by its next
request), and a transaction's reads are fetched in one round trip (the transaction's `prefetch`).

Fields only the server sets (uid, creationTimestamp, resourceVersion, generation,
deletionTimestamp, deletionGracePeriodSeconds, managedFields) are put back after
admission, so a mutating hook can neither forge them nor delete an object. Size limits
(kctl.machinery.limits) apply to every write; every write that was answered is recorded in the
audit log (kctl.apiserver.audit) after its transaction.
"""

from __future__ import annotations

import copy
import datetime as dt
import getpass
import logging
import os
import random
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from kctl.machinery.errors import (AlreadyExists, APIError, BadRequest, Conflict, FieldError, Forbidden,
                             Invalid, NotFound)
from kctl.apiserver import audit, fieldmanager
from kctl.apiserver.objcopy import json_copy
from kctl.machinery.managedfields import ApplyConflict
from kctl.machinery import conversion, limits, typeinfo
from kctl.machinery.resources import KCTL_GROUP, Registry, ResourceType, builtin_registry
from kctl.apiserver.contract import Binding, WriteResult
from kctl.store.contract import CommitConflict, Store, StoreUnavailable, Transaction, TransactionTooLarge

T = TypeVar("T")

log = logging.getLogger("kctl.apiserver")

NAMESPACE = "Namespace"
CRD_KIND = "CustomResourceDefinition.apiextensions.k8s.io"
PROTECTED_NAMESPACES = ("default",)
HOOK_KINDS = ("MutatingAdmissionHook." + KCTL_GROUP, "ValidatingAdmissionHook." + KCTL_GROUP)
#: metadata fields only the API layer sets
SYSTEM_META = ("uid", "creationTimestamp", "resourceVersion", "generation", "deletionTimestamp",
               "deletionGracePeriodSeconds", "managedFields", "selfLink")
#: the hook a Forbidden from admission names (kctl.admission.hooks words it so)
_HOOK_NAMED = re.compile(r'^admission hook "([^"]+)"')
#: how many times a write that meets a Conflict is prepared again and retried
MAX_WRITE_ATTEMPTS = 30
#: back-off between attempts: BASE * 2**attempt seconds, at most CAP, times a jitter of 0.5-1.5
RETRY_BACKOFF_BASE = 0.002
RETRY_BACKOFF_CAP = 0.1


def _metrics_write(event: dict) -> bool:
    return (event.get("objectRef") or {}).get("apiGroup") == "metrics.k8s.io" \
        and (event.get("responseStatus") or {}).get("code", 500) < 400


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _spec_of(obj: dict) -> dict:
    """Everything generation tracks: all but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


@dataclass
class Prepared:
    """An admitted write waiting for its transaction."""

    verb: str  # create | update | delete | unchanged
    rt: ResourceType
    namespace: str
    name: str
    obj: dict | None
    expect_rv: str | None = None  # resourceVersion the commit requires (None: must not exist)
    propagation: str | None = None
    grace_period: int | None = None
    result: str = ""  # created | configured | unchanged | deleted (apply's words)
    subresource: str | None = None
    hooks: tuple[str, ...] = ()  # the admission hooks that matched (named in the audit log)


class APIServer:
    """In-process API server over one Store."""

    def __init__(self, store: Store, *, user: str | None = None,
                 warn: Callable[[str], None] | None = None,
                 audit_log: "audit.AuditLog | None | bool" = True) -> None:
        """audit_log: True (the default) logs beside the store; None or False: no audit log."""
        self.store = store
        self.user = user or _os_user()
        self.warn = warn or (lambda msg: log.warning("%s", msg))
        self.audit_log = audit.AuditLog.for_store(store.path) if audit_log is True else (audit_log or None)
        self._registry: Registry | None = None
        self._registry_key: tuple | None = None
        self._lock = threading.Lock()
        self._tls = threading.local()
        #: watch-fed caches of the kinds read on every request, on a store whose reads are remote (etcd), each
        #: started once this process has read its kind a few times (a one-shot command reads the store)
        self._config = None
        if getattr(store, "reads_are_remote", False):
            from kctl.apiserver.configcache import READ_THROUGH, ConfigCache

            self._config = ConfigCache(store, read_through=READ_THROUGH)

    @property
    def acting_user(self) -> str:
        """Who the write being made is by: the requester of an audit.acting_as block, else this API's user."""
        who = audit.requester()
        return who.user if who is not None else self.user

    # -- kinds -------------------------------------------------------------------------

    @property
    def registry(self) -> Registry:
        """Built-in kinds plus those of the stored CustomResourceDefinitions (remote reads: of the CRD cache)."""
        cache = self._config.cache(CRD_KIND) if self._config is not None else None
        version = cache.fresh_version() if cache is not None else None
        key = ("cache", version) if cache is not None and version is not None else self.store.fingerprint(CRD_KIND)
        with self._lock:
            if self._registry is None or key != self._registry_key:
                registry = builtin_registry()
                if key[0]:
                    from kctl.machinery.crd import crd_resource_types

                    crds = cache.list() if key[0] == "cache" else self.store.list(CRD_KIND)[0]
                    for crd in crds:
                        if crd["metadata"].get("deletionTimestamp"):
                            continue
                        for rt in crd_resource_types(crd):
                            registry.add(rt)
                self._registry, self._registry_key = registry, key
            return self._registry

    @property
    def where(self) -> str:
        """Where the store is (its path, or its etcd:// address), as messages show it."""
        return self.store.where

    @property
    def local_path(self) -> str | None:
        """The store's file (always on this host)."""
        return str(self.store.path)

    def resource(self, name: str) -> ResourceType:
        return self.registry.lookup(name)

    def resource_for(self, obj: dict) -> ResourceType:
        if not isinstance(obj, dict):
            raise BadRequest("object must be a mapping")
        return self.registry.for_object(obj)

    # -- reads -------------------------------------------------------------------------

    def get(self, rt: ResourceType, name: str, *, namespace: str | None = None) -> dict:
        ns = self.namespace_of(rt, namespace)
        obj = self.store.get(rt.group_kind, ns, name)
        if obj is None:
            raise NotFound(rt.group_resource, name)
        return obj

    def find(self, rt: ResourceType, name: str, *, namespace: str | None = None) -> dict | None:
        """One object as stored now, or None when absent (get without NotFound)."""
        return self.store.get(rt.group_kind, self.namespace_of(rt, namespace), name)

    def get_by_uid(self, uid: str) -> dict | None:
        """The live object with this uid (any kind), or None."""
        return self.store.get_by_uid(uid)

    def revision(self) -> int:
        """The revision of the newest change (a watch from it sees every later one)."""
        return self.store.revision()

    def list(self, rt: ResourceType, *, namespace: str | None = None, label_selector=None,
             field_selector=None) -> tuple[list[dict], int]:
        """Objects of a kind (one namespace or all when namespace is None) and the list's revision."""
        ns = (namespace or "default") if (rt.namespaced and namespace is not None) else (None if rt.namespaced else "")
        name = field_selector.equality_value("metadata.name") if field_selector is not None else None
        if rt.namespaced and ns is None and field_selector is not None:
            ns = field_selector.equality_value("metadata.namespace")
        items, rev = self.store.list(rt.group_kind, ns, name=name)
        if label_selector is not None or field_selector is not None:
            items = [o for o in items if _selected(o, label_selector, field_selector)]
        return items, rev

    def watch(self, rt: ResourceType | None, *, namespace: str | None = None, since: int,
              label_selector=None, field_selector=None, stop: threading.Event | None = None,
              timeout: float | None = None, known: set | None = None) -> Iterator[tuple[str, dict]]:
        """(type, object) for each change after `since` that matches; Gone if `since` is compacted.

        An object that stops matching the selectors is reported DELETED to this watcher, as
        Kubernetes does; `known` holds the (namespace, name) pairs the caller listed.
        """
        kind = rt.group_kind if rt is not None else None
        ns = None if (rt is None or not rt.namespaced or namespace is None) else namespace
        matching = set(known or ())
        filtered = label_selector is not None or field_selector is not None
        for change in self.store.watch(since, stop=stop, timeout=timeout, kind=kind):
            if kind is not None and change.kind != kind:
                continue
            if ns is not None and change.namespace != ns:
                continue
            key = (change.namespace, change.name)
            if not filtered:
                yield change.type, change.obj
                continue
            hit = change.type != "DELETED" and _selected(change.obj, label_selector, field_selector)
            if hit:
                yield ("ADDED" if key not in matching else "MODIFIED"), change.obj
                matching.add(key)
            elif key in matching:
                matching.discard(key)
                yield "DELETED", change.obj

    # -- writes: public ----------------------------------------------------------------

    def create(self, obj: dict, *, namespace: str | None = None, dry_run: bool = False) -> dict:
        return self._write_one("create", self._target_of(obj, namespace),
                               lambda: self._prepare_create(obj, namespace, dry_run=dry_run),
                               retry=False, dry_run=dry_run)

    def update(self, obj: dict, *, namespace: str | None = None, subresource: str | None = None,
               dry_run: bool = False) -> dict:
        """Replace an object (main path) or its status (subresource="status").

        With a resourceVersion it is a precondition (Conflict when stale); without one the
        update is unconditional, and retried on Conflict against the newer object.
        """
        pinned = isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) \
            and obj["metadata"].get("resourceVersion") not in (None, "")
        return self._write_one("update", self._target_of(obj, namespace, subresource),
                               lambda: self._prepare_update(obj, namespace, subresource=subresource,
                                                            dry_run=dry_run),
                               retry=not pinned, dry_run=dry_run)

    def update_status(self, obj: dict, *, dry_run: bool = False) -> dict:
        return self.update(obj, subresource="status", dry_run=dry_run)

    def update_status_all(self, objs: list[dict], *, dry_run: bool = False) -> list[WriteResult]:
        """The status of many objects in one transaction (a kubelet's batch); each succeeds or fails alone.

        Each object is admitted as update_status admits it; one without a resourceVersion is
        written over a newer version (retried on Conflict), one with it is a precondition.
        """
        return self.write_all([("update_status", obj) for obj in objs], dry_run=dry_run)

    def patch(self, rt: ResourceType, name: str, patch, *, patch_type: str = "strategic",
              namespace: str | None = None, subresource: str | None = None, dry_run: bool = False) -> dict:
        """merge | json | strategic patch, retried on Conflict unless the patch pins a resourceVersion.

        An error names the path and the operation, never the object's data (for a Secret,
        any stored value or its decoded text is masked from the message as well).
        """
        target = _Target(rt, self._safe_namespace(rt, namespace), name, subresource)
        try:
            return self._write_one("patch", target,
                                   lambda: self._prepare_patch(rt, name, patch, patch_type, namespace, subresource,
                                                               dry_run),
                                   retry=not _pinned_rv(patch), dry_run=dry_run)
        except APIError as exc:
            if rt.group_kind == "Secret":
                from kctl.machinery.redact import redact_error, secret_values

                redact_error(exc, secret_values(self.store.get("Secret", target.namespace, name)))
            raise

    def _prepare_patch(self, rt: ResourceType, name: str, patch, patch_type: str, namespace: str | None,
                       subresource: str | None, dry_run: bool) -> Prepared:
        from kctl.machinery import patch as patching

        limits.check_request(patch)
        current = self.get(rt, name, namespace=namespace)
        if patch_type == "merge":
            if not isinstance(patch, dict):
                raise BadRequest("a merge patch must be a JSON object")
            new = patching.merge_patch(current, patch)
        elif patch_type == "json":
            new = patching.json_patch(current, patch)
        elif patch_type == "strategic":
            if not isinstance(patch, dict):
                raise BadRequest("a strategic merge patch must be a JSON object")
            new = patching.strategic_merge_patch(current, patch, self.schema_of(rt))
        else:
            raise BadRequest(f'unknown patch type "{patch_type}": use json, merge or strategic')
        if not isinstance(new.get("metadata"), dict):
            raise BadRequest("the patch removed metadata")
        for key in ("name", "namespace"):  # (never quote the new value: it may come from a Secret)
            if new["metadata"].get(key) != current["metadata"].get(key):
                raise BadRequest(f'the patch changes metadata.{key}, which must stay as in the request')
        new["metadata"]["resourceVersion"] = _pinned_rv(patch) or current["metadata"]["resourceVersion"]
        return self._prepare_update(new, namespace, subresource=subresource, dry_run=dry_run, checked=True)

    def apply(self, obj: dict, *, namespace: str | None = None, dry_run: bool = False) -> WriteResult:
        """kubectl apply of one object: create, or three-way merge with last-applied."""
        return self.write_all([("apply", obj)], namespace=namespace, dry_run=dry_run)[0]

    def apply_server_side(self, rt: ResourceType, name: str, obj: dict, *, namespace: str | None = None,
                          field_manager: str, force: bool = False, dry_run: bool = False) -> dict:
        """Server-side apply of the configuration `obj` by `field_manager` (kctl.apiserver.fieldmanager.apply).

        Creates the object when it is absent; ApplyConflict (409, never retried) when the
        result changes fields other managers own, unless `force`. A resourceVersion in obj
        is a precondition; without one a write that meets a newer object is merged again.
        """
        target = _Target(rt, self._safe_namespace(rt, namespace), name)
        pinned = _pinned_rv(obj)
        return self._write_one("patch", target,
                               lambda: self._prepare_server_side_apply(rt, name, obj, namespace, field_manager,
                                                                       force, dry_run),
                               retry=not pinned, dry_run=dry_run)

    def _prepare_server_side_apply(self, rt: ResourceType, name: str, obj: dict, namespace: str | None,
                                   field_manager: str, force: bool, dry_run: bool) -> Prepared:
        if not isinstance(obj, dict):
            raise BadRequest("an apply configuration must be an object")
        limits.check_request(obj)
        if not obj.get("apiVersion") or not obj.get("kind"):
            raise BadRequest("apiVersion and kind must be set in an apply configuration")
        if self.resource_for(obj).group_kind != rt.group_kind:
            raise BadRequest(f'the kind of the object ({obj.get("kind")}) does not match the kind of the '
                             f'request ({rt.kind})')
        meta = obj.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise BadRequest("metadata must be an object")
        meta = meta or {}
        if meta.get("name") not in (None, "", name):
            raise BadRequest(f'the name of the object ({meta.get("name")}) does not match the name on the URL '
                             f'({name})')
        ns = self.namespace_of(rt, namespace, meta)
        config = copy.deepcopy(conversion.to_storage(obj, rt))
        config_meta = config.setdefault("metadata", {})
        config_meta["name"] = name
        if rt.namespaced:
            config_meta["namespace"] = ns
        pinned = config_meta.pop("resourceVersion", None)
        current = self.store.get(rt.group_kind, ns, name)
        if pinned not in (None, "") and (current is None or str(pinned) != current["metadata"]["resourceVersion"]):
            raise _conflict(rt, name)
        new = fieldmanager.apply(rt, current, config, manager=field_manager, force=force)
        managed = new["metadata"].get("managedFields") or []
        if current is None:
            return self._prepare_create(new, ns if rt.namespaced else None, dry_run=dry_run, managed_fields=managed)
        new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self._prepare_update(new, ns if rt.namespaced else None, dry_run=dry_run, checked=True,
                                    managed_fields=managed)

    def delete(self, rt: ResourceType, name: str, *, namespace: str | None = None,
               propagation: str | None = None, grace_period: int | None = None,
               resource_version: str | None = None, dry_run: bool = False) -> dict:
        """Delete, or mark for deletion when finalizers (or a node agent) must act first."""
        return self._write_one("delete", _Target(rt, self._safe_namespace(rt, namespace), name),
                               lambda: self._prepare_delete(rt, name, namespace, propagation=propagation,
                                                            grace_period=grace_period,
                                                            resource_version=resource_version, dry_run=dry_run),
                               retry=not resource_version, dry_run=dry_run)

    def _write_one(self, verb: str, target: "_Target", prepare: Callable[[], Prepared], *, retry: bool,
                   dry_run: bool) -> dict:
        """Prepare (no lock held) then commit one write; on Conflict prepare again (if `retry`).

        The outcome, success or error, is written to the audit log once it is final.
        """
        received = audit.now()
        attempt = 0
        try:
            while True:
                try:
                    prepared = prepare()
                    obj = self._one(prepared, dry_run)
                    break
                except Conflict as exc:
                    attempt += 1
                    if not retry or attempt >= MAX_WRITE_ATTEMPTS or isinstance(exc, ApplyConflict):
                        raise
                _backoff(attempt)
        except APIError as exc:
            if not dry_run:
                self._audit([self._failure_event(verb, target, exc, received)])
            raise
        if not dry_run and prepared.verb != "unchanged":
            self._audit([self._event(verb, prepared, obj, received)])
        return obj

    def write_all(self, ops: list[tuple[str, dict]], *, namespace: str | None = None, dry_run: bool = False,
                  atomic: bool = False) -> list[WriteResult]:
        """Admit then commit many writes (op: apply | create | update | replace | update_status | delete) in one
        transaction.

        Non-atomic: each object succeeds or fails alone. Atomic: any failure writes nothing
        (every object's error is still reported). A Conflict met at commit prepares the
        object again against the newer state, outside any transaction, and tries again
        (MAX_WRITE_ATTEMPTS in all); an update that pins a resourceVersion is not retried.
        """
        received = audit.now()
        results = [WriteResult() for _ in ops]
        todo = list(range(len(ops)))
        pending_namespaces: dict[str, dict] = {}
        verbs: dict[int, str] = {}
        prepared: dict[int, Prepared] = {}
        try:
            for attempt in range(1, MAX_WRITE_ATTEMPTS + 1):
                conflicts, prepared = self._write_round(ops, todo, results, pending_namespaces,
                                                        namespace=namespace, dry_run=dry_run, atomic=atomic,
                                                        verbs=verbs)
                if not conflicts:
                    break
                retryable = [i for i in conflicts if op_is_retryable(*ops[i])]
                if len(retryable) < len(conflicts) or attempt == MAX_WRITE_ATTEMPTS:
                    for i in conflicts:
                        results[i].error = _conflict(prepared[i].rt, prepared[i].name)
                    break
                _backoff(attempt)
                todo = list(range(len(ops))) if atomic else conflicts
        except APIError as exc:  # the whole request's (store unavailable, atomic batch too large)
            if not dry_run:  # every write not committed failed with it
                self._audit_failures(ops, results, prepared, verbs, namespace, received, whole=exc)
            raise
        if not dry_run:
            self._audit_failures(ops, results, prepared, verbs, namespace, received)
        return results

    def _audit_failures(self, ops: list[tuple[str, dict]], results: list[WriteResult], prepared: dict[int, Prepared],
                        verbs: dict[int, str], namespace: str | None, received: str, *,
                        whole: APIError | None = None) -> None:
        """The audit events of a batch's failed writes (`whole`: the error of every write that has no object)."""
        self._audit([self._failure_event(verbs.get(i) or _op_verb(ops[i][0], None),
                                         _Target.of(prepared.get(i))
                                         or self._target_of(ops[i][1], namespace,
                                                            "status" if ops[i][0] == "update_status" else None),
                                         r.error or whole, received)
                     for i, r in enumerate(results) if r.error is not None or (whole is not None and r.obj is None)])

    def _write_round(self, ops, todo, results, pending_namespaces, *, namespace, dry_run, atomic, verbs):
        """Prepare (no lock held) then commit the writes at `todo`; (conflicted indices, prepared).

        The round's admission reads (hooks, the plugins' lists, namespaces) are made once and
        shared by its writes (`_batch_read`): all of them are prepared before any commits, so
        each would read the same.
        """
        prepared: dict[int, Prepared] = {}
        outer = getattr(self._tls, "reads", None)
        self._tls.reads = {}
        try:
            for i in todo:
                op, obj = ops[i]
                results[i] = WriteResult()
                try:
                    p = self._capture(results[i].warnings, self._prepare, op, obj, namespace, dry_run,
                                      pending_namespaces)
                except APIError as exc:
                    results[i].error = exc
                    continue
                prepared[i] = p
                verbs[i] = _op_verb(op, p)
                results[i].action = p.result
                if p.rt.group_kind == NAMESPACE and p.obj is not None:
                    pending_namespaces[p.name] = p.obj
        finally:
            self._tls.reads = outer
        if atomic and any(r.error for r in results):
            for r in results:
                r.action = ""
            return [], prepared
        return self._commit_batch(prepared, results, dry_run=dry_run, atomic=atomic, verbs=verbs), prepared

    def _commit_batch(self, prepared: dict[int, "Prepared"], results: list[WriteResult], *,
                      dry_run: bool, atomic: bool, verbs: dict[int, str] | None = None) -> list[int]:
        """Commit prepared writes; returns the indices that met a Conflict.

        Each write has its own savepoint, so one failure leaves the others (unless atomic).
        A non-atomic batch goes in transactions of at most the store's max_writes_per_transaction
        writes (None, SQLite: all in one); an atomic batch in one, refused with BadRequest
        (nothing written) when it needs more writes than that. Dry runs and failed atomic
        batches are rolled back (a dry run in parts of the same size: a later part does not see
        an earlier part's writes, as kubectl's one request per object). What each transaction
        committed is written to the audit log after it
        (`verbs`: the request's verb per index). An error of the store itself (StoreUnavailable)
        becomes the error of every write not committed before it (an atomic batch raises it).
        """
        limit = self.store.max_writes_per_transaction
        order = list(prepared)
        if atomic and limit is not None:
            writing = sum(1 for p in prepared.values() if p.verb != "unchanged")
            if writing > limit:
                raise TransactionTooLarge(_too_large_for_a_transaction(writing, limit, self.store.where))
        conflicts: list[int] = []
        start = 0
        while start < len(order):
            received = audit.now()
            todo = order[start:]
            try:
                taken, met = self.store.transact(
                    lambda txn: self._commit_some(txn, prepared, todo, results, dry_run=dry_run, atomic=atomic,
                                                  limit=limit))
            except _Abort as abort:
                conflicts += abort.conflicts
                if not dry_run:  # a failed atomic batch: nothing written
                    for i in abort.taken:
                        results[i].obj, results[i].action = None, ""
                    return conflicts
                start += len(abort.taken)  # a dry run's part, rolled back: on to the next
                continue
            except _TooManyWrites:
                for i in todo:
                    results[i].obj, results[i].error = None, None
                writing = sum(1 for p in prepared.values() if p.verb != "unchanged")
                raise TransactionTooLarge(_too_large_for_a_transaction(writing, limit or 0, self.store.where,
                                                                       more_writes=True)) from None
            except CommitConflict:  # a backend that gave up retrying: each write is prepared again
                for i in todo:
                    results[i].obj, results[i].error = None, None
                return conflicts + todo
            except APIError as exc:  # the store's own failure (StoreUnavailable): no write from here on committed
                for i in todo:
                    results[i].obj, results[i].action = None, ""
                    results[i].error = None if atomic else exc
                if atomic:
                    raise
                return conflicts
            conflicts += met
            start += len(taken)
            for i in taken:
                if results[i].error is None and i not in met:
                    self._wrote(prepared[i], results[i].obj)
            self._audit_committed(prepared, taken, results, met, received, verbs)
        return conflicts

    def _commit_some(self, txn: Transaction, prepared: dict[int, "Prepared"], todo: list[int],
                     results: list[WriteResult], *, dry_run: bool, atomic: bool,
                     limit: int | None) -> tuple[list[int], list[int]]:
        """One transaction of a batch: the writes at `todo`, in order, each in its savepoint, as many as fit in
        `limit` writes (None: all); (the indices it took, those that met a Conflict).

        Starts from scratch (the store may run it again after a CommitConflict). Raises _Abort
        for a dry run or a failed atomic batch, _TooManyWrites when an atomic one outgrows `limit`.
        """
        for i in todo:
            results[i].obj, results[i].error = None, None
        counted = _CountedWrites(txn, limit)
        prefetch = getattr(txn, "prefetch", None)
        if prefetch is not None:  # a remote store: the reads of the writes that may fit (and of the one after
            # them, which is read before it is found not to fit), in one round trip
            prefetch(key for i in todo[:(limit + 1) if limit else len(todo)] for key in _keys_read(prepared[i]))
        taken: list[int] = []
        conflicts: list[int] = []
        for i in todo:
            before = counted.writes
            # a write past the limit: an atomic batch is refused; a non-atomic one's object goes first in the
            # next transaction (the first object of a transaction goes to the store, which may refuse it alone)
            counted.over = _TooManyWrites if atomic else (_Full if taken else None)
            try:
                with self.store.transaction():
                    results[i].obj = self._commit(counted, prepared[i], dry_run)
            except _Full:
                results[i].obj = None
                break
            except Conflict:
                conflicts.append(i)
                counted.writes = before
            except (StoreUnavailable, CommitConflict):
                raise  # the store's own failure: the whole transaction's
            except APIError as exc:  # (also a store's refusal of this write, e.g. too many writes for etcd)
                results[i].error = exc
                counted.writes = before
            taken.append(i)
        failed = conflicts or any(results[i].error for i in taken)
        if dry_run or (atomic and failed):
            raise _Abort(taken=taken, conflicts=conflicts)
        return taken, conflicts

    def _audit_committed(self, prepared: dict[int, "Prepared"], taken: list[int], results: list[WriteResult],
                         conflicts: list[int], received: str, verbs: dict[int, str] | None) -> None:
        """The audit events of what one transaction of a batch committed."""
        if self.audit_log is None:
            return
        common = {"agent": audit.user_agent(), "sources": audit.source_ips(), "completed": audit.now()}
        self._audit([self._event((verbs or {}).get(i) or _op_verb("", prepared[i]), prepared[i], results[i].obj,
                                 received, **common)
                     for i in taken
                     if prepared[i].verb != "unchanged" and results[i].obj is not None and results[i].error is None
                     and i not in conflicts])

    # -- pods/binding (the scheduler's write) ---------------------------------------------

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None) -> dict:
        """pods/binding: set an unbound pod's spec.nodeName and PodScheduled=True.

        Conflict if the pod is already bound (to any node), being deleted, or its uid is
        not `uid`; NotFound if it does not exist. As in Kubernetes, no admission hook runs.
        """
        result = self.bind_all([Binding(namespace, name, node_name, uid=uid)])[0]
        if result.error is not None:
            raise result.error
        return result.obj

    def bind_all(self, bindings: list[Binding]) -> list[WriteResult]:
        """Many bindings in one transaction (the scheduler's bind batches); each fails alone.

        Every check runs before the one write of its pod, so a failed binding has written
        nothing and needs no savepoint. A store that bounds its transactions
        (max_writes_per_transaction) gets them in transactions of that many bindings.
        """
        results = [WriteResult() for _ in bindings]
        if not bindings:
            return results
        now = now_rfc3339()
        received = audit.now()
        size = self.store.max_writes_per_transaction or len(bindings)

        def bind_some(txn: Transaction, part: range) -> None:
            prefetch = getattr(txn, "prefetch", None)
            if prefetch is not None:  # a remote store: every pod of the part in one round trip
                prefetch(("Pod", bindings[i].namespace, bindings[i].name) for i in part)
            for i in part:
                results[i] = WriteResult()
                try:
                    results[i].obj = self._commit_binding(txn, bindings[i], now)
                    results[i].action = "bound"
                except (StoreUnavailable, CommitConflict):
                    raise
                except APIError as exc:
                    results[i].error = exc

        start = 0
        try:
            while start < len(bindings):
                part = range(start, min(start + size, len(bindings)))
                try:
                    self.store.transact(lambda txn: bind_some(txn, part))
                except CommitConflict:  # a backend that gave up retrying: the scheduler tries these pods again
                    for i in part:
                        results[i] = WriteResult(error=_binding_conflict(bindings[i].name))
                start = part.stop
        except APIError as exc:  # the store's own failure: the bindings from `start` on are not written
            for i in range(start, len(bindings)):
                results[i] = WriteResult(error=exc)
        self._audit_bindings(bindings, results, received)
        return results

    def _audit_bindings(self, bindings: list[Binding], results: list[WriteResult], received: str) -> None:
        """The audit events of a bind_all: each binding's outcome."""
        pods = self.resource("pods")
        events = []
        for result, b in zip(results, bindings):
            target = _Target(pods, b.namespace, b.name, "binding")
            if result.error is not None:
                events.append(self._failure_event("create", target, result.error, received))
            else:
                events.append(self._ref_event("create", target, 201, received,
                                              rv=result.obj["metadata"]["resourceVersion"]))
        self._audit(events)

    def _commit_binding(self, txn: Transaction, b: Binding, now: str) -> dict:
        pod = txn.get("Pod", b.namespace, b.name)
        if pod is None:
            raise NotFound("pods", b.name, b.namespace)
        meta, spec = pod["metadata"], pod.setdefault("spec", {})

        def conflict(why: str) -> Conflict:
            return _binding_conflict(b.name, why)

        if b.uid and meta.get("uid") != b.uid:
            raise conflict(f"the UID in the precondition ({b.uid}) does not match the UID in record "
                           f"({meta.get('uid')}). The object might have been deleted and then recreated")
        if meta.get("deletionTimestamp"):
            raise conflict(f"pod {b.name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise conflict(f'pod {b.name} is already assigned to node "{spec["nodeName"]}"')
        spec["nodeName"] = b.node_name
        meta["generation"] = meta.get("generation", 1) + 1
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": now})
        status["conditions"] = conditions
        return txn.put("Pod", b.namespace, b.name, pod, event="MODIFIED")

    # -- pods/eviction (drain's write) ----------------------------------------------------

    def evict(self, namespace: str | None, name: str, *, grace_period: int | None = None,
              dry_run: bool = False) -> dict:
        """pods/eviction: delete the pod if its PodDisruptionBudget allows (kctl.apiserver.eviction)."""
        from kctl.apiserver import eviction

        return eviction.evict(self, namespace, name, grace_period=grace_period, dry_run=dry_run)

    def create_token(self, namespace: str | None, name: str, token_request: dict) -> dict:
        """serviceaccounts/token: a signed, bound ServiceAccount token (kctl.apiserver.tokens)."""
        from kctl.apiserver import tokens

        return tokens.create_token(self, namespace, name, token_request)

    # -- writes: prepare ---------------------------------------------------------------

    def _prepare(self, op: str, obj: dict, namespace: str | None, dry_run: bool,
                 pending_namespaces: dict[str, dict]) -> Prepared:
        if op == "create":
            return self._prepare_create(obj, namespace, dry_run=dry_run, pending_namespaces=pending_namespaces)
        if op in ("update", "replace"):
            return self._prepare_update(obj, namespace, dry_run=dry_run)
        if op == "update_status":
            return self._prepare_update(obj, namespace, subresource="status", dry_run=dry_run)
        if op == "apply":
            return self._prepare_apply(obj, namespace, dry_run=dry_run, pending_namespaces=pending_namespaces)
        if op == "delete":  # obj names the object (as `delete` does); a resourceVersion in it is a precondition
            meta = obj.get("metadata") or {}
            return self._prepare_delete(self.resource_for(obj), meta.get("name") or "",
                                        meta.get("namespace") or namespace, propagation=None, grace_period=None,
                                        resource_version=meta.get("resourceVersion"), dry_run=dry_run)
        raise BadRequest(f"unknown write {op!r}")

    def _prepare_create(self, obj: dict, namespace: str | None, *, dry_run: bool,
                        pending_namespaces: dict | None = None, managed_fields: list | None = None) -> Prepared:
        """managed_fields: the new object's metadata.managedFields (server-side apply), else recorded here."""
        rt = self.resource_for(obj)
        limits.check_request(obj)
        obj = json_copy(conversion.to_storage(obj, rt))  # (an autoscaling/v1 HPA is stored as v2)
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise Invalid(rt.group_kind, FieldError("metadata", "must be an object"))
        ns = self.namespace_of(rt, namespace, meta)
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + os.urandom(3).hex()[:5]
            else:
                raise Invalid(rt.group_kind,
                              FieldError("metadata.name", "Required value: name or generateName is required"))
        name = meta["name"]
        if not isinstance(name, str):
            raise Invalid(rt.group_kind, FieldError("metadata.name", "must be a string"))
        sent = meta.get("managedFields")
        for key in SYSTEM_META:
            meta.pop(key, None)
        if rt.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        from kctl.admission.defaults import tracks_generation

        if tracks_generation(rt):  # as Kubernetes: a ConfigMap, Service, Namespace... has none
            meta["generation"] = 1
        _normalize(rt, obj)
        owned = _system_meta(obj)
        obj, hooks = self._admit("CREATE", rt, ns, name, obj, None, dry_run, pending_namespaces)
        _restore_system_meta(obj, owned)
        if managed_fields is not None:
            _set_managed_fields(obj, managed_fields)
        else:
            _set_managed_fields(obj, sent if fieldmanager.decode(sent) is not None else None)
            fieldmanager.record(rt, None, obj)
        self._check_crd(rt, obj)
        limits.check_object(rt.group_kind, obj)
        return Prepared("create", rt, ns, name, obj, result="created", hooks=hooks)

    def _prepare_update(self, obj: dict, namespace: str | None, *, subresource: str | None = None,
                        dry_run: bool, checked: bool = False, managed_fields: list | None = None) -> Prepared:
        """checked: obj is not what the client sent (a patched object): no request-size check.

        managed_fields: the new object's metadata.managedFields (server-side apply); else the
        update is recorded in them (fieldmanager.record), starting from those the client sent
        with a resourceVersion (a patch always has one), else from the stored ones.
        """
        rt = self.resource_for(obj)
        if not checked:
            limits.check_request(obj)
        obj = json_copy(conversion.to_storage(obj, rt))
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise Invalid(rt.group_kind, FieldError("metadata.name", "Required value"))
        ns = self.namespace_of(rt, namespace, meta)
        name = meta["name"]
        current = self.store.get(rt.group_kind, ns, name)
        if current is None:
            raise NotFound(rt.group_resource, name)
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and str(rv) != current["metadata"]["resourceVersion"]:
            raise _conflict(rt, name)
        sent = meta.get("managedFields") if subresource is None and rv not in (None, "") else None
        new = self._merge_update(rt, current, obj, subresource)
        if managed_fields is not None:
            _set_managed_fields(new, managed_fields)
        elif isinstance(sent, list) and sent and sent != current["metadata"].get("managedFields") \
                and fieldmanager.decode(sent) is not None:  # a client's own, when valid; else the stored ones
            _set_managed_fields(new, sent)
        _normalize(rt, new)
        if new == current:
            return Prepared("unchanged", rt, ns, name, current, expect_rv=current["metadata"]["resourceVersion"],
                            result="unchanged", subresource=subresource)
        hooks: tuple[str, ...] = ()
        if subresource == "status":
            from kctl.admission.validation import validate

            errors = validate(new, rt)
            if errors:
                raise Invalid(f'{rt.group_kind} "{name}"', errors)
        else:
            owned = _system_meta(new)
            new, hooks = self._admit("UPDATE", rt, ns, name, new, current, dry_run, None)
            _restore_system_meta(new, owned)
            self._check_crd(rt, new)
        if managed_fields is None:
            fieldmanager.record(rt, current, new, subresource=subresource)
        if "generation" in current["metadata"] and _spec_of(new) != _spec_of(current):
            new["metadata"]["generation"] = current["metadata"]["generation"] + 1
        limits.check_object(rt.group_kind, new)
        return Prepared("update", rt, ns, name, new, expect_rv=current["metadata"]["resourceVersion"],
                        result="configured", subresource=subresource, hooks=hooks)

    def _prepare_apply(self, obj: dict, namespace: str | None, *, dry_run: bool,
                       pending_namespaces: dict | None) -> Prepared:
        from kctl.machinery.apply import applied_object, unchanged_by_apply

        rt = self.resource_for(obj)
        obj = conversion.to_storage(obj, rt)
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise Invalid(rt.group_kind, FieldError("metadata.name", "Required value: apply needs a name"))
        ns = self.namespace_of(rt, namespace, meta)
        limits.check_request(obj)
        current = self.store.get(rt.group_kind, ns, meta["name"])
        pinned = meta.get("resourceVersion")
        if current is not None and pinned not in (None, "") \
                and str(pinned) != current["metadata"]["resourceVersion"]:
            # kubectl sends the manifest's resourceVersion in its patch: a precondition
            raise Conflict(f"error when applying patch: {_conflict(rt, meta['name']).message}")
        if current is None:
            return self._prepare_create(applied_object(obj, None, self.schema_of(rt)), ns if rt.namespaced else None,
                                        dry_run=dry_run, pending_namespaces=pending_namespaces)
        merged = applied_object(obj, current, self.schema_of(rt))
        merged["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        if unchanged_by_apply(merged, current):
            return Prepared("unchanged", rt, ns, meta["name"], current,
                            expect_rv=current["metadata"]["resourceVersion"], result="unchanged")
        return self._prepare_update(merged, ns if rt.namespaced else None, dry_run=dry_run, checked=True)

    def _prepare_delete(self, rt: ResourceType, name: str, namespace: str | None, *, propagation: str | None,
                        grace_period: int | None, resource_version: str | None, dry_run: bool) -> Prepared:
        if propagation not in (None, "Background", "Foreground", "Orphan"):
            raise BadRequest(f'invalid propagation policy "{propagation}": use Background, Foreground or Orphan')
        ns = self.namespace_of(rt, namespace)
        current = self.store.get(rt.group_kind, ns, name)
        if current is None:
            raise NotFound(rt.group_resource, name)
        if rt.group_kind == NAMESPACE and name in PROTECTED_NAMESPACES:
            raise Forbidden(f'namespace "{name}" is forbidden: this namespace may not be deleted')
        if resource_version and resource_version != current["metadata"]["resourceVersion"]:
            raise _conflict(rt, name)
        _, hooks = self._admit("DELETE", rt, ns, name, None, current, dry_run, None)
        return Prepared("delete", rt, ns, name, current, expect_rv=current["metadata"]["resourceVersion"],
                        propagation=propagation, grace_period=grace_period, result="deleted", hooks=hooks)

    def _admit(self, operation: str, rt: ResourceType, ns: str, name: str, obj: dict | None,
               old: dict | None, dry_run: bool,
               pending_namespaces: dict | None) -> tuple[dict | None, tuple[str, ...]]:
        """The admitted object (None for DELETE) and the names of the hooks that matched."""
        from kctl.admission import chain
        from kctl.admission.hooks import AdmissionRequest, matches

        ns_labels = None
        if rt.namespaced:
            ns_obj = (pending_namespaces or {}).get(ns) or self._batch_read(
                ("namespace", ns), lambda: self._config.get(NAMESPACE, "", ns) if self._config is not None
                else self.store.get(NAMESPACE, "", ns))
            ns_labels = (ns_obj or {}).get("metadata", {}).get("labels") or {}
        mutating, validating = self._hooks()
        request = AdmissionRequest(uid=str(uuid.uuid4()), operation=operation, rt=rt,
                                   namespace=ns if rt.namespaced else None, name=name, obj=obj,
                                   old_obj=old, dry_run=dry_run, user=self.acting_user)
        admitted = chain.admit(request, mutating=mutating, validating=validating, namespace_labels=ns_labels,
                               warn=self._warn, lister=self._admission_lister)
        return admitted, _matched_hooks(mutating, validating, request, ns_labels, matches)

    def _admission_lister(self, group_kind: str, namespace: str | None = None) -> list[dict]:
        """Stored objects for the built-in admission plugins (kctl.admission.plugins.Lister); remote reads: the
        cached kinds from their caches."""
        if self._config is not None:
            return self._batch_read(("list", group_kind, namespace), lambda: self._config.list(group_kind, namespace))
        return self._batch_read(("list", group_kind, namespace), lambda: self.store.list(group_kind, namespace)[0])

    def _hooks(self) -> tuple[list[dict], list[dict]]:
        """The admission hooks stored now (mutating, validating); remote reads: from their caches."""
        if self._config is not None:
            return self._batch_read(("hooks",), lambda: (self._config.list(HOOK_KINDS[0]),
                                                         self._config.list(HOOK_KINDS[1])))
        return self._batch_read(("hooks",), lambda: (self.store.list(HOOK_KINDS[0])[0],
                                                     self.store.list(HOOK_KINDS[1])[0]))

    def _batch_read(self, key: tuple, read: Callable[[], T]) -> T:
        """read(), or what it returned already in this write_all round (the admission plugins and hooks only read
        what they are given; Kubernetes' admission reads these from informer caches, staler than this)."""
        reads = getattr(self._tls, "reads", None)
        if reads is None:
            return read()
        if key not in reads:
            reads[key] = read()
        return reads[key]

    def _wrote(self, prepared: Prepared, obj: dict | None) -> None:
        """A committed write of a cached kind: this process's next read of the kind waits until its cache has it."""
        if self._config is not None and prepared.verb != "unchanged":
            self._config.written(prepared.rt.group_kind, obj)

    def _check_crd(self, rt: ResourceType, obj: dict) -> None:
        if rt.group_kind != CRD_KIND:
            return
        from kctl.admission.validation import validate_crd

        errors = validate_crd(obj)
        if errors:
            raise Invalid(f'{rt.group_kind} "{obj["metadata"]["name"]}"', errors)

    # -- writes: commit ----------------------------------------------------------------

    def _one(self, prepared: Prepared, dry_run: bool) -> dict:
        """Commit one prepared write (a dry run: its checks, rolled back); Conflict when the store gave up retrying."""
        if prepared.verb == "unchanged":
            return prepared.obj
        try:
            if dry_run:
                return self._dry_commit(prepared)
            obj = self.store.transact(lambda txn: self._commit(txn, prepared, dry_run))
            self._wrote(prepared, obj)
            return obj
        except CommitConflict:
            raise _conflict(prepared.rt, prepared.name) from None

    def _dry_commit(self, p: Prepared) -> dict:
        """Run the commit checks in a transaction that is rolled back."""
        box: list[dict] = []

        def check(txn: Transaction) -> None:
            box[:] = [self._commit(txn, p, True)]
            raise _Abort()

        try:
            self.store.transact(check)
        except _Abort:
            pass
        return box[0]

    def _commit(self, txn: Transaction, p: Prepared, dry_run: bool) -> dict:
        if p.verb == "unchanged":
            return p.obj
        kind = p.rt.group_kind
        prefetch = getattr(txn, "prefetch", None)
        if prefetch is not None:  # a remote store: this write's reads in one round trip
            prefetch(_keys_read(p))
        current = txn.get(kind, p.namespace, p.name)
        if p.verb == "create":
            if current is not None:
                raise AlreadyExists(p.rt.group_resource, p.name)
            if p.rt.namespaced:
                self._check_namespace(txn, p.namespace)
            obj = json_copy(p.obj)
            if kind == "Service":  # its ClusterIP and node ports, allocated in this transaction
                from kctl.apiserver.services import strategy

                strategy.before_create(txn, obj, now=now_rfc3339())
            return txn.put(kind, p.namespace, p.name, obj, event="ADDED")
        if current is None:
            raise NotFound(p.rt.group_resource, p.name)
        if current["metadata"]["resourceVersion"] != p.expect_rv:
            raise _conflict(p.rt, p.name)
        if p.verb == "update":
            new = json_copy(p.obj)
            if _finished_deleting(new["metadata"]):
                return self._remove(txn, p.rt, p.namespace, p.name, new)
            if kind == "Service" and p.subresource != "status":
                from kctl.apiserver.services import strategy

                strategy.before_update(txn, current, new, now=now_rfc3339())
            return txn.put(kind, p.namespace, p.name, new, event="MODIFIED")
        return self._commit_delete(txn, p, current)

    def _commit_delete(self, txn: Transaction, p: Prepared, current: dict) -> dict:
        meta = current["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        kind = p.rt.group_kind
        if meta.get("deletionTimestamp"):
            if p.grace_period == 0 and kind == "Pod":
                return self._remove(txn, p.rt, p.namespace, p.name, current)
            return current  # already terminating
        dependents = txn.dependents(meta["uid"])
        if p.propagation == "Orphan" and dependents:
            self._orphan(txn, meta["uid"], dependents)
        elif p.propagation == "Foreground" and dependents and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if kind == NAMESPACE and txn.exists_in_namespace(p.name):
            current.setdefault("spec", {})["finalizers"] = ["kubernetes"]
            current.setdefault("status", {})["phase"] = "Terminating"
            finalizers = finalizers or []
            return self._mark_deleting(txn, p, current, finalizers, force=True)
        if kind == "Pod" and self._needs_agent(txn, current, p.grace_period):
            return self._mark_deleting(txn, p, current, finalizers, force=True)
        if finalizers:
            return self._mark_deleting(txn, p, current, finalizers)
        if kind == CRD_KIND:
            self._drop_custom_objects(txn, current)
        return self._remove(txn, p.rt, p.namespace, p.name, current)

    def _mark_deleting(self, txn: Transaction, p: Prepared, obj: dict, finalizers: list[str], *,
                       force: bool = False) -> dict:
        meta = obj["metadata"]
        meta["deletionTimestamp"] = now_rfc3339()
        grace = p.grace_period
        if grace is None and p.rt.kind == "Pod":
            grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        meta["deletionGracePeriodSeconds"] = grace if grace is not None else 0
        if "generation" in meta:  # as Kubernetes' BeforeDelete: only where there is one
            meta["generation"] += 1
        if finalizers:
            meta["finalizers"] = finalizers
        return txn.put(p.rt.group_kind, p.namespace, p.name, obj, event="MODIFIED")

    def _needs_agent(self, txn: Transaction, pod: dict, grace_period: int | None) -> bool:
        """A bound pod on an existing node is deleted by its node agent after the grace period."""
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or grace_period == 0:
            return False
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            return False
        return txn.get("Node", "", node) is not None

    def _remove(self, txn: Transaction, rt: ResourceType, ns: str, name: str, obj: dict) -> dict:
        removed = txn.delete(rt.group_kind, ns, name, obj)
        if rt.group_kind == "Service":  # its addresses and node ports go back, in this transaction
            from kctl.apiserver.services import strategy

            strategy.after_delete(txn, removed, now=now_rfc3339())
        if rt.group_kind == NAMESPACE:
            return removed
        if rt.namespaced and ns:
            ns_obj = txn.get(NAMESPACE, "", ns)
            if ns_obj and ns_obj["metadata"].get("deletionTimestamp") and not txn.exists_in_namespace(ns):
                if not ns_obj["metadata"].get("finalizers"):
                    txn.delete(NAMESPACE, "", ns, ns_obj)
        return removed

    def _orphan(self, txn: Transaction, owner_uid: str, dependents: list[tuple[str, str, str]]) -> None:
        """Orphan propagation: drop the ownerReference from every dependent, in this transaction."""
        for kind, ns, name in dependents:
            dep = txn.get(kind, ns, name)
            if dep is None:
                continue
            refs = [r for r in dep["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
            if refs:
                dep["metadata"]["ownerReferences"] = refs
            else:
                dep["metadata"].pop("ownerReferences", None)
            txn.put(kind, ns, name, dep, event="MODIFIED")

    def _drop_custom_objects(self, txn: Transaction, crd: dict) -> None:
        spec = crd.get("spec") or {}
        group_kind = f'{(spec.get("names") or {}).get("kind")}.{spec.get("group")}'
        for obj in txn.list(group_kind):
            meta = obj["metadata"]
            txn.delete(group_kind, meta.get("namespace", ""), meta["name"], obj)

    def _check_namespace(self, txn: Transaction, ns: str) -> None:
        ns_obj = txn.get(NAMESPACE, "", ns)
        if ns_obj is None:
            raise NotFound("namespaces", ns)
        if ns_obj["metadata"].get("deletionTimestamp"):
            raise Forbidden(f'unable to create new content in namespace {ns} because it is being terminated')

    # -- the store (local administration) -----------------------------------------------

    def backup(self, dest: str | os.PathLike) -> int:
        """Write a consistent copy of the store to dest (mode 0600); the revision copied."""
        return self.store.backup(dest)

    def restore(self, source: str | os.PathLike) -> int:
        """Replace the store's content with a backup; the revision the store continues at."""
        return self.store.restore(source)

    def vacuum(self) -> tuple[int, int]:
        """Compact the change log and give free space back; the store file's size before and after, in bytes
        (0, 0 for a backend without a local file: etcd)."""
        before = os.path.getsize(self.store.path) if os.path.isfile(self.store.path) else 0
        self.store.vacuum()
        return before, os.path.getsize(self.store.path) if os.path.isfile(self.store.path) else 0

    def rotate_key(self) -> tuple[str, int, str]:
        """Re-encrypt stored Secrets with a new key: (its name, rows re-encrypted, the key file)."""
        name, rows = self.store.rotate_key()
        return name, rows, str(self.store.key_path)

    def close(self) -> None:
        """Stop the caches' threads and close the store's connections (this API is not used afterwards)."""
        if self._config is not None:
            self._config.close()
        self.store.close()

    # -- the audit log -----------------------------------------------------------------

    def _audit(self, events: list[dict]) -> None:
        """Append events to the audit log (after the transaction; never raises).

        Successful writes of the node agents' resource metrics (metrics.k8s.io, one per pod
        every resolution) are left out: Kubernetes never stores them, so they are not API
        changes an auditor looks for, and they would rotate the real ones out of the log.
        """
        events = [e for e in events if not _metrics_write(e)]
        if events and self.audit_log is not None:
            self.audit_log.record(events)

    def _event(self, verb: str, p: Prepared, obj: dict | None, received: str, **common) -> dict:
        """The event of a committed write (common: agent, sources, completed, shared by a batch)."""
        code = 201 if p.verb == "create" else 200
        rv = ((obj or {}).get("metadata") or {}).get("resourceVersion", "")
        if p.verb == "delete" and obj is not None and (obj.get("metadata") or {}).get("deletionTimestamp") \
                and self.store.get(p.rt.group_kind, p.namespace, p.name) is not None:
            code = 202  # accepted: the object waits for finalizers or its node agent
        return self._ref_event(verb, _Target.of(p), code, received, rv=rv, hooks=p.hooks, **common)

    def _ref_event(self, verb: str, target: _Target, code: int, received: str, *, rv: str = "",
                   hooks: tuple[str, ...] = (), **common) -> dict:
        return audit.event(verb=verb, user=self.acting_user, ref=target.ref(), code=code, received=received,
                           resource_version=rv, hooks=hooks, **common)

    def _failure_event(self, verb: str, target: _Target, exc: APIError, received: str) -> dict:
        """The event of a refused write: its status code and reason (no message for a Secret)."""
        secret = (target.rt is not None and target.rt.group_kind == "Secret") or target.kind == "Secret"
        hook = _HOOK_NAMED.search(exc.message) if isinstance(exc, Forbidden) else None
        return audit.event(verb=verb, user=self.acting_user, ref=target.ref(), code=exc.code or 500,
                           received=received,
                           reason=exc.reason, message="" if secret else exc.message,
                           hooks=(hook.group(1),) if hook else ())

    def _target_of(self, obj: object, namespace: str | None, subresource: str | None = None) -> "_Target":
        """The target of a write of obj, its kind resolved when it can be (for the audit log)."""
        target = _target_of(obj, namespace, subresource)
        try:
            rt = self.resource_for(obj)
        except APIError:
            return target
        ns = (target.namespace or "default") if rt.namespaced else ""
        return _Target(rt, ns, target.name, subresource)

    def _safe_namespace(self, rt: ResourceType, namespace: str | None) -> str:
        try:
            return self.namespace_of(rt, namespace)
        except APIError:
            return ""

    # -- helpers -----------------------------------------------------------------------

    def _merge_update(self, rt: ResourceType, current: dict, obj: dict, subresource: str | None) -> dict:
        """The object an update stores: system metadata from current; status or spec per path."""
        cur_meta = current["metadata"]
        if subresource == "status":
            new = json_copy(current)
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            return new
        if subresource is not None:
            raise BadRequest(f'unknown subresource "{subresource}"')
        new = obj
        meta = new["metadata"]
        for key in SYSTEM_META:
            if key in cur_meta:
                meta[key] = cur_meta[key]
            else:
                meta.pop(key, None)
        if rt.namespaced:
            meta["namespace"] = cur_meta.get("namespace")
        else:
            meta.pop("namespace", None)
        if rt.has_status:
            if "status" in current:
                new["status"] = current["status"]
            else:
                new.pop("status", None)
        if meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(cur_meta.get("finalizers") or [])
            if added:
                raise Forbidden(f'{rt.group_kind} "{meta["name"]}" is being deleted: no new finalizers '
                                f'may be added ({", ".join(sorted(added))})')
        return new

    def namespace_of(self, rt: ResourceType, namespace: str | None, meta: dict | None = None) -> str:
        """The namespace an object lives in ("" for cluster-scoped kinds); kctl.machinery.typeinfo.namespace_of."""
        return typeinfo.namespace_of(rt, namespace, meta)

    def schema_of(self, rt: ResourceType) -> dict | None:
        """The schema apply and strategic merge use for rt; kctl.machinery.typeinfo.schema_of."""
        return typeinfo.schema_of(rt)

    def _capture(self, sink: list[str], fn, *args):
        """Run fn with this thread's admission warnings collected into sink, not sent to warn."""
        self._tls.sink = sink
        try:
            return fn(*args)
        finally:
            self._tls.sink = None

    def _warn(self, message: str) -> None:
        sink = getattr(self._tls, "sink", None)
        if sink is not None:
            sink.append(message)
        else:
            self.warn(message)


class _Abort(Exception):
    """Rolls back a transaction on purpose (dry run, atomic failure); a batch's (taken, conflicts) ride along."""

    def __init__(self, *, taken: list[int] | None = None, conflicts: list[int] | None = None) -> None:
        super().__init__()
        self.taken, self.conflicts = taken or [], conflicts or []


class _Full(Exception):
    """Rolls back the write that took a batch's transaction over the store's limit (it goes in the next one)."""


class _TooManyWrites(Exception):
    """An atomic batch needs more writes than one transaction of the store holds."""


class _CountedWrites:
    """A Transaction that counts the writes (puts and deletes) made through it and raises `over` (when set)
    instead of making one past `limit`, before the store sees it; `writes` is set back by the caller when a
    savepoint rolls some back."""

    def __init__(self, txn: Transaction, limit: int | None) -> None:
        self.txn = txn
        self.limit = limit
        self.writes = 0
        self.over: type[Exception] | None = None

    def _count(self) -> None:
        if self.limit is not None and self.over is not None and self.writes >= self.limit:
            raise self.over()
        self.writes += 1

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        return self.txn.get(kind, namespace, name)

    def exists_in_namespace(self, namespace: str) -> bool:
        return self.txn.exists_in_namespace(namespace)

    def put(self, kind: str, namespace: str, name: str, obj: dict, *, event: str) -> dict:
        self._count()
        return self.txn.put(kind, namespace, name, obj, event=event)

    def delete(self, kind: str, namespace: str, name: str, obj: dict) -> dict:
        self._count()
        return self.txn.delete(kind, namespace, name, obj)

    def list(self, kind: str) -> list[dict]:
        return self.txn.list(kind)

    def dependents(self, owner_uid: str) -> list[tuple[str, str, str]]:
        return self.txn.dependents(owner_uid)


def _keys_read(p: Prepared) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of what committing p reads first: the object, and a create's namespace."""
    if p.verb == "unchanged":
        return []
    found = [(p.rt.group_kind, p.namespace, p.name)]
    if p.verb == "create" and p.rt.namespaced:
        found.append((NAMESPACE, "", p.namespace))
    return found


def _binding_conflict(name: str, why: str = "the object has been modified; please apply your changes to the "
                      "latest version and try again") -> Conflict:
    """The Conflict of a binding that cannot be made as asked."""
    return Conflict(f'Operation cannot be fulfilled on pods/binding "{name}": {why}')


def _too_large_for_a_transaction(objects: int, limit: int, where: str, *, more_writes: bool = False) -> str:
    """The one line refusing an atomic batch that one transaction of the store cannot hold."""
    needs = f"{objects} objects needs more writes than" if more_writes else f"{objects} objects is more than"
    return (f"an atomic write of {needs} one transaction of the store {where} holds ({limit} writes): "
            f"leave out --atomic, or write them in parts")


def _finished_deleting(meta: dict) -> bool:
    """An update leaves nothing to wait for: terminating, no finalizers, and no grace left.

    As Kubernetes' deleteForEmptyFinalizers: a pod still in its grace period (its node agent
    stops it, then deletes it with grace 0) stays while its status is written.
    """
    return bool(meta.get("deletionTimestamp")) and not meta.get("finalizers") \
        and not meta.get("deletionGracePeriodSeconds")


def op_is_retryable(op: str, obj: dict | None = None) -> bool:
    """apply re-merges against the newer object; an update retries only without a resourceVersion."""
    if op == "apply":
        return True
    if op in ("update", "replace", "update_status", "delete") and isinstance(obj, dict):
        meta = obj.get("metadata")
        return isinstance(meta, dict) and meta.get("resourceVersion") in (None, "")
    return False


def _backoff(attempt: int) -> None:
    """Sleep before attempt+1 of a write that met a Conflict: short, growing, jittered."""
    delay = min(RETRY_BACKOFF_BASE * (2 ** min(attempt, 16)), RETRY_BACKOFF_CAP)
    time.sleep(delay * random.uniform(0.5, 1.5))


def _system_meta(obj: dict) -> dict:
    """The server-owned metadata fields of obj, as they are before admission."""
    meta = obj.get("metadata") or {}
    return {key: copy.deepcopy(meta[key]) for key in SYSTEM_META if key in meta}


def _restore_system_meta(obj: dict, owned: dict) -> None:
    """Undo what admission (a mutating hook) did to server-owned metadata, as Kubernetes does."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    for key in SYSTEM_META:
        if key in owned:
            meta[key] = copy.deepcopy(owned[key])
        else:
            meta.pop(key, None)


def _set_managed_fields(obj: dict, managed: object) -> None:
    """Put a managedFields value (a copy) on obj's metadata; nothing (or an empty list) removes it."""
    meta = obj.setdefault("metadata", {})
    if isinstance(managed, list) and managed:
        meta["managedFields"] = copy.deepcopy(managed)
    else:
        meta.pop("managedFields", None)


def _matched_hooks(mutating: list[dict], validating: list[dict], request: object, ns_labels: dict | None,
                   matches: Callable[[dict, object, dict | None], bool]) -> tuple[str, ...]:
    """Names of the hooks a request went to (for the audit log); a malformed one is left out."""
    names: set[str] = set()
    for hook in (*mutating, *validating):
        try:
            if matches(hook, request, ns_labels):
                names.add(str((hook.get("metadata") or {}).get("name", "")))
        except APIError:
            continue
    names.discard("")
    return tuple(sorted(names))


@dataclass(frozen=True)
class _Target:
    """What a request was about, as far as it is known (for the audit log)."""

    rt: ResourceType | None
    namespace: str
    name: str
    subresource: str | None = None
    kind: str = ""  # when rt is unknown: the kind the request named

    @staticmethod
    def of(p: "Prepared | None") -> "_Target | None":
        return None if p is None else _Target(p.rt, p.namespace, p.name, p.subresource)

    def ref(self) -> audit.ObjectRef:
        rt = self.rt
        if rt is None:
            return audit.ObjectRef(resource=self.kind.lower(), namespace=self.namespace, name=self.name)
        return audit.ObjectRef(resource=rt.plural, namespace=self.namespace if rt.namespaced else "", name=self.name,
                               api_group=rt.group, api_version=rt.version, subresource=self.subresource or "")


def _target_of(obj: object, namespace: str | None, subresource: str | None = None) -> _Target:
    """The target of a write of obj, before its kind is resolved."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    kind = obj.get("kind") if isinstance(obj, dict) else None
    ns = meta.get("namespace") or namespace or ""
    name = meta.get("name") or meta.get("generateName") or ""
    return _Target(None, str(ns), str(name), subresource, kind=str(kind or ""))


def _op_verb(op: str, p: "Prepared | None") -> str:
    """The Kubernetes verb of a write_all op: apply creates or patches (as kubectl does)."""
    if op == "apply":
        return "create" if p is not None and p.verb == "create" else "patch"
    if op in ("update", "replace", "update_status"):
        return "update"
    if op in ("create", "delete"):
        return op
    return {"create": "create", "delete": "delete"}.get(p.verb if p is not None else "", "update")


def _conflict(rt: ResourceType, name: str) -> Conflict:
    return Conflict(f'Operation cannot be fulfilled on {rt.group_resource} "{name}": the object has been '
                    f"modified; please apply your changes to the latest version and try again")


def _pinned_rv(patch) -> str | None:
    if isinstance(patch, dict):
        rv = (patch.get("metadata") or {}).get("resourceVersion") if isinstance(patch.get("metadata"), dict) else None
        return str(rv) if rv else None
    return None


def _selected(obj: dict, label_selector, field_selector) -> bool:
    if label_selector is not None and not label_selector.matches(obj.get("metadata", {}).get("labels") or {}):
        return False
    return field_selector is None or field_selector.matches(obj)


def _normalize(rt: ResourceType, obj: dict) -> None:
    """What Kubernetes does on the way in: a Secret's stringData becomes base64 data."""
    if rt.group_kind == "Secret" and isinstance(obj.get("stringData"), dict):
        import base64

        data = obj.get("data") if isinstance(obj.get("data"), dict) else {}
        for key, value in obj.pop("stringData").items():
            if isinstance(value, str):
                data[key] = base64.b64encode(value.encode()).decode()
        obj["data"] = data


def _os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers): a name still identifies the writer
        return "unknown"


__all__ = ["APIServer", "Binding", "WriteResult", "now_rfc3339"]
