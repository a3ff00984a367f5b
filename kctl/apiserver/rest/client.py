"""RESTAPIClient: the API contract (kctl.apiserver.contract.API) over a Kubernetes REST API, HTTPS.

kctl.cli.connect returns one when the command line selects a kubeconfig or an https:// server
(`kctl --kubeconfig K get pods`), and `kctl daemon --server https://...` (node mode) runs its
node agent on one. It speaks to kctl's own HTTPS API (kctl.kubeapi) and, for what the REST API
has a form for, to any Kubernetes API server.

How each method maps onto the REST API:
- kinds: the built-in kinds plus those of the server's CustomResourceDefinitions (listed, and
  turned into kinds by the same kctl.machinery.crd the server uses; built-in names need no
  round trip); a user who may not list CRDs gets the other kinds from discovery (/apis);
  `namespace_of`/`schema_of` are computed here (kctl.machinery.typeinfo), with the kubeconfig
  context's namespace as the default, as kubectl;
- get/find/list (GET, `labelSelector`/`fieldSelector`, `continue` followed when the server pages;
  the list's resourceVersion is its revision); `revision()`: a LIST of one namespace's
  resourceVersion; watch: GET `?watch=1&resourceVersion=since`, one JSON event per line;
  an ERROR event's Status raises its error (410 -> Gone);
- create POST, update/update_status PUT (…/status), patch PATCH with the three content types,
  delete DELETE with DeleteOptions (propagationPolicy, gracePeriodSeconds, preconditions),
  bind POST pods/NAME/binding, evict POST pods/NAME/eviction, `dryRun=All` for dry runs;
- apply_server_side: PATCH `application/apply-patch+yaml` with `fieldManager` and `force` (the
  server's field managers decide; an ApplyConflict keeps its field causes);
- apply: kctl's client-side apply, as kubectl's: GET the object, POST it when absent, else the
  three-way strategic merge patch of kctl.machinery.apply (JSON merge for custom kinds) with
  the current resourceVersion as a precondition, computed again on Conflict (as APIServer.apply
  retries); "unchanged" when it would change nothing but the last-applied annotation;
- write_all/update_status_all/bind_all: one request per object, in order, each failing alone
  (no transaction: atomic=True of more than one write is refused with one BadRequest line);
- get_by_uid (no REST form) and the store's administration (backup, restore, vacuum,
  rotate_key) are refused with one line.
Errors are the kctl.machinery.errors classes of the server's Status (kctl.apiserver.rest.status);
Warning headers (admission warnings) go to `warn`, or to a batched write's WriteResult.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator

from kctl.apiserver.rest.kubeconfig import Connection
from kctl.apiserver.rest.status import error_of
from kctl.apiserver.rest.transport import Transport, path_segment
from kctl.machinery import typeinfo
from kctl.machinery.conversion import to_storage
from kctl.machinery.errors import APIError, BadRequest, ClientSideError, Conflict, Gone, NotFound
from kctl.machinery.resources import Registry, ResourceType, builtin_registry

if TYPE_CHECKING:
    from kctl.apiserver.contract import Binding, WriteResult

log = logging.getLogger("kctl.rest")

#: objects per LIST request; 0: all in one (kctl's server lists a whole kind to answer any page, so pages of
#: kubectl's 500 cost more requests for the same work); a server that pages anyway is followed by `continue`
LIST_CHUNK = 0
#: seconds the registry (built-in kinds + CRDs) is reused before it is asked for again
REGISTRY_TTL = 5.0
#: a registry younger than this (seconds) is not asked for again when a name is not in it
FRESH = 0.5
#: how many times an apply that meets a Conflict computes its patch again
APPLY_ATTEMPTS = 5
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PATCH_TYPES = {"json": "application/json-patch+json", "merge": "application/merge-patch+json",
               "strategic": "application/strategic-merge-patch+json"}


def _user_agent() -> str:
    from kctl.apiserver.audit import user_agent

    return user_agent()


class RESTAPIClient:
    """The API of a Kubernetes REST API server over HTTPS (see the module docstring)."""

    def __init__(self, connection: Connection, *, warn: Callable[[str], None] | None = None,
                 transport: Transport | None = None) -> None:
        self.connection = connection
        self.transport = transport or Transport(connection, user_agent=_user_agent)
        self.warn = warn or (lambda message: log.warning("%s", message))
        self.default_namespace = connection.namespace or "default"
        self._builtin = builtin_registry()
        self._registry: Registry | None = None
        self._registry_at = 0.0
        self._lock = threading.Lock()

    def __enter__(self) -> "RESTAPIClient":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    # -- where --------------------------------------------------------------------------------

    @property
    def where(self) -> str:
        """The API server's URL, as messages show it."""
        return self.connection.server

    @property
    def local_path(self) -> str | None:
        """None: the store is behind the API server."""
        return None

    @property
    def user(self) -> str:
        """Who this client's writes are made as: the client certificate's CN, or the token's subject."""
        from kctl.apiserver.rest.identity import user_of

        return user_of(self.connection)

    def close(self) -> None:
        """Close the idle connections (a later call opens new ones)."""
        self.transport.close()

    # -- kinds --------------------------------------------------------------------------------

    @property
    def registry(self) -> Registry:
        """Built-in kinds plus those of the server's CustomResourceDefinitions."""
        return self._kinds(fresh=False)

    def _kinds(self, *, fresh: bool) -> Registry:
        with self._lock:
            if not fresh and self._registry is not None and time.monotonic() - self._registry_at < REGISTRY_TTL:
                return self._registry
        from kctl.machinery.crd import crd_resource_types

        registry = builtin_registry()
        try:
            crds = self._list_path(CRD_PATH, {})[0]
        except APIError as exc:  # a user who may not list CRDs learns the other kinds from discovery
            if exc.code not in (403, 404):
                raise
            crds = None
        for crd in crds or ():
            if (crd.get("metadata") or {}).get("deletionTimestamp"):
                continue
            for rt in crd_resource_types(crd):
                registry.add(rt)
        if crds is None:
            for rt in self._discovered(registry):
                registry.add(rt)
        with self._lock:
            self._registry, self._registry_at = registry, time.monotonic()
        return registry

    def _discovered(self, known: Registry) -> list[ResourceType]:
        """The kinds discovery (/apis, then each group-version) lists that `known` lacks: custom kinds, with no
        schema (crd_schema {}: JSON merge patch, as Kubernetes does for them)."""
        out: list[ResourceType] = []
        groups = self._call("GET", "/apis")
        for group in (groups or {}).get("groups") or ():
            preferred = (group.get("preferredVersion") or {}).get("groupVersion")
            if not preferred or any(rt.group == group.get("name") for rt in known):
                continue
            try:
                listing = self._call("GET", f"/apis/{preferred}")
            except APIError:
                continue
            version = preferred.partition("/")[2]
            for res in (listing or {}).get("resources") or ():
                name = res.get("name") or ""
                if "/" in name or not res.get("kind"):
                    continue
                has_status = any(r.get("name") == f"{name}/status" for r in listing.get("resources") or ())
                out.append(ResourceType(group["name"], version, res["kind"], name, bool(res.get("namespaced")),
                                        tuple(res.get("shortNames") or ()), crd_schema={}, has_status=has_status))
        return out

    def resource(self, name: str) -> ResourceType:
        try:  # built-in kinds always win a lookup, so they need no round trip
            return self._builtin.lookup(name)
        except BadRequest:
            return self._find_kind(lambda registry: registry.lookup(name))

    def resource_for(self, obj: dict) -> ResourceType:
        if not isinstance(obj, dict):
            raise BadRequest("object must be a mapping")
        try:
            return self._builtin.for_object(obj)
        except BadRequest:
            return self._find_kind(lambda registry: registry.for_object(obj))

    def _find_kind(self, find: Callable[[Registry], ResourceType]) -> ResourceType:
        """find in the cached registry; on a miss, once more in a fresh one (a CRD made since), unless it is."""
        registry = self._kinds(fresh=False)
        try:
            return find(registry)
        except BadRequest:
            with self._lock:
                just_asked = time.monotonic() - self._registry_at < FRESH
            if just_asked:
                raise
            return find(self._kinds(fresh=True))

    def namespace_of(self, rt: ResourceType, namespace: str | None, meta: dict | None = None) -> str:
        """As APIServer.namespace_of, with the kubeconfig context's namespace as the default."""
        if rt.namespaced and not namespace and not (meta or {}).get("namespace"):
            namespace = self.default_namespace
        return typeinfo.namespace_of(rt, namespace, meta)

    def schema_of(self, rt: ResourceType) -> dict | None:
        """As APIServer.schema_of (kctl.machinery.typeinfo; no round trip)."""
        return typeinfo.schema_of(rt)

    # -- paths --------------------------------------------------------------------------------

    @staticmethod
    def path(rt: ResourceType, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        """The REST path of a kind's collection, one object, or its subresource."""
        out = "/api/v1" if not rt.group else f"/apis/{rt.group}/{rt.version}"
        if rt.namespaced and namespace:
            out += f"/namespaces/{path_segment(namespace)}"
        out += f"/{rt.plural}"
        if name is not None:
            if not name:
                raise BadRequest(f"resource name may not be empty ({rt.group_resource})")
            out += f"/{path_segment(name)}"
            if subresource:
                out += f"/{subresource}"
        return out

    def _call(self, method: str, path: str, *, query: dict | None = None, body: object = None,
              content_type: str = "application/json", warnings: list[str] | None = None) -> object:
        """One request; warnings go to `warnings` when given, else to warn."""
        if method != "GET" and path.startswith(CRD_PATH):
            with self._lock:  # this client changes a CRD: the next lookup of a kind asks the server again
                self._registry, self._registry_at = None, 0.0
        return self.transport.call(method, path, query=query, body=body, content_type=content_type,
                                   warn=warnings.append if warnings is not None else self.warn)

    # -- reads --------------------------------------------------------------------------------

    def get(self, rt: ResourceType, name: str, *, namespace: str | None = None) -> dict:
        obj = self._call("GET", self.path(rt, self.namespace_of(rt, namespace), name))
        return _typed(rt, obj)

    def find(self, rt: ResourceType, name: str, *, namespace: str | None = None) -> dict | None:
        try:
            return self.get(rt, name, namespace=namespace)
        except NotFound:
            return None

    def get_by_uid(self, uid: str) -> dict | None:
        raise BadRequest("looking an object up by uid has no form in the Kubernetes REST API "
                         f"({self.where}): name its kind and name")

    def revision(self) -> int:
        """The newest change's revision: the resourceVersion of a one-item LIST."""
        data = self._call("GET", "/api/v1/namespaces", query={"limit": 1})
        return _revision((data or {}).get("metadata") or {})

    def list(self, rt: ResourceType, *, namespace: str | None = None, label_selector=None,
             field_selector=None) -> tuple[list[dict], int]:
        """The objects of a kind (one namespace, or every one when None) and the list's revision."""
        if label_selector is not None and label_selector.match_nothing:
            return [], self.revision()
        ns = self.namespace_of(rt, namespace) if (rt.namespaced and namespace is not None) else None
        query = {"labelSelector": str(label_selector) if label_selector is not None else None,
                 "fieldSelector": str(field_selector) if field_selector is not None else None}
        items, revision = self._list_path(self.path(rt, ns), {k: v for k, v in query.items() if v})
        return [_typed(rt, item) for item in items], revision

    def _list_path(self, path: str, query: dict) -> tuple[list[dict], int]:
        """Every item of a LIST, page by page; the first page's revision."""
        items: list[dict] = []
        revision: int | None = None
        token = None
        while True:
            data = self._call("GET", path, query={**query, "limit": LIST_CHUNK or None, "continue": token})
            if not isinstance(data, dict):
                raise BadRequest(f"the server answered a LIST of {path} with no list")
            items.extend(data.get("items") or ())
            meta = data.get("metadata") or {}
            if revision is None:
                revision = _revision(meta)
            token = meta.get("continue")
            if not token:
                return items, revision

    def watch(self, rt: ResourceType | None, *, namespace: str | None = None, since: int, label_selector=None,
              field_selector=None, stop: threading.Event | None = None, timeout: float | None = None,
              known: set | None = None) -> Iterator[tuple[str, dict]]:
        """(type, object) per change after `since`; the server filters by selectors (`known` is not needed)."""
        if rt is None:
            raise BadRequest(f"a watch of every kind has no form in the Kubernetes REST API ({self.where})")
        if label_selector is not None and label_selector.match_nothing:
            if stop is not None:
                stop.wait(timeout)
            return
        ns = self.namespace_of(rt, namespace) if (rt.namespaced and namespace is not None) else None
        query = {"watch": "1", "resourceVersion": str(since), "allowWatchBookmarks": "true",
                 "labelSelector": str(label_selector) if label_selector is not None else None,
                 "fieldSelector": str(field_selector) if field_selector is not None else None,
                 "timeoutSeconds": max(1, int(timeout + 0.999)) if timeout is not None else None}
        stream = self.transport.stream("GET", self.path(rt, ns), query={k: v for k, v in query.items() if v})
        try:
            stream.stop_when(stop, None if timeout is None else time.monotonic() + timeout)
            for line in stream.lines():
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    raise BadRequest(f"the server sent a watch event that is not JSON: {line[:100]!r}") from None
                kind, obj = event.get("type"), event.get("object")
                if kind == "BOOKMARK":
                    continue
                if kind == "ERROR":
                    raise _watch_error(obj)
                if kind in ("ADDED", "MODIFIED", "DELETED") and isinstance(obj, dict):
                    yield kind, _typed(rt, obj)
        finally:
            stream.close()

    # -- pod logs (the CLI's `kctl logs` over HTTPS; not part of the contract) -----------------

    def pod_logs(self, namespace: str, name: str, *, container: str | None = None, follow: bool = False,
                 tail: int | None = None, since_seconds: int | None = None, previous: bool = False,
                 timestamps: bool = False) -> Iterator[bytes]:
        """The bytes of pods/NAME/log as they arrive (follow: until the container ends)."""
        query = {"container": container, "follow": "true" if follow else None,
                 "tailLines": tail, "sinceSeconds": since_seconds, "previous": "true" if previous else None,
                 "timestamps": "true" if timestamps else None}
        pods = self._builtin.lookup("pods")
        stream = self.transport.stream("GET", self.path(pods, namespace, name, "log"),
                                       query={k: v for k, v in query.items() if v is not None}, accept="*/*")
        try:
            yield from stream.chunks()
        finally:
            stream.close()

    def pod_exec(self, namespace: str, name: str, command: list[str], *, container: str | None = None,
                 stdin: bytes | None = None, out: Callable[[bytes], None], err: Callable[[bytes], None],
                 failure: Callable[[str], None]) -> int:
        """pods/NAME/exec over a WebSocket (kctl.apiserver.rest.channels): the command's exit code."""
        from urllib.parse import urlencode

        from kctl.apiserver.rest.channels import exec_over_websocket

        pods = self._builtin.lookup("pods")
        query = [("command", word) for word in command] + [("stdout", "true"), ("stderr", "true")]
        if container:
            query.append(("container", container))
        if stdin is not None:
            query.append(("stdin", "true"))
        target = self.transport.url(self.path(pods, namespace, name, "exec")) + "?" + urlencode(query)
        sock, host, headers = self.transport.open_socket()
        try:
            return exec_over_websocket(sock, host, target, headers, stdin=stdin, out=out, err=err, failure=failure)
        except OSError as exc:
            raise self.transport.unreachable(exc) from None
        finally:
            try:
                sock.close()
            except OSError:
                pass

    # -- writes -------------------------------------------------------------------------------

    def create(self, obj: dict, *, namespace: str | None = None, dry_run: bool = False) -> dict:
        return self._create(obj, namespace=namespace, dry_run=dry_run, warnings=None)

    def _create(self, obj: dict, *, namespace: str | None, dry_run: bool, warnings: list[str] | None) -> dict:
        rt, ns = self._target(obj, namespace)
        return _typed(rt, self._call("POST", self.path(rt, ns), query=_dry(dry_run), body=to_storage(obj, rt),
                                     warnings=warnings))

    def update(self, obj: dict, *, namespace: str | None = None, subresource: str | None = None,
               dry_run: bool = False) -> dict:
        return self._update(obj, namespace=namespace, subresource=subresource, dry_run=dry_run, warnings=None)

    def _update(self, obj: dict, *, namespace: str | None, subresource: str | None, dry_run: bool,
                warnings: list[str] | None) -> dict:
        rt, ns = self._target(obj, namespace)
        name = _name_of(rt, obj)
        return _typed(rt, self._call("PUT", self.path(rt, ns, name, subresource), query=_dry(dry_run),
                                     body=to_storage(obj, rt), warnings=warnings))

    def update_status(self, obj: dict, *, dry_run: bool = False) -> dict:
        return self.update(obj, subresource="status", dry_run=dry_run)

    def update_status_all(self, objs: list[dict], *, dry_run: bool = False) -> list[WriteResult]:
        """Each status written by its own request (no transaction over HTTPS); each fails alone."""
        return self.write_all([("update_status", obj) for obj in objs], dry_run=dry_run)

    def patch(self, rt: ResourceType, name: str, patch, *, patch_type: str = "strategic",
              namespace: str | None = None, subresource: str | None = None, dry_run: bool = False) -> dict:
        return self._patch(rt, name, patch, patch_type=patch_type, namespace=namespace, subresource=subresource,
                           dry_run=dry_run, warnings=None)

    def _patch(self, rt: ResourceType, name: str, patch, *, patch_type: str, namespace: str | None,
               subresource: str | None, dry_run: bool, warnings: list[str] | None) -> dict:
        content_type = PATCH_TYPES.get(patch_type)
        if content_type is None:
            raise BadRequest(f'unknown patch type "{patch_type}": use json, merge or strategic')
        path = self.path(rt, self.namespace_of(rt, namespace), name, subresource)
        return _typed(rt, self._call("PATCH", path, query=_dry(dry_run), body=patch, content_type=content_type,
                                     warnings=warnings))

    def apply(self, obj: dict, *, namespace: str | None = None, dry_run: bool = False) -> WriteResult:
        """kubectl's client-side apply of one object (see the module docstring); errors in the result."""
        from kctl.apiserver.contract import WriteResult

        result = WriteResult()
        try:
            result.obj, result.action = self._apply(obj, namespace, dry_run, result.warnings)
        except APIError as exc:
            result.error = exc
        return result

    def _apply(self, obj: dict, namespace: str | None, dry_run: bool, warnings: list[str]) -> tuple[dict, str]:
        from kctl.machinery.apply import applied_object, apply_patch, unchanged_by_apply
        from kctl.machinery.errors import FieldError, Invalid

        rt, ns = self._target(obj, namespace)
        obj = to_storage(obj, rt)  # the path names the stored version: send the object at it (as the local API)
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise Invalid(rt.group_kind, FieldError("metadata.name", "Required value: apply needs a name"))
        schema = self.schema_of(rt)
        pinned = meta.get("resourceVersion")
        for attempt in range(1, APPLY_ATTEMPTS + 1):
            current = self.find(rt, meta["name"], namespace=ns)
            if current is None:
                created = self._create(applied_object(obj, None, schema), namespace=ns, dry_run=dry_run,
                                       warnings=warnings)
                return created, "created"
            rv = current["metadata"].get("resourceVersion")
            if pinned not in (None, "") and str(pinned) != rv:
                raise Conflict(f'error when applying patch: Operation cannot be fulfilled on {rt.group_resource} '
                               f'"{meta["name"]}": the object has been modified; please apply your changes to '
                               "the latest version and try again")
            if unchanged_by_apply(applied_object(obj, current, schema), current):
                return current, "unchanged"
            patch = apply_patch(obj, current, schema)
            patch.setdefault("metadata", {})["resourceVersion"] = rv
            try:
                patched = self._patch(rt, meta["name"], patch, patch_type="merge" if rt.is_custom else "strategic",
                                      namespace=ns, subresource=None, dry_run=dry_run, warnings=warnings)
            except Conflict:
                if pinned not in (None, "") or attempt == APPLY_ATTEMPTS:
                    raise
                continue
            same = (patched.get("metadata") or {}).get("resourceVersion") == rv
            return patched, "unchanged" if same and not dry_run else "configured"
        raise AssertionError("unreachable")  # pragma: no cover

    def apply_server_side(self, rt: ResourceType, name: str, obj: dict, *, namespace: str | None = None,
                          field_manager: str, force: bool = False, dry_run: bool = False) -> dict:
        """Server-side apply: PATCH application/apply-patch+yaml (JSON is YAML) with fieldManager and force."""
        query = {"fieldManager": field_manager, "force": "true" if force else None,
                 "dryRun": "All" if dry_run else None}
        path = self.path(rt, self.namespace_of(rt, namespace, obj.get("metadata") if isinstance(obj, dict)
                                               and isinstance(obj.get("metadata"), dict) else None), name)
        return _typed(rt, self._call("PATCH", path, query=query, body=obj,
                                     content_type="application/apply-patch+yaml"))

    def delete(self, rt: ResourceType, name: str, *, namespace: str | None = None,
               propagation: str | None = None, grace_period: int | None = None,
               resource_version: str | None = None, dry_run: bool = False) -> dict:
        return self._delete(rt, name, namespace=namespace, propagation=propagation, grace_period=grace_period,
                            resource_version=resource_version, dry_run=dry_run, warnings=None)

    def _delete(self, rt: ResourceType, name: str, *, namespace: str | None, propagation: str | None,
                grace_period: int | None, resource_version: str | None, dry_run: bool,
                warnings: list[str] | None) -> dict:
        options: dict = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation is not None:
            options["propagationPolicy"] = propagation
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        if resource_version:
            options["preconditions"] = {"resourceVersion": str(resource_version)}
        if dry_run:
            options["dryRun"] = ["All"]
        ns = self.namespace_of(rt, namespace)
        answer = self._call("DELETE", self.path(rt, ns, name), body=options, warnings=warnings)
        if isinstance(answer, dict) and answer.get("kind") == "Status":
            # gone at once: Kubernetes answers a Status; callers get what APIServer.delete gives, its object
            # as far as the Status tells it (name, namespace, uid), with no deletionTimestamp
            details = answer.get("details") if isinstance(answer.get("details"), dict) else {}
            meta = {"name": details.get("name") or name, **({"namespace": ns} if rt.namespaced else {})}
            if details.get("uid"):
                meta["uid"] = details["uid"]
            return {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": meta}
        return _typed(rt, answer)

    def write_all(self, ops: list[tuple[str, dict]], *, namespace: str | None = None, dry_run: bool = False,
                  atomic: bool = False) -> list[WriteResult]:
        """Each write by its own request, in order; each fails alone (atomic: only for one write)."""
        from kctl.apiserver.contract import WriteResult

        if atomic and len(ops) > 1:
            raise BadRequest("atomic writes of several objects are not supported over HTTPS (the Kubernetes "
                             "REST API has no transaction): leave out --atomic")
        results: list[WriteResult] = []
        for op, obj in ops:
            if op == "apply":
                results.append(self.apply(obj, namespace=namespace, dry_run=dry_run))
                continue
            result = WriteResult()
            try:
                result.obj, result.action = self._write(op, obj, namespace, dry_run, result.warnings)
            except APIError as exc:
                result.error = exc
            results.append(result)
        return results

    def _write(self, op: str, obj: dict, namespace: str | None, dry_run: bool,
               warnings: list[str]) -> tuple[dict, str]:
        if not isinstance(obj, dict):
            raise BadRequest("object must be a mapping")
        if op == "create":
            return self._create(obj, namespace=namespace, dry_run=dry_run, warnings=warnings), "created"
        if op in ("update", "replace", "update_status"):
            sent = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            new = self._update(obj, namespace=namespace, subresource="status" if op == "update_status" else None,
                               dry_run=dry_run, warnings=warnings)
            same = sent and (new.get("metadata") or {}).get("resourceVersion") == sent
            return new, "unchanged" if same else "configured"
        if op == "delete":
            rt, _ = self._target(obj, namespace)
            meta = obj.get("metadata") or {}
            gone = self._delete(rt, _name_of(rt, obj), namespace=meta.get("namespace") or namespace,
                                propagation=None, grace_period=None, resource_version=meta.get("resourceVersion"),
                                dry_run=dry_run, warnings=warnings)
            return gone, "deleted"
        raise BadRequest(f"unknown write {op!r}")

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None) -> dict:
        """pods/binding, then the bound pod (the REST answer is a Status)."""
        pods = self._builtin.lookup("pods")
        meta: dict = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        answer = self._call("POST", self.path(pods, namespace, name, "binding"), body=body)
        if isinstance(answer, dict) and answer.get("kind") == "Pod":
            return answer
        return self.get(pods, name, namespace=namespace)

    def bind_all(self, bindings: list[Binding]) -> list[WriteResult]:
        from kctl.apiserver.contract import WriteResult

        results = []
        for b in bindings:
            result = WriteResult()
            try:
                result.obj = self.bind(b.namespace, b.name, b.node_name, uid=b.uid)
                result.action = "bound"
            except APIError as exc:
                result.error = exc
            results.append(result)
        return results

    def evict(self, namespace: str | None, name: str, *, grace_period: int | None = None,
              dry_run: bool = False) -> dict:
        """pods/eviction: the Status the server answers (TooManyRequests when a PodDisruptionBudget forbids it)."""
        pods = self._builtin.lookup("pods")
        ns = self.namespace_of(pods, namespace)
        options: dict = {}
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        if dry_run:
            options["dryRun"] = ["All"]
        body: dict = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
        if options:
            body["deleteOptions"] = options
        answer = self._call("POST", self.path(pods, ns, name, "eviction"), body=body)
        return answer if isinstance(answer, dict) else {"apiVersion": "v1", "kind": "Status", "status": "Success"}

    def create_token(self, namespace: str | None, name: str, token_request: dict) -> dict:
        """serviceaccounts/NAME/token: the TokenRequest the server answers, its status holding the token."""
        accounts = self._builtin.lookup("serviceaccounts")
        ns = self.namespace_of(accounts, namespace)
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", **(token_request or {})}
        answer = self._call("POST", self.path(accounts, ns, name, "token"), body=body)
        if not isinstance(answer, dict):
            raise BadRequest(f"the server answered a TokenRequest for {ns}/{name} with no object")
        return answer

    # -- the store: only where it is --------------------------------------------------------

    def _unsupported(self) -> ClientSideError:
        return ClientSideError(f"not supported with --server over HTTPS ({self.where}): run this command on the "
                               "control host")

    def backup(self, dest) -> int:
        raise self._unsupported()

    def restore(self, source) -> int:
        raise self._unsupported()

    def vacuum(self) -> tuple[int, int]:
        raise self._unsupported()

    def rotate_key(self) -> tuple[str, int, str]:
        raise self._unsupported()

    # -- helpers ----------------------------------------------------------------------------

    def _target(self, obj: object, namespace: str | None) -> tuple[ResourceType, str]:
        if not isinstance(obj, dict):
            raise BadRequest("object must be a mapping")
        rt = self.resource_for(obj)
        meta = obj.get("metadata")
        return rt, self.namespace_of(rt, namespace, meta if isinstance(meta, dict) else None)


def _name_of(rt: ResourceType, obj: dict) -> str:
    from kctl.machinery.errors import FieldError, Invalid

    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise Invalid(rt.group_kind, FieldError("metadata.name", "Required value"))
    return name


def _dry(dry_run: bool) -> dict | None:
    return {"dryRun": "All"} if dry_run else None


def _typed(rt: ResourceType, obj: object) -> dict:
    """An object of rt with its apiVersion and kind (a LIST's items may come without them)."""
    if not isinstance(obj, dict):
        raise BadRequest(f"the server answered a request for {rt.group_resource} with no object")
    if "kind" not in obj or "apiVersion" not in obj:
        obj = {"apiVersion": rt.api_version, "kind": rt.kind, **obj}
    return obj


def _revision(meta: dict) -> int:
    try:
        return int(meta.get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0  # another API server's opaque resourceVersion: no revision to compare


def _watch_error(obj: object) -> APIError:
    """The error an ERROR event carries (410 Gone: the revision was compacted; re-list)."""
    if isinstance(obj, dict) and obj.get("kind") == "Status":
        code = int(obj.get("code") or 500)
        exc = error_of(code, obj)
        if code == 410 and not isinstance(exc, Gone):
            return Gone(exc.message)
        return exc
    return BadRequest("the server ended the watch with an ERROR event that is not a Status")


__all__ = ["LIST_CHUNK", "PATCH_TYPES", "RESTAPIClient"]
