"""The control plane of one `kctl daemon`: the controller manager and the scheduler.

kctl.cli.daemon starts one ControlPlane beside the node agents. The controller manager
(kctl.controllers.manager) runs every controller while this daemon holds the leader
Lease; the scheduler (kctl.scheduler.scheduler) follows the same leadership: a new
Scheduler is started each time this daemon starts leading and stopped when it stops,
so two daemons on one store never both bind pods.
"""

from __future__ import annotations

import logging
import threading

from kctl.controllers import cronjob, deployment, job, lifecycle, replicaset
from kctl.controllers.manager import ControllerManager

log = logging.getLogger("kctl.controlplane")


def all_controllers(*, event_ttl_seconds: float, node_monitor_grace_period: float = 40.0,
                    default_toleration_seconds: float = 300.0) -> list:
    """Every controller kctl has, in the order their queues are made."""
    from kctl.controllers import ttlafterfinished
    from kctl.controllers.nodelifecycle import node_lifecycle_controllers
    from kctl.sync.controller import controllers as sync_controllers

    return [*replicaset.controllers(), *deployment.controllers(), *job.controllers(),
            *ttlafterfinished.controllers(), *cronjob.controllers(),
            *lifecycle.lifecycle_controllers(event_ttl_seconds=event_ttl_seconds),
            *node_lifecycle_controllers(node_monitor_grace_period=node_monitor_grace_period,
                                        default_toleration_seconds=default_toleration_seconds),
            *sync_controllers()]


class ControlPlane:
    """Controllers and scheduler, acting only while this process leads (see the module doc)."""

    def __init__(self, api, *, scheduler_config=None, event_ttl_seconds: float = 3600.0,
                 node_monitor_grace_period: float = 40.0, default_toleration_seconds: float = 300.0,
                 workers: int = 2, leader_election: bool = True) -> None:
        self.api = api
        self.scheduler_config = scheduler_config
        self.manager = ControllerManager(api, all_controllers(
            event_ttl_seconds=event_ttl_seconds, node_monitor_grace_period=node_monitor_grace_period,
            default_toleration_seconds=default_toleration_seconds), workers=workers, leader_election=leader_election)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start leader election and the scheduler's follower thread; returns at once."""
        self.manager.start(self._stop)
        self._thread = threading.Thread(target=self._follow, name="kctl-scheduler-term", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop scheduling and the controllers, releasing the Lease."""
        self._stop.set()
        self.manager.stop()
        if self._thread is not None:
            self._thread.join(10)

    def _follow(self) -> None:
        """Run a Scheduler for each leadership term of the manager."""
        from kctl.scheduler.scheduler import Scheduler

        config = self.scheduler_config  # a SchedulerConfig (kctl.scheduler.config), or None: defaults
        while not self._stop.is_set():
            if not self.manager.wait_until_running(timeout=1.0):
                continue
            term = threading.Event()
            # the term's shared informers: one cache of Nodes and Pods, not a second copy (None: own watch)
            scheduler = Scheduler(self.api, config=config, informers=self.manager.informers)
            runner = threading.Thread(target=scheduler.run, args=(term,), name="kctl-scheduler", daemon=True)
            runner.start()
            log.info("scheduler running (this daemon leads)")
            while self.manager.is_leader and not self._stop.wait(0.5):
                pass
            term.set()
            runner.join(10)
            if not self._stop.is_set():
                log.info("scheduler stopped: this daemon no longer leads")
