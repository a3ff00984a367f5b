"""The API as a contract: everything a client of the API may do, and nothing more.

Clients (the CLI, controllers, the scheduler, node agents, git sync, the fake kubelet,
event recording) hold an `API` and call only these methods. Three classes implement it:
kctl.apiserver.server.APIServer (in process, over a local store),
kctl.apiserver.remote.RemoteAPIServer (a control host's API over SSH, `--server ssh://...`) and
kctl.apiserver.rest.client.RESTAPIClient (a Kubernetes REST API over HTTPS, `--kubeconfig`).
A client never reaches the store behind an API or a private method of it;
tests/unit/test_layering.py checks that no module outside kctl/store and kctl/apiserver does, and
tests/unit/apiserver/test_contract.py that both classes have every method below with a
compatible signature.

What a client may do:
- look kinds up: `registry`, `resource(name)`, `resource_for(obj)`, and what follows from
  a kind alone: `namespace_of(rt, namespace, meta)`, `schema_of(rt)`;
- read: `get` (NotFound when absent), `find` (None when absent), `list` (items and the
  list's revision), `get_by_uid` (any kind), `revision()` (the newest change);
- follow changes: `watch(rt or None, since=revision)`, (type, object) per change; an
  object's metadata.resourceVersion is the revision of its change;
- write, with Kubernetes' semantics (admission, optimistic concurrency, the audit log):
  `create`, `update`, `update_status`, `patch`, `apply`, `apply_server_side`, `delete`, `bind`, `evict`,
  `create_token` (a ServiceAccount's bound token, kctl.apiserver.tokens), and batched,
  one transaction each: `write_all`, `update_status_all`, `bind_all`;
- administer the store where it is local: `backup`, `restore`, `vacuum`, `rotate_key`
  (the remote form refuses them with one BadRequest line), `where` (the store's location
  as messages show it), `local_path` (its file, when it is on this host), `close()`.

Besides the Protocol, the two values the verbs exchange live here: `Binding` (a
pods/binding request) and `WriteResult` (what a batched write did with one object).
The module imports nothing at run time beyond the standard library and the object model's
errors, so a client costs no start-up time by importing it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Protocol, runtime_checkable

if TYPE_CHECKING:
    from kctl.machinery.errors import APIError
    from kctl.machinery.resources import Registry, ResourceType


@dataclass(frozen=True)
class Binding:
    """A pods/binding request: put the pod namespace/name on node_name (uid: a precondition)."""

    namespace: str
    name: str
    node_name: str
    uid: str | None = None


@dataclass
class WriteResult:
    """What write_all did with one object: the stored object and apply's word, or the error."""

    obj: dict | None = None
    action: str = ""
    error: APIError | None = None
    warnings: list[str] = field(default_factory=list)


@runtime_checkable
class API(Protocol):
    """What clients may call on an API server, local or remote (see the module docstring)."""

    @property
    def user(self) -> str:
        """Who this API's writes are made as (the audit log's user)."""

    @property
    def where(self) -> str:
        """Where the store is, as messages show it (a path, or the control host's URL)."""

    @property
    def local_path(self) -> str | None:
        """The store's file when it is on this host; None for an API reached over SSH."""

    @property
    def registry(self) -> Registry:
        """Built-in kinds plus those of the stored CustomResourceDefinitions."""

    # -- kinds ------------------------------------------------------------------------------

    def resource(self, name: str) -> ResourceType:
        """The kind a name, plural, short name or Kind.group names; BadRequest if none."""

    def resource_for(self, obj: dict) -> ResourceType:
        """The kind of an object (its apiVersion and kind); BadRequest if unknown."""

    def namespace_of(self, rt: ResourceType, namespace: str | None, meta: dict | None = None) -> str:
        """The namespace an object of rt lives in ("" for cluster-scoped kinds)."""

    def schema_of(self, rt: ResourceType) -> dict | None:
        """The schema apply and strategic merge patch use for rt (None: JSON merge)."""

    # -- reads ------------------------------------------------------------------------------

    def get(self, rt: ResourceType, name: str, *, namespace: str | None = None) -> dict:
        """One object; NotFound when absent."""

    def find(self, rt: ResourceType, name: str, *, namespace: str | None = None) -> dict | None:
        """One object as stored now, or None when absent."""

    def list(self, rt: ResourceType, *, namespace: str | None = None, label_selector=None,
             field_selector=None) -> tuple[list[dict], int]:
        """The objects of a kind (one namespace, or all when None) and the list's revision."""

    def get_by_uid(self, uid: str) -> dict | None:
        """The live object with this uid (any kind), or None."""

    def revision(self) -> int:
        """The revision of the newest change (a watch from it sees every later one)."""

    def watch(self, rt: ResourceType | None, *, namespace: str | None = None, since: int, label_selector=None,
              field_selector=None, stop: threading.Event | None = None, timeout: float | None = None,
              known: set | None = None) -> Iterator[tuple[str, dict]]:
        """(type, object) for each matching change after `since` (rt None: every kind); Gone if compacted."""

    # -- writes -----------------------------------------------------------------------------

    def create(self, obj: dict, *, namespace: str | None = None, dry_run: bool = False) -> dict:
        """Create an object; AlreadyExists if it does."""

    def update(self, obj: dict, *, namespace: str | None = None, subresource: str | None = None,
               dry_run: bool = False) -> dict:
        """Replace an object, or its status (subresource="status")."""

    def update_status(self, obj: dict, *, dry_run: bool = False) -> dict:
        """Write an object's status subresource."""

    def update_status_all(self, objs: list[dict], *, dry_run: bool = False) -> list[WriteResult]:
        """Write the status of many objects in one transaction; each succeeds or fails alone."""

    def patch(self, rt: ResourceType, name: str, patch, *, patch_type: str = "strategic",
              namespace: str | None = None, subresource: str | None = None, dry_run: bool = False) -> dict:
        """A json, merge or strategic merge patch."""

    def apply(self, obj: dict, *, namespace: str | None = None, dry_run: bool = False) -> WriteResult:
        """kubectl apply of one object."""

    def apply_server_side(self, rt: ResourceType, name: str, obj: dict, *, namespace: str | None = None,
                          field_manager: str, force: bool = False, dry_run: bool = False) -> dict:
        """Server-side apply by field_manager: create, or merge as structured-merge-diff; ApplyConflict (409)."""

    def delete(self, rt: ResourceType, name: str, *, namespace: str | None = None,
               propagation: str | None = None, grace_period: int | None = None,
               resource_version: str | None = None, dry_run: bool = False) -> dict:
        """Delete an object, or mark it for deletion when finalizers or its node agent must act first."""

    def write_all(self, ops: list[tuple[str, dict]], *, namespace: str | None = None, dry_run: bool = False,
                  atomic: bool = False) -> list[WriteResult]:
        """Many writes (apply | create | update | replace | update_status | delete) in one transaction."""

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None) -> dict:
        """pods/binding: put an unbound pod on a node."""

    def bind_all(self, bindings: list[Binding]) -> list[WriteResult]:
        """Many bindings in one transaction; each fails alone."""

    def evict(self, namespace: str | None, name: str, *, grace_period: int | None = None,
              dry_run: bool = False) -> dict:
        """pods/eviction: delete the pod unless its PodDisruptionBudget forbids it (TooManyRequests); a Status."""

    def create_token(self, namespace: str | None, name: str, token_request: dict) -> dict:
        """serviceaccounts/token: a bound, expiring token for a ServiceAccount (a TokenRequest with its status)."""

    # -- the store, where it is local -------------------------------------------------------

    def backup(self, dest: str | os.PathLike) -> int:
        """Write a consistent copy of the store to dest; the revision copied."""

    def restore(self, source: str | os.PathLike) -> int:
        """Replace the store's content with a backup; the revision the store continues at."""

    def vacuum(self) -> tuple[int, int]:
        """Compact the change log and give free space back; the store's size before and after, in bytes."""

    def rotate_key(self) -> tuple[str, int, str]:
        """Re-encrypt stored Secrets with a new key: (its name, rows re-encrypted, the key file)."""

    def close(self) -> None:
        """Release what this API holds (the store's connections, or the ssh connection)."""


__all__ = ["API"]
