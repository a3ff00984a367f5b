"""What every describer gets besides the object: the time, its events and related objects.

`Context` is built once per object by kctl.output.describe.describe; `Describer` is the type of
the functions in its kind -> describer table (one per module of this package: pods, workloads,
nodes, networking, config, generic).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import datetime
from typing import Callable

from kctl.output.describe.writer import PrefixWriter

__all__ = ["Context", "Describer"]


@dataclass
class Context:
    """The describe run's clock, the object's events and (per kind) the objects its layout shows.

    replica_sets: a Deployment's namespace's ReplicaSets, None to omit Old/NewReplicaSets.
    endpoint_slices: a Service's EndpointSlices, for each port's `Endpoints:` line.
    pods: a StatefulSet's namespace's pods, for `Pods Status:`.
    """

    now: datetime
    events: list[dict]
    replica_sets: list[dict] | None
    endpoint_slices: list[dict] = dataclass_field(default_factory=list)
    #: a StatefulSet's namespace's pods (its `Pods Status:` counts), None when not fetched
    pods: list[dict] | None = None


#: one kind's layout: writes `obj` (with `ctx`'s events) to the writer
Describer = Callable[[PrefixWriter, dict, Context], None]
