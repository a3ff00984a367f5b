"""A StatefulSet's ControllerRevisions: snapshots of its pod template, named and hashed as Kubernetes does.

Pure functions, used by the StatefulSet controller (controller.py), `kctl rollout
history|undo statefulset` (kctl/ops/rollback.py) and their tests; written after
Kubernetes' pkg/controller/history/controller_history.go and stateful_set_utils.go:

- a revision's `data` is the set's patch: `{"spec": {"template": <template, with
  "$patch": "replace">}}` (getPatch); applying it replaces spec.template (ApplyRevision);
- its name is `<set>-<hash>`: FNV-1 (32 bit, hash/fnv New32) over the compact, key-sorted
  JSON of `data` as Go's encoding/json writes it, then the collision count in decimal when
  there is one, the number written in decimal and "safe encoded" (rand.SafeEncodeString);
  the hash is also the label `controller.kubernetes.io/hash`. Kubernetes hashes the typed
  object's encoding (with every default filled in), so the same template does not give
  the same name on both; the scheme is the same;
- its labels are the template's, its annotations the set's (so `kubernetes.io/change-cause`
  reaches `rollout history`), its controller reference the set, `revision` an integer one
  above the highest so far (nextRevision);
- history: revisions not named by the status nor by a live pod are kept up to
  revisionHistoryLimit (10 by default), oldest deleted first (truncateHistory).
"""

from __future__ import annotations

import copy
import json

from kctl.client.claim import owner_reference

HASH_LABEL = "controller.kubernetes.io/hash"
DEFAULT_HISTORY_LIMIT = 10
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


def go_json(value: object) -> bytes:
    """Go's json.Marshal of a map: compact, keys sorted, <, > and & (and U+2028/9) escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text.encode()


def fnv1_32(data: bytes) -> int:
    """hash/fnv New32 (FNV-1: multiply, then xor)."""
    value = 0x811C9DC5
    for byte in data:
        value = ((value * 0x01000193) & 0xFFFFFFFF) ^ byte
    return value


def safe_encode(text: str) -> str:
    """rand.SafeEncodeString: each character mapped into an alphabet without vowels and look-alikes."""
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in text)


def patch_of(sts: dict) -> dict:
    """getPatch: the revision data that replaces spec.template when applied."""
    template = copy.deepcopy((sts.get("spec") or {}).get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def template_of_revision(revision: dict) -> dict:
    """The pod template a revision's data holds (the "$patch" directive removed)."""
    template = copy.deepcopy((((revision.get("data") or {}).get("spec") or {}).get("template")) or {})
    template.pop("$patch", None)
    return template


def hash_revision(data: dict, collision_count: int | None) -> str:
    """HashControllerRevision: FNV-1 over the data, then the collision count, safe-encoded."""
    raw = go_json(data)
    if collision_count is not None:
        raw += str(int(collision_count)).encode()
    return safe_encode(str(fnv1_32(raw)))


def revision_name(set_name: str, hash_: str) -> str:
    """ControllerRevisionName: `<prefix>-<hash>`, the prefix cut at 223 characters."""
    return f"{set_name[:223]}-{hash_}"


def number(revision: dict) -> int:
    """A ControllerRevision's `revision`."""
    try:
        return int(revision.get("revision") or 0)
    except (TypeError, ValueError):
        return 0


def sort_revisions(revisions: list[dict]) -> list[dict]:
    """SortControllerRevisions: by revision number, then creation time, then name."""
    return sorted(revisions, key=lambda r: (number(r), (r.get("metadata") or {}).get("creationTimestamp") or "",
                                            (r.get("metadata") or {}).get("name") or ""))


def next_revision(revisions: list[dict]) -> int:
    """nextRevision: one above the highest revision number (1 for the first)."""
    return max((number(r) for r in revisions), default=0) + 1


def new_revision(sts: dict, revision: int, collision_count: int | None) -> dict:
    """newRevision: the ControllerRevision of the set's current template (not yet stored)."""
    meta = sts["metadata"]
    data = patch_of(sts)
    hash_ = hash_revision(data, collision_count)
    labels = dict((((sts.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {})
    labels[HASH_LABEL] = hash_
    rmeta: dict = {"name": revision_name(meta["name"], hash_), "namespace": meta.get("namespace", "default"),
                   "labels": labels, "ownerReferences": [owner_reference(sts, "StatefulSet")]}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    if annotations:
        rmeta["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": rmeta, "data": data,
            "revision": revision}


def equal_revision(a: dict, b: dict) -> bool:
    """EqualRevision: the same data (the hash label is a safe-encoded string, which Kubernetes' parse skips)."""
    return go_json(a.get("data") or {}) == go_json(b.get("data") or {})


def find_equal(revisions: list[dict], needle: dict) -> list[dict]:
    """FindEqualRevisions, in the order given."""
    return [r for r in revisions if equal_revision(r, needle)]


def history_to_delete(revisions: list[dict], live: set[str], limit: int | None) -> list[dict]:
    """truncateHistory: the oldest revisions beyond `limit` among those no status or pod names."""
    limit = DEFAULT_HISTORY_LIMIT if limit is None else max(0, int(limit))
    history = [r for r in sort_revisions(revisions) if r["metadata"]["name"] not in live]
    return history[:max(0, len(history) - limit)]


def applied(sts: dict, revision: dict) -> dict:
    """ApplyRevision: a copy of the set with the revision's pod template."""
    out = copy.deepcopy(sts)
    out.setdefault("spec", {})["template"] = template_of_revision(revision)
    return out


__all__ = ["DEFAULT_HISTORY_LIMIT", "HASH_LABEL", "applied", "equal_revision", "find_equal", "fnv1_32", "go_json",
           "hash_revision", "history_to_delete", "new_revision", "next_revision", "number", "patch_of",
           "revision_name", "safe_encode", "sort_revisions", "template_of_revision"]
