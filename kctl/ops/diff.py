"""What `apply` would change, as unified diffs: kubectl diff's library part.

`diff_documents` runs the documents through a server-side dry-run apply and compares each
result with the live object (and each object a prune would delete with nothing), both sides
in `kctl get -o yaml`'s key order, without resourceVersion, Secret values masked
(kctl.ops.diffmask). Called by kctl.cli.apply (`kctl diff`); the API is passed in, nothing prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.machinery.resources import ResourceType


@dataclass(frozen=True)
class DiffEntry:
    """One object's outcome: its unified-diff lines (none: no change), or the API's error for its document."""

    document: Any = None  # the kctl.manifests.sources.Document (None for an object a prune would delete)
    error: Any = None  # the kctl.machinery.errors.APIError the dry run gave this document
    lines: list[str] = field(default_factory=list)


def diff_documents(server: API, docs: list, *, namespace: str | None = None, pruned: Sequence[dict] = ()
                   ) -> list[DiffEntry]:
    """The diff of each document (in order), then of each object in `pruned` against nothing."""
    results = server.write_all([("apply", d.obj) for d in docs], namespace=namespace, dry_run=True)
    entries: list[DiffEntry] = []
    for doc, result in zip(docs, results):
        if result.error is not None:
            entries.append(DiffEntry(document=doc, error=result.error))
            continue
        if result.action == "unchanged":
            continue
        rt = server.resource_for(result.obj)
        meta = result.obj["metadata"]
        live = server.find(rt, meta["name"], namespace=meta.get("namespace") or None)
        entries.append(DiffEntry(document=doc, lines=object_diff(diff_label(rt, meta), live, result.obj)))
    for live in pruned:  # what a prune would delete: the live object against nothing
        entries.append(DiffEntry(lines=object_diff(diff_label(server.resource_for(live), live["metadata"]),
                                                   live, None)))
    return entries


def object_diff(label: str, live: dict | None, merged: dict | None) -> list[str]:
    """The unified diff of the live object (None: absent) against the merged one (None: pruned)."""
    import difflib

    from kctl.manifests.writer import dump_yaml
    from kctl.ops.diffmask import mask_secrets
    from kctl.output.keyorder import sorted_keys

    live, merged = mask_secrets(live, merged)  # a Secret's values never show (kubectl's Masker)
    # both sides in the key order `kctl get -o yaml` prints (sorted), so only real changes show
    before = dump_yaml(sorted_keys(_masked(live))).splitlines(keepends=True) if live else []
    after = dump_yaml(sorted_keys(_masked(merged))).splitlines(keepends=True) if merged else []
    return list(difflib.unified_diff(before, after, f"LIVE/{label}", f"MERGED/{label}"))


def diff_label(rt: ResourceType, meta: dict) -> str:
    """kubectl diff's file name of an object: `apps.v1.Deployment.default.web`."""
    return ".".join(p for p in (rt.group, rt.version, rt.kind, meta.get("namespace", ""), meta["name"]) if p)


def _masked(obj: dict) -> dict:
    """Drop what changes on every write (resourceVersion, managedFields) so the diff shows real changes."""
    obj = dict(obj)
    obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return obj
