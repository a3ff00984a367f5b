"""The object-lifecycle controllers, ready for `kctl daemon` to hand to the ControllerManager.

Called by the daemon's wiring: `lifecycle_controllers()` returns fresh instances of the
garbage collector, the namespace controller, the event TTL controller and the DaemonSet
controller (kctl/controllers/garbagecollector.py, namespace.py, eventttl.py,
daemonset.py), configured from the few settings a user may change.
"""

from __future__ import annotations

from kctl.controllers.daemonset import DaemonSetController
from kctl.controllers.eventttl import DEFAULT_TTL_SECONDS, EventTTLController, EventTTLSettings
from kctl.controllers.garbagecollector import GarbageCollector
from kctl.controllers.namespace import NamespaceController


def lifecycle_controllers(*, event_ttl_seconds: float = DEFAULT_TTL_SECONDS) -> list:
    """GC, namespace, event TTL and DaemonSet controllers (Events kept event_ttl_seconds)."""
    return [
        GarbageCollector(),
        NamespaceController(),
        EventTTLController(settings=EventTTLSettings(ttl_seconds=event_ttl_seconds)),
        DaemonSetController(),
    ]


__all__ = ["lifecycle_controllers"]
