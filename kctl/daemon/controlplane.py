"""The control plane of one `kctl daemon`: the controller manager, the scheduler and cluster DNS.

kctl.daemon.server starts one ControlPlane beside the node agents. The controller manager
(kctl.controllers.manager) runs the controllers the settings name (`--controllers`, made
from kctl.daemon.controllers' table) while this daemon holds the leader Lease; the
scheduler (kctl.scheduler.scheduler) follows the same leadership: a new Scheduler is
started each time this daemon starts leading and stopped when it stops, so two daemons
on one store never both bind pods. Cluster DNS (kctl.daemon.clusterdns) follows it too: the
leading daemon serves it and points the kube-dns Service's EndpointSlice at itself.

Its leader identity is stable for this host and store (kctl.client.leader.
IdentityLock, held from construction until stop(); `<--node or hostname>_<slot>`): a daemon
restarted after a crash takes its own Lease back at once. `leadership` (the elector: its
term and listeners) is what the daemon's node agent supervisor follows (ssh:// Nodes'
agents run only while this daemon leads, fenced by the term: kctl.agent.supervisor).
stop() ends scheduling first, then the controllers (their deferred Events recorded; the
ssh agents stop first, told by the elector), then releases the Lease, so the next daemon
leads at once too.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from kctl.client.leader import IdentityLock, LeaderElector
from kctl.controllers.manager import ControllerManager
from kctl.daemon.controllers import new_controllers
from kctl.daemon.settings import DaemonSettings

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.daemon.clusterdns import ClusterDNSRunner

log = logging.getLogger("kctl.controlplane")


class ControlPlane:
    """Controllers and scheduler, acting only while this process leads (see the module doc)."""

    def __init__(self, api: API, settings: DaemonSettings = DaemonSettings(), *, leader_election: bool = True,
                 identity: str | None = None) -> None:
        self.api = api
        self.settings = settings
        self._identity_lock: IdentityLock | None = None
        store_path = api.local_path  # None over SSH: no identity lock beside a store that is not here
        if identity is None and store_path is not None:  # named for --node when given (else the hostname), so
            # daemons of several hosts with one hostname (a test bed's, cloned machines) still differ
            self._identity_lock = IdentityLock(store_path, hostname=settings.node)
            identity = self._identity_lock.acquire()
        self.manager = ControllerManager(api, new_controllers(settings), workers=settings.controller_workers,
                                         leader_election=leader_election, identity=identity,
                                         election=settings.leader_election())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.dns: ClusterDNSRunner | None = None  # serving while this daemon leads
        if settings.cluster_dns_port is not None:
            from kctl.daemon.clusterdns import ClusterDNSRunner

            self.dns = ClusterDNSRunner(api, settings, self.manager)

    def start(self) -> None:
        """Start leader election and the scheduler's follower thread; returns at once."""
        self.manager.start(self._stop)
        self._thread = threading.Thread(target=self._follow, name="kctl-scheduler-term", daemon=True)
        self._thread.start()
        if self.dns is not None:
            self.dns.start(self._stop)

    @property
    def leadership(self) -> LeaderElector | None:
        """The leader elector (its `term` and `add_listener`, kctl.client.leader); None without leader election.
        The daemon's node agent supervisor follows it: ssh:// Nodes' agents run only while this daemon leads."""
        return self.manager.leadership

    @property
    def identity(self) -> str:
        """This daemon's name on the leader Lease."""
        return self.manager.identity

    def stop(self) -> None:
        """Stop scheduling, then the controllers (Events flushed), then release the Lease."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self.dns is not None:
            self.dns.join(10)
        self.manager.stop()
        if self._identity_lock is not None:
            self._identity_lock.release()

    def _follow(self) -> None:
        """Run a Scheduler for each leadership term of the manager."""
        from kctl.scheduler.scheduler import Scheduler

        config = self.settings.scheduler_config  # a SchedulerConfig (kctl.scheduler.config), or None: defaults
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
