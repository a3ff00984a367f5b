"""kubectl describe's layout for workloads: a Deployment (replicas, strategy, pod template,
conditions, its old and new ReplicaSets, events).

One entry of the kind -> describer table in kctl.output.describe; the ReplicaSets come from the
`describe` command (kctl.cli.get) through the Context.
"""

from __future__ import annotations

from typing import Iterable

from kctl.output.cells import format_label_selector
from kctl.output.describe.context import Context
from kctl.output.describe.podspec import describe_pod_template
from kctl.output.describe.sections import rfc1123z, write_annotations, write_events, write_header, write_labels
from kctl.output.describe.writer import PrefixWriter

__all__ = ["describe_deployment"]


def describe_deployment(w: PrefixWriter, d: dict, ctx: Context) -> None:
    """kubectl's DeploymentDescriber; Old/NewReplicaSets only when ctx has the ReplicaSets."""
    meta, spec, status = d.get("metadata") or {}, d.get("spec") or {}, d.get("status") or {}
    write_header(w, meta)
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Selector:\t{format_label_selector(spec.get('selector'), empty='')}\n")
    w.write(0, f"Replicas:\t{spec.get('replicas', 1)} desired | {status.get('updatedReplicas', 0)} updated"
               f" | {status.get('replicas', 0)} total | {status.get('availableReplicas', 0)} available"
               f" | {status.get('unavailableReplicas', 0)} unavailable\n")
    strategy = spec.get("strategy") or {"type": "RollingUpdate"}
    w.write(0, f"StrategyType:\t{strategy.get('type', '')}\n")
    w.write(0, f"MinReadySeconds:\t{spec.get('minReadySeconds', 0)}\n")
    if strategy.get("type") == "RollingUpdate" or strategy.get("rollingUpdate"):
        ru = strategy.get("rollingUpdate") or {}
        w.write(0, f"RollingUpdateStrategy:\t{ru.get('maxUnavailable', '25%')} max unavailable, "
                   f"{ru.get('maxSurge', '25%')} max surge\n")
    describe_pod_template(w, spec.get("template") or {})
    conditions = status.get("conditions") or ()
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\tReason\n")
        w.write(1, "----\t------\t------\n")
        for c in conditions:
            w.write(1, f"{c.get('type', '')} \t{c.get('status', '')}\t{c.get('reason', '')}\n")
    if ctx.replica_sets is not None:
        old, new = _split_replica_sets(d, ctx.replica_sets)
        w.write(0, f"OldReplicaSets:\t{_replica_set_list([rs for rs in old if _rs_replicas(rs)])}\n")
        w.write(0, f"NewReplicaSet:\t{_replica_set_list([new] if new else [])}\n")
    write_events(w, ctx.events, ctx.now)


def _rs_replicas(rs: dict) -> int:
    return (rs.get("spec") or {}).get("replicas", 1)


def _without_hash(template: dict) -> dict:
    meta = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != "pod-template-hash"}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    return {**template, "metadata": meta}


def _split_replica_sets(d: dict, replica_sets: Iterable[dict]) -> tuple[list[dict], dict | None]:
    """The ReplicaSets `d` controls: (old ones, the one whose template is d's), oldest first."""
    uid, name = (d.get("metadata") or {}).get("uid"), (d.get("metadata") or {}).get("name")
    owned = []
    for rs in replica_sets:
        for ref in (rs.get("metadata") or {}).get("ownerReferences") or ():
            if ref.get("controller") and ref.get("kind") == "Deployment" and \
                    (ref.get("uid") == uid if uid and ref.get("uid") else ref.get("name") == name):
                owned.append(rs)
                break
    owned.sort(key=lambda rs: ((rs.get("metadata") or {}).get("creationTimestamp") or "",
                               (rs.get("metadata") or {}).get("name") or ""))
    template = _without_hash((d.get("spec") or {}).get("template") or {})
    new = next((rs for rs in owned
                if _without_hash((rs.get("spec") or {}).get("template") or {}) == template), None)
    return [rs for rs in owned if rs is not new], new


def _replica_set_list(sets: list[dict]) -> str:
    text = ", ".join(f"{(rs.get('metadata') or {}).get('name', '')} "
                     f"({(rs.get('status') or {}).get('replicas', 0)}/{_rs_replicas(rs)} replicas created)"
                     for rs in sets)
    return text or "<none>"
