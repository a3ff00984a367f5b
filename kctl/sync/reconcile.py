"""One GitSource reconcile: fetch, render, apply atomically, prune, record status.

`reconcile(api, "namespace/name", cache_dir=..., now=...)` is the one level-triggered
function behind both `kctl sync` (kctl.cli.sync, in the user's process) and the daemon's
GitSource controller (kctl.sync.controller). Running it twice does no harm. In order:

1. a GitSource being deleted with the `kctl.io/sync-prune` finalizer prunes its whole
   inventory, then drops the finalizer; otherwise the finalizer is added or removed to
   follow spec.prune;
2. every `dependsOn` source must be Ready at its current generation, else
   Reconciling=True (DependencyNotReady) and a look again in 5 s, nothing applied;
3. the no-change fast path: the remote head (`git ls-remote`) is the commit applied
   last, the spec is the one applied, and every inventory object still has the
   resourceVersion recorded after that apply: nothing to do (no render, no write);
4. fetch (kctl.sync.fetch; credentials from spec.secretRef). A failure changes nothing
   but the status (Ready=False, FetchFailed): the last applied revision stays;
5. render (kctl.sync.render) and order (kctl.sync.order). A document that does not
   parse stalls the source with its file and line (RenderFailed); an empty render is
   refused (EmptyRender) unless spec.allowEmpty;
6. every object is labelled `kctl.io/sync-source` and annotated `kctl.io/sync-revision`
   (the revision that last changed it); an object annotated `kctl.io/sync: disabled` is
   skipped, one labelled by another source is an error;
7. the prune share is checked BEFORE any write (PruneLimitExceeded unless spec.force);
8. mode Report: a server-side dry run tells which objects differ (results "drifted",
   DriftDetected) and nothing is written. Mode Apply: every object through the same
   code as `kctl apply` (APIServer.write_all, atomic): one refusal by admission and
   nothing of the revision is written (ApplyFailed, with the document's file:line). A
   revision that needs more writes than one store transaction holds (etcd: 32) is checked
   whole by a dry run, then written in parts: a refusal still writes nothing, but a write
   failing at commit (a race) leaves the parts before it, and the next round goes on;
9. prune (spec.prune) the inventory entries the revision no longer holds, in
   kctl.sync.order.prune_order, each only while it keeps this source's label and uid;
10. status through the status path (kctl.client.statuswriter: a Conflict re-reads and retries): Ready, Stalled,
    Reconciling conditions, revisions, per-object results, inventory, error.

Errors of the source (fetch, render, admission, limits) are never raised: they are
recorded on status and returned in `SyncResult`. Only API failures (the store itself)
propagate, for the caller to retry.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kctl.machinery.errors import APIError, Conflict, NotFound
from kctl.machinery.times import format_time
from kctl.store.contract import TransactionTooLarge
from kctl.sync.inventory import (PRUNE_FINALIZER, REVISION_ANNOTATION, SOURCE_LABEL, Entry, ObjectKey,
                                 annotations_of, group_kind_of, inventory_of, key_of_object, owner_of, prune_candidates,
                                 prune_share_exceeded, source_label_value, still_owned, sync_disabled,
                                 unchanged_since_apply)

if TYPE_CHECKING:
    from kctl.apiserver.contract import WriteResult
    from kctl.apiserver.contract import API
    from kctl.machinery.resources import ResourceType
    from kctl.sync.render import Rendered

RESOURCE = "gitsources"
DEFAULT_INTERVAL = "1m"
DEFAULT_TIMEOUT = "2m"
DEFAULT_MAX_PRUNE_PERCENT = 50
#: how soon a source waiting for its dependencies looks again
DEPENDENCY_REQUEUE_SECONDS = 5.0
#: ls-remote is a quick question: never wait for it longer than this
REMOTE_HEAD_TIMEOUT = 30.0
STATUS_WRITE_ATTEMPTS = 5
SHORT_SHA = 12


# -- the spec ------------------------------------------------------------------------------

@dataclass(frozen=True)
class SourceSpec:
    """A GitSource's spec with its defaults applied (durations in seconds)."""

    url: str
    branch: str | None = None
    revision: str | None = None
    path: str = "."
    interval: float = 60.0
    timeout: float = 120.0
    prune: bool = False
    depends_on: tuple[tuple[str, str], ...] = ()
    secret: str | None = None
    mode: str = "Apply"
    suspend: bool = False
    allow_empty: bool = False
    max_prune_percent: int = DEFAULT_MAX_PRUNE_PERCENT
    force: bool = False

    @classmethod
    def of(cls, source: dict) -> "SourceSpec":
        from kctl.machinery.times import parse_duration  # Go durations ("1m30s"), as kubectl reads them

        spec = source.get("spec") or {}
        namespace = (source.get("metadata") or {}).get("namespace") or "default"
        depends = tuple((d.get("namespace") or namespace, d["name"]) for d in spec.get("dependsOn") or ()
                        if isinstance(d, dict) and d.get("name"))
        max_prune = spec.get("maxPrunePercent")
        return cls(url=spec.get("url") or "", branch=spec.get("branch") or None,
                   revision=spec.get("revision") or None, path=spec.get("path") or ".",
                   interval=parse_duration(spec.get("interval") or DEFAULT_INTERVAL),
                   timeout=parse_duration(spec.get("timeout") or DEFAULT_TIMEOUT),
                   prune=bool(spec.get("prune")), depends_on=depends,
                   secret=(spec.get("secretRef") or {}).get("name") or None, mode=spec.get("mode") or "Apply",
                   suspend=bool(spec.get("suspend")), allow_empty=bool(spec.get("allowEmpty")),
                   max_prune_percent=DEFAULT_MAX_PRUNE_PERCENT if max_prune is None else int(max_prune),
                   force=bool(spec.get("force")))

    @property
    def ref_name(self) -> str:
        """What the revision is named after: the pinned revision, the branch, or HEAD."""
        return self.revision or self.branch or "HEAD"


def format_revision(ref_name: str, commit: str) -> str:
    """`main@<commit>`; a plain folder's `folder:<hash>` stays as it is."""
    return commit if commit.startswith("folder:") else f"{ref_name}@{commit}"


def commit_of(revision: str) -> str:
    """The commit part of a revision written by format_revision."""
    return revision if revision.startswith("folder:") else revision.rpartition("@")[2]


def short_revision(revision: str) -> str:
    """`main@abcdef123456` (or `folder:abcdef123456`): the revision with a 12-character hash."""
    if revision.startswith("folder:"):
        return revision[:len("folder:") + SHORT_SHA]
    ref, sep, commit = revision.rpartition("@")
    return f"{ref}{sep}{commit[:SHORT_SHA]}" if sep else revision[:SHORT_SHA]


# -- results -------------------------------------------------------------------------------

@dataclass(frozen=True)
class ObjectResult:
    """What a reconcile did to one object: created|configured|unchanged|pruned|error|drifted|skipped."""

    ref: str
    action: str
    message: str = ""

    def to_status(self) -> dict:
        out = {"ref": self.ref, "action": self.action}
        if self.message:
            out["message"] = self.message
        return out


@dataclass
class SyncResult:
    """The outcome of one reconcile, as written on the source's status."""

    key: str
    found: bool = True
    ready: bool = False
    reason: str = ""
    message: str = ""
    revision: str = ""
    results: list[ObjectResult] = field(default_factory=list)
    error: dict | None = None
    requeue: float | None = None
    #: the no-change fast path answered: nothing was rendered or written
    fast_path: bool = False

    def error_line(self) -> str:
        """`FILE:LINE: message` for a failure tied to a document, else the message."""
        if self.error and self.error.get("file"):
            line = self.error.get("line")
            where = f"{self.error['file']}:{line}" if line else self.error["file"]
            return f"{where}: {self.error.get('message', '')}"
        return (self.error or {}).get("message") or self.message


class _Failed(Exception):
    """A reason the revision cannot be applied; ends the reconcile with Ready=False."""

    def __init__(self, reason: str, message: str, *, stalled: bool = True, error: dict | None = None,
                 results: list[ObjectResult] | None = None) -> None:
        super().__init__(message)
        self.reason, self.message, self.stalled = reason, message, stalled
        self.error = error if error is not None else {"message": message}
        self.results = results or []


@dataclass
class _Desired:
    """One rendered object, ready to apply, and what is known about it in the cluster."""

    item: "Rendered"
    obj: dict
    rt: "ResourceType | None"
    key: ObjectKey | None
    live: dict | None = None

    def where(self) -> dict:
        return {"file": self.item.file, "line": self.item.line}


# -- conditions and status -----------------------------------------------------------------

def condition(conditions: list[dict] | None, type_: str) -> dict | None:
    return next((c for c in conditions or () if isinstance(c, dict) and c.get("type") == type_), None)


def is_ready(source: dict) -> bool:
    """Ready=True for the source's current generation (what a dependent waits for)."""
    status = source.get("status") or {}
    ready = condition(status.get("conditions"), "Ready")
    generation = (source.get("metadata") or {}).get("generation")
    return bool(ready and ready.get("status") == "True" and status.get("observedGeneration") == generation)


def set_conditions(old: list[dict] | None, wanted: dict[str, tuple[str, str, str]], *, now: dt.datetime,
                   generation: int | None) -> list[dict]:
    """Ready, Reconciling, Stalled as wanted (type -> (status, reason, message)); a type not wanted is removed.

    lastTransitionTime moves only when a condition's status changes, as in Kubernetes.
    """
    out = []
    for type_ in ("Ready", "Reconciling", "Stalled"):
        if type_ not in wanted:
            continue
        status, reason, message = wanted[type_]
        previous = condition(old, type_)
        changed = previous is None or previous.get("status") != status
        new = {"type": type_, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": format_time(now) if changed else previous.get("lastTransitionTime")}
        if generation is not None:
            new["observedGeneration"] = generation
        out.append(new)
    return out


# -- reconcile -----------------------------------------------------------------------------

def reconcile(api: API, source_key: str, *, cache_dir: Path, now: dt.datetime | None = None) -> SyncResult:
    """Bring the cluster to the GitSource's current revision (see the module doc); never raises for bad input."""
    namespace, _, name = source_key.rpartition("/")
    namespace = namespace or "default"
    rt = api.resource(RESOURCE)
    try:
        source = api.get(rt, name, namespace=namespace)
    except NotFound:
        return SyncResult(key=f"{namespace}/{name}", found=False, reason="NotFound",
                          message=f'gitsources.kctl.io "{name}" not found')
    return _Reconcile(api, rt, source, Path(cache_dir), now or dt.datetime.now(dt.timezone.utc)).run()


@dataclass
class DesiredRevision:
    """What a source's current revision would do: the documents as applied, the live objects pruned."""

    revision: str
    documents: list[tuple["Rendered", dict]]
    pruned: list[dict]


def desired_objects(api: API, source: dict, *, cache_dir: Path) -> DesiredRevision:
    """The source's current revision as reconcile would apply it (labelled, stamped), and what it would prune.

    What `kctl diff --source` compares with the live objects; objects annotated
    `kctl.io/sync: disabled` are left out. Raises SourceError (one line) when the
    revision cannot be fetched, rendered or resolved.
    """
    run = _Reconcile(api, api.resource(RESOURCE), source, Path(cache_dir), dt.datetime.now(dt.timezone.utc))
    try:
        revision, items = run.fetch_and_render()
        desired = run.desired(items, revision)
        victims, _ = run._prunable(run.spec, desired)
    except _Failed as exc:
        raise SourceError(exc.error, exc.message) from None
    documents = [(d.item, d.obj) for d in desired if not (d.live is not None and sync_disabled(d.live))]
    return DesiredRevision(revision, documents, [live for e in victims if (live := run._entry_live(e)) is not None])


class SourceError(Exception):
    """The source's revision cannot be fetched, rendered or resolved; str() is one line (FILE:LINE: message)."""

    def __init__(self, error: dict, message: str) -> None:
        where = f"{error['file']}:{error.get('line')}: " if error.get("file") else ""
        super().__init__(where + (error.get("message") or message))


class _Reconcile:
    """The state of one reconcile of one GitSource (see the module doc for the steps)."""

    def __init__(self, api: API, rt: "ResourceType", source: dict, cache_dir: Path,
                 now: dt.datetime) -> None:
        self.api, self.rt, self.source, self.cache_dir, self.now = api, rt, source, cache_dir, now
        meta = source["metadata"]
        self.namespace, self.name = meta.get("namespace") or "default", meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.label = source_label_value(self.namespace, self.name)
        self.inventory = inventory_of(source)
        #: the generation this reconcile acts on (observedGeneration); moved only by its own spec write
        self.generation = meta.get("generation")
        self._attempted_revision = ""
        self._live: dict[str, dict[tuple[str, str], dict]] = {}

    @property
    def spec(self) -> SourceSpec:
        return SourceSpec.of(self.source)

    def run(self) -> SyncResult:
        if self.source["metadata"].get("deletionTimestamp"):
            return self._finalize()
        try:
            spec = self.spec
        except ValueError as exc:  # a duration the schema let through but Go would not read
            return self._finish(_Failed("InvalidSpec", str(exc)))
        self._follow_finalizer(spec)
        waiting = self._dependencies_not_ready(spec)
        if waiting:
            return self._waiting(waiting)
        try:
            fast = self._fast_path(spec)
            if fast is not None:
                return fast
            revision, items = self.fetch_and_render()
            desired = self.desired(items, revision)
            if spec.mode == "Report":
                return self._report(spec, desired, revision)
            return self._apply(spec, desired, revision)
        except _Failed as failure:
            return self._finish(failure)

    # -- finalizer and dependencies ----------------------------------------------------------

    def _follow_finalizer(self, spec: SourceSpec) -> None:
        """The prune finalizer is on the source exactly when spec.prune is true."""
        finalizers = list(self.source["metadata"].get("finalizers") or [])
        if spec.prune == (PRUNE_FINALIZER in finalizers):
            return
        wanted = [*finalizers, PRUNE_FINALIZER] if spec.prune else [f for f in finalizers if f != PRUNE_FINALIZER]
        self.source = self.api.patch(self.rt, self.name, {"metadata": {"finalizers": wanted or None}},
                                     patch_type="merge", namespace=self.namespace)

    def _finalize(self) -> SyncResult:
        """Deletion: prune everything the source applied (finalizer present), then let it go."""
        finalizers = list(self.source["metadata"].get("finalizers") or [])
        if PRUNE_FINALIZER not in finalizers:
            return SyncResult(key=self.key, found=False, reason="Deleting", message="source is being deleted")
        results, left = self._prune(self.inventory)
        if left:
            self._write_status({"inventory": [e.to_status() for e in left], "results": _status_results(results)},
                               {"Ready": ("False", "PruneFailed", "could not prune every object; retrying")})
            return SyncResult(key=self.key, reason="PruneFailed", results=results, requeue=DEPENDENCY_REQUEUE_SECONDS,
                              message=f"could not prune {len(left)} object(s) of the deleted source")
        wanted = [f for f in finalizers if f != PRUNE_FINALIZER]
        try:  # the last finalizer gone, the API removes the source
            self.api.patch(self.rt, self.name, {"metadata": {"finalizers": wanted or None}}, patch_type="merge",
                           namespace=self.namespace)
        except NotFound:
            pass
        pruned = sum(r.action == "pruned" for r in results)
        return SyncResult(key=self.key, found=False, ready=True, reason="Pruned", results=results,
                          message=f"pruned {pruned} object(s) of the deleted source")

    def _dependencies_not_ready(self, spec: SourceSpec) -> list[str]:
        waiting = []
        for namespace, name in spec.depends_on:
            try:
                other = self.api.get(self.rt, name, namespace=namespace)
            except NotFound:
                waiting.append(f"{namespace}/{name} (not found)")
                continue
            if not is_ready(other):
                waiting.append(f"{namespace}/{name}")
        return waiting

    def _waiting(self, waiting: list[str]) -> SyncResult:
        message = "dependencies not ready: " + ", ".join(waiting)
        self._write_status({}, {"Ready": ("False", "DependencyNotReady", message),
                                "Reconciling": ("True", "DependencyNotReady", message)})
        return SyncResult(key=self.key, reason="DependencyNotReady", message=message,
                          requeue=DEPENDENCY_REQUEUE_SECONDS)

    # -- fetch and render --------------------------------------------------------------------

    def _credentials(self, spec: SourceSpec):
        """fetch's Credentials from the Secret spec.secretRef names (None without one)."""
        from kctl.sync.fetch import Credentials

        if not spec.secret:
            return None
        try:
            secret = self.api.get(self.api.resource("secrets"), spec.secret, namespace=self.namespace)
        except NotFound:
            raise _Failed("FetchFailed", f'secret "{spec.secret}" (spec.secretRef) not found', stalled=False) from None
        data = {}
        for key, value in (secret.get("data") or {}).items():
            try:
                data[key] = base64.b64decode(value)
            except (ValueError, TypeError):
                raise _Failed("FetchFailed", f'secret "{spec.secret}": key {key} is not base64',
                              stalled=False) from None
        text = {k: v.decode(errors="replace") for k, v in data.items() if k in ("username", "password")}
        return Credentials(username=text.get("username"), password=text.get("password"),
                           ssh_private_key=data.get("identity") or data.get("ssh-privatekey"),
                           known_hosts=data.get("known_hosts"))

    def _fast_path(self, spec: SourceSpec) -> SyncResult | None:
        """The no-change answer (step 3), or None when a full reconcile is needed."""
        status = self.source.get("status") or {}
        applied = status.get("lastAppliedRevision")
        ready = condition(status.get("conditions"), "Ready") or {}
        if (spec.mode != "Apply" or spec.force or not applied or status.get("lastAttemptedRevision") != applied
                or status.get("observedGeneration") != self.source["metadata"].get("generation")
                or ready.get("status") != "True" or ready.get("reason") != "Applied"):
            return None
        from kctl.sync.fetch import FetchError, remote_head

        commit = commit_of(applied)
        try:
            head = remote_head(spec.url, branch=spec.branch, revision=spec.revision,
                               credentials=self._credentials(spec), timeout=min(spec.timeout, REMOTE_HEAD_TIMEOUT))
        except FetchError as exc:
            raise _Failed("FetchFailed", str(exc), stalled=False) from None
        if head != commit and not (spec.revision and commit.startswith(head.lower())):
            return None  # a new commit (an abbreviated pin matches its full commit)
        if not unchanged_since_apply(self.api, self.inventory):
            return None
        results = [ObjectResult(_entry_ref(e, self.namespace), "unchanged") for e in self.inventory]
        return SyncResult(key=self.key, ready=True, reason="Applied", message=ready.get("message") or "",
                          revision=applied, results=results, requeue=spec.interval, fast_path=True)

    def fetch_and_render(self) -> tuple[str, list["Rendered"]]:
        """(revision, rendered documents in apply order) of the source's current revision."""
        from kctl.sync.fetch import FetchError, fetch
        from kctl.sync.order import apply_order
        from kctl.sync.render import RenderError, render

        spec = self.spec
        try:
            checkout = fetch(spec.url, cache_dir=self.cache_dir, branch=spec.branch, revision=spec.revision,
                             credentials=self._credentials(spec), timeout=spec.timeout)
        except FetchError as exc:
            raise _Failed("FetchFailed", str(exc), stalled=False) from None
        revision = format_revision(spec.ref_name, checkout.commit)
        self._attempted_revision = revision
        try:
            items = apply_order(render(checkout.root, spec.path))
        except RenderError as exc:
            error = {"file": exc.file, "line": exc.line, "message": exc.message}
            raise _Failed("RenderFailed", str(exc), error=_clean(error)) from None
        if not items and not spec.allow_empty:
            raise _Failed("EmptyRender", f"revision {short_revision(revision)} renders no object under path "
                          f"{spec.path!r}; refused (set spec.allowEmpty to accept it)")
        return revision, items

    # -- the objects to apply ----------------------------------------------------------------

    def desired(self, items: list["Rendered"], revision: str) -> list[_Desired]:
        """Each rendered object labelled, namespaced and stamped, with its live object."""
        crd_kinds = {_crd_group_kind(i.obj) for i in items} - {None}
        out = []
        for item in items:
            obj = copy.deepcopy(item.obj)
            if not isinstance(obj.get("metadata"), dict):
                obj["metadata"] = {}
            meta = obj["metadata"]
            labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
            meta["labels"] = {**labels, SOURCE_LABEL: self.label}
            annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
            meta["annotations"] = {**annotations, REVISION_ANNOTATION: revision}
            try:
                rt = self.api.resource_for(obj)
            except APIError as exc:
                api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
                if (api_version.rpartition("/")[0], kind) not in crd_kinds:
                    raise _Failed("ApplyFailed", exc.message,
                                  error={**_clean({"file": item.file, "line": item.line}), "message": exc.message},
                                  results=[ObjectResult(_doc_ref(obj), "error", exc.message)]) from None
                out.append(_Desired(item, obj, None, None))  # its CRD is in this revision: applied after it
                continue
            if rt.namespaced:
                meta["namespace"] = meta.get("namespace") or self.namespace
            key = key_of_object(rt, obj)
            desired = _Desired(item, obj, rt, key, live=self._live_object(rt, key))
            self._stamp(desired, revision)
            out.append(desired)
        return out

    def _live_object(self, rt: "ResourceType", key: ObjectKey) -> dict | None:
        """The stored object of a key, from one list per kind."""
        cache = self._live.get(rt.group_kind)
        if cache is None:
            items, _ = self.api.list(rt)
            cache = self._live[rt.group_kind] = {
                ((o["metadata"].get("namespace") or ""), o["metadata"]["name"]): o for o in items}
        return cache.get((key[1], key[2]))

    def _stamp(self, desired: _Desired, revision: str) -> None:
        """Annotate the revision, keeping the older one on an object this revision does not change."""
        from kctl.machinery.apply import applied_object, unchanged_by_apply

        meta = desired.obj["metadata"]
        old = annotations_of(desired.live).get(REVISION_ANNOTATION)
        if desired.live is None or not old or old == revision:
            return
        trial = copy.deepcopy(desired.obj)
        trial["metadata"]["annotations"][REVISION_ANNOTATION] = old
        try:
            merged = applied_object(trial, desired.live, self.api.schema_of(desired.rt))
        except Exception:  # a manifest the patch code cannot merge: let apply report it
            return
        if unchanged_by_apply(merged, desired.live):
            meta["annotations"][REVISION_ANNOTATION] = old

    def _partition(self, desired: list[_Desired]) -> tuple[list[_Desired], list[ObjectResult]]:
        """(objects to write, results of those left alone); an object of another source fails the revision."""
        writes, skipped, conflicts = [], [], []
        for d in desired:
            if d.live is not None and sync_disabled(d.live):
                skipped.append(ObjectResult(self._ref(d), "skipped", "annotated kctl.io/sync: disabled"))
                continue
            owner = owner_of(d.live)
            if owner is not None and owner != self.label:
                conflicts.append((d, f"{self._ref(d)} is owned by source {owner}"))
                continue
            writes.append(d)
        if conflicts:
            first, message = conflicts[0]
            raise _Failed("ApplyFailed", message, error={**_clean(first.where()), "message": message},
                          results=[ObjectResult(self._ref(d), "error", f"owned by source {owner_of(d.live)}")
                                   for d, _ in conflicts])
        return writes, skipped

    def _prunable(self, spec: SourceSpec, desired: list[_Desired]) -> tuple[list[Entry], list[ObjectResult]]:
        """(entries to prune, results for those left alone) — nothing when spec.prune is false."""
        if not spec.prune:
            return [], []
        kept = {d.key for d in desired if d.key is not None}
        kept |= {_crd_kind_key(d.obj, self.namespace) for d in desired if d.key is None}
        victims, left = [], []
        for entry in prune_candidates(self.inventory, kept):
            live = self._entry_live(entry)
            if live is None:
                continue  # gone already
            if sync_disabled(live):
                left.append(ObjectResult(_entry_ref(entry, self.namespace), "skipped",
                                         "annotated kctl.io/sync: disabled; not pruned"))
            elif not still_owned(entry, live, self.label):
                left.append(ObjectResult(_entry_ref(entry, self.namespace), "skipped",
                                         "no longer this source's object (label or uid changed); not pruned"))
            else:
                victims.append(entry)
        return victims, left

    def _entry_live(self, entry: Entry) -> dict | None:
        try:
            rt = self.api.resource_for({"apiVersion": entry.api_version, "kind": entry.kind})
        except APIError:
            return None  # the kind itself is gone
        return self._live_object(rt, entry.key)

    # -- Report mode -------------------------------------------------------------------------

    def _report(self, spec: SourceSpec, desired: list[_Desired], revision: str) -> SyncResult:
        writes, results = self._partition(desired)
        victims, left = self._prunable(spec, desired)
        checked = [d for d in writes if d.rt is not None]
        outcomes = self.api.write_all([("apply", d.obj) for d in checked], dry_run=True)
        for d, outcome in zip(checked, outcomes):
            if outcome.error is not None:
                results.append(ObjectResult(self._ref(d), "error", outcome.error.message))
            elif outcome.action == "created":
                results.append(ObjectResult(self._ref(d), "drifted", "missing from the cluster"))
            elif outcome.action == "configured":
                results.append(ObjectResult(self._ref(d), "drifted", "differs from the revision"))
            else:
                results.append(ObjectResult(self._ref(d), "unchanged"))
        results += [ObjectResult(self._ref_of_custom(d), "drifted", "missing (its CRD is in this revision)")
                    for d in writes if d.rt is None]
        results += [ObjectResult(_entry_ref(e, self.namespace), "drifted", "would be pruned") for e in victims]
        results += left
        drifted = sum(r.action == "drifted" for r in results)
        errors = sum(r.action == "error" for r in results)
        short = short_revision(revision)
        if errors:
            ready = ("False", "DryRunFailed", f"{errors} object(s) of revision {short} would be refused")
        elif drifted:
            ready = ("False", "DriftDetected", f"{drifted} object(s) differ from revision {short}")
        else:
            ready = ("True", "NoDrift", f"No drift from revision {short}")
        self._write_status({"lastAttemptedRevision": revision, "results": _status_results(results), "error": None},
                           {"Ready": ready})
        return SyncResult(key=self.key, ready=ready[0] == "True", reason=ready[1], message=ready[2],
                          revision=revision, results=results, requeue=spec.interval)

    # -- Apply mode ----------------------------------------------------------------------------

    def _apply(self, spec: SourceSpec, desired: list[_Desired], revision: str) -> SyncResult:
        writes, skipped = self._partition(desired)
        victims, left = self._prunable(spec, desired)
        if prune_share_exceeded(len(victims), len(self.inventory), spec.max_prune_percent) and not spec.force:
            share = round(100 * len(victims) / len(self.inventory))
            raise _Failed("PruneLimitExceeded",
                          f"revision {short_revision(revision)} would prune {len(victims)} of {len(self.inventory)} "
                          f"objects ({share}%), more than maxPrunePercent {spec.max_prune_percent}%; nothing "
                          f"applied (set spec.force, `kctl sync --force`, to allow it once)",
                          results=[ObjectResult(_entry_ref(e, self.namespace), "error", "would be pruned")
                                   for e in victims])
        applied = self._write(writes)
        results = [ObjectResult(self._ref(d), outcome.action) for d, outcome in applied] + skipped
        inventory = [Entry.of(outcome.obj) for _, outcome in applied if outcome.obj is not None]
        inventory += [Entry.of(d.live) for d in desired if d.live is not None and sync_disabled(d.live)]
        pruned, kept = self._prune(victims)
        results += pruned + left
        inventory += kept
        changed = any(r.action in ("created", "configured", "pruned") for r in results)
        self._clear_force(spec)
        message = f"Applied revision {short_revision(revision)}"
        fields: dict[str, Any] = {"lastAttemptedRevision": revision, "lastAppliedRevision": revision,
                                  "inventory": [e.to_status() for e in inventory],
                                  "results": _status_results(results), "error": None}
        old = self.source.get("status") or {}
        if changed or old.get("lastAppliedRevision") != revision or not old.get("lastAppliedTime"):
            fields["lastAppliedTime"] = format_time(self.now)
        if kept:
            reason, text = "PruneFailed", f"{message}; {len(kept)} object(s) could not be pruned"
            self._write_status(fields, {"Ready": ("False", reason, text)})
            return SyncResult(key=self.key, reason=reason, message=text, revision=revision, results=results,
                              requeue=spec.interval)
        self._write_status(fields, {"Ready": ("True", "Applied", message)})
        return SyncResult(key=self.key, ready=True, reason="Applied", message=message, revision=revision,
                          results=results, requeue=spec.interval)

    def _write(self, writes: list[_Desired]) -> list[tuple[_Desired, "WriteResult"]]:
        """Apply atomically: known kinds first, then objects whose CRD this revision just applied."""
        known = [d for d in writes if d.rt is not None]
        later = [d for d in writes if d.rt is None]
        done = self._write_atomic(known)
        if later:
            for d in later:
                try:
                    d.rt = self.api.resource_for(d.obj)
                except APIError as exc:
                    raise _Failed("ApplyFailed", exc.message, error={**_clean(d.where()), "message": exc.message},
                                  results=[ObjectResult(_doc_ref(d.obj), "error", exc.message)]) from None
                if d.rt.namespaced:
                    d.obj["metadata"]["namespace"] = d.obj["metadata"].get("namespace") or self.namespace
                d.key = key_of_object(d.rt, d.obj)
            done += self._write_atomic(later)
        return done

    def _write_atomic(self, writes: list[_Desired]) -> list[tuple[_Desired, "WriteResult"]]:
        if not writes:
            return []
        ops = [("apply", d.obj) for d in writes]
        try:
            outcomes = self.api.write_all(ops, atomic=True)
        except TransactionTooLarge:  # more writes than one store transaction holds (etcd): checked whole, then in parts
            outcomes = self.api.write_all(ops, dry_run=True)
            if not any(o.error is not None for o in outcomes):
                outcomes = self.api.write_all(ops)
        failed = [(d, o) for d, o in zip(writes, outcomes) if o.error is not None]
        if failed:
            first, outcome = failed[0]
            message = outcome.error.message
            raise _Failed("ApplyFailed", message, error={**_clean(first.where()), "message": message},
                          results=[ObjectResult(self._ref(d), "error", o.error.message) for d, o in failed])
        return list(zip(writes, outcomes))

    def _prune(self, victims: list[Entry]) -> tuple[list[ObjectResult], list[Entry]]:
        """Delete each entry still owned (uid and label), in prune order; (results, entries left to retry)."""
        from kctl.sync.order import prune_order

        results, left = [], []
        for item in prune_order([e.to_status() for e in victims]):
            entry = Entry.from_status(item)
            ref = _entry_ref(entry, self.namespace)
            try:
                rt = self.api.resource_for({"apiVersion": entry.api_version, "kind": entry.kind})
                live = self.api.get(rt, entry.name, namespace=entry.namespace or None)
            except NotFound:
                results.append(ObjectResult(ref, "pruned", "already gone"))
                continue
            except APIError:
                continue  # its kind is gone, and the object with it
            if not still_owned(entry, live, self.label) or sync_disabled(live):
                results.append(ObjectResult(ref, "skipped", "no longer this source's object; not pruned"))
                continue
            try:
                self.api.delete(rt, entry.name, namespace=entry.namespace or None,
                                resource_version=live["metadata"]["resourceVersion"])
                results.append(ObjectResult(ref, "pruned"))
            except NotFound:
                results.append(ObjectResult(ref, "pruned", "already gone"))
            except APIError as exc:
                results.append(ObjectResult(ref, "error", f"prune failed: {exc.message}"))
                left.append(entry)
        return results, left

    def _clear_force(self, spec: SourceSpec) -> None:
        """spec.force allows one revision: clear it (the generation that makes is the one observed)."""
        if not spec.force:
            return
        new = copy.deepcopy(self.source)
        new["spec"]["force"] = False
        try:
            self.source = self.api.update(new)
        except (Conflict, NotFound):
            return  # someone changed the spec meanwhile: their change is reconciled next
        self.generation = self.source["metadata"].get("generation")

    # -- status --------------------------------------------------------------------------------

    def _finish(self, failure: _Failed) -> SyncResult:
        """Record a failure: Ready=False (and Stalled when a person must act); nothing else changes."""
        revision = self._attempted_revision
        conditions = {"Ready": ("False", failure.reason, failure.message)}
        if failure.stalled:
            conditions["Stalled"] = ("True", failure.reason, failure.message)
        fields: dict[str, Any] = {"error": failure.error, "results": _status_results(failure.results)}
        if revision:
            fields["lastAttemptedRevision"] = revision
        self._write_status(fields, conditions)
        try:
            interval = self.spec.interval
        except ValueError:
            interval = None
        return SyncResult(key=self.key, reason=failure.reason, message=failure.message, revision=revision,
                          results=failure.results, error=failure.error, requeue=interval)

    def _write_status(self, fields: dict, conditions: dict[str, tuple[str, str, str]]) -> None:
        """Merge fields into status (None removes), set conditions and observedGeneration.

        Written through the status writer (kctl.client.statuswriter): only when it changed, and
        on a Conflict merged again onto the source read afresh (a source deleted, or replaced
        by another of the same name, is left alone); still conflicting, the Conflict is raised.
        """
        from kctl.client.statuswriter import StatusWriter

        gen = self.generation

        def merged(current: dict) -> dict:
            status = dict(current.get("status") or {})
            for key, value in fields.items():
                if value is None or value == []:
                    status.pop(key, None)
                else:
                    status[key] = value
            status["observedGeneration"] = gen
            status["conditions"] = set_conditions(status.get("conditions"), conditions, now=self.now,
                                                  generation=gen)
            return status

        written = StatusWriter(self.api, attempts=STATUS_WRITE_ATTEMPTS).write(self.source, merged)
        if written is not None:
            self.source = written

    # -- names ---------------------------------------------------------------------------------

    def _ref(self, d: _Desired) -> str:
        if d.rt is None:
            return self._ref_of_custom(d)
        return _ref(d.rt.kind, d.rt.group, d.key[1], d.key[2], self.namespace)

    def _ref_of_custom(self, d: _Desired) -> str:
        return _doc_ref(d.obj)


def _ref(kind: str, group: str, namespace: str, name: str, home: str) -> str:
    """kubectl's `deployment.apps/web`, prefixed `NAMESPACE/` outside the source's own namespace."""
    text = f"{kind.lower()}.{group}/{name}" if group else f"{kind.lower()}/{name}"
    return f"{namespace}/{text}" if namespace and namespace != home else text


def _entry_ref(entry: Entry, home: str) -> str:
    group = entry.api_version.rpartition("/")[0] if "/" in entry.api_version else ""
    return _ref(entry.kind, group, entry.namespace, entry.name, home)


def _doc_ref(obj: dict) -> str:
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "object")
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    name = str((obj.get("metadata") or {}).get("name") or "")
    return _ref(kind, group, "", name, "")


def _crd_group_kind(obj: dict) -> tuple[str, str] | None:
    """(group, kind) a CustomResourceDefinition document defines, else None."""
    if obj.get("kind") != "CustomResourceDefinition":
        return None
    spec = obj.get("spec") or {}
    kind = (spec.get("names") or {}).get("kind")
    return (spec.get("group"), kind) if spec.get("group") and kind else None


def _crd_kind_key(obj: dict, home: str) -> ObjectKey:
    """The inventory key of a custom object whose kind is not registered yet (namespaced, as most are)."""
    meta = obj.get("metadata") or {}
    return (group_kind_of(str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")),
            str(meta.get("namespace") or home), str(meta.get("name") or ""))


def _clean(error: dict) -> dict:
    return {k: v for k, v in error.items() if v not in (None, "")}


def _status_results(results: list[ObjectResult]) -> list[dict]:
    return [r.to_status() for r in results]


__all__ = ["DEPENDENCY_REQUEUE_SECONDS", "DesiredRevision", "ObjectResult", "SourceError", "SourceSpec", "SyncResult",
           "commit_of", "desired_objects", "format_revision", "is_ready", "reconcile", "set_conditions",
           "short_revision"]
