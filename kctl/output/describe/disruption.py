"""kubectl describe's layout for a PodDisruptionBudget (policy/v1): its budget, selector and status counts.

An entry of the kind -> describer table in kctl.output.describe; as kubectl's
describePodDisruptionBudgetV1 (Name, Namespace, Min available or Max unavailable, Selector,
Status: Allowed disruptions, Current, Desired, Total; then the events).
"""

from __future__ import annotations

from kctl.output.cells import format_label_selector
from kctl.output.describe.context import Context
from kctl.output.describe.sections import write_events
from kctl.output.describe.writer import PrefixWriter

__all__ = ["describe_pdb"]


def describe_pdb(w: PrefixWriter, pdb: dict, ctx: Context) -> None:
    """kubectl's describePodDisruptionBudgetV1 (a nil or empty selector prints empty, as labels' String does)."""
    meta, spec, status = pdb.get("metadata") or {}, pdb.get("spec") or {}, pdb.get("status") or {}
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    if spec.get("minAvailable") is not None:
        w.write(0, f"Min available:\t{spec['minAvailable']}\n")
    elif spec.get("maxUnavailable") is not None:
        w.write(0, f"Max unavailable:\t{spec['maxUnavailable']}\n")
    w.write(0, f"Selector:\t{format_label_selector(spec.get('selector'), empty='')}\n")
    w.write(0, "Status:\n")
    w.write(2, f"Allowed disruptions:\t{int(status.get('disruptionsAllowed') or 0)}\n")
    w.write(2, f"Current:\t{int(status.get('currentHealthy') or 0)}\n")
    w.write(2, f"Desired:\t{int(status.get('desiredHealthy') or 0)}\n")
    w.write(2, f"Total:\t{int(status.get('expectedPods') or 0)}\n")
    write_events(w, ctx.events, ctx.now)
