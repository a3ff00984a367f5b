"""`run(settings, api=...)`: one `kctl daemon`, from start to a clean stop.

kctl.cli.daemon checks the flags, builds a DaemonSettings (kctl.daemon.settings), opens
the API and calls `run`. On start, if the store has no Node yet (or always, in node mode)
this host registers itself as one, reached through a local Podman socket
(kctl.daemon.localpodman). Then a NodeAgentSupervisor (kctl.agent.supervisor) runs one agent
per Node (only this host's in node mode) and, unless node mode or `control_plane=False`,
a ControlPlane (kctl.daemon.controlplane) runs the chosen controllers and the scheduler
while this daemon holds the leader Lease. With the control plane, agents follow its
leadership: ssh:// Nodes' agents run only while this daemon leads (their hosts fenced by the
leader term first, kctl.runtime.fencing) and a unix:// Node's only in the daemon whose own
node name (--node, else the hostname) it has; so several daemons on one store (docs/ha.md)
never drive one host at once.

With `settings.listen` it also serves the Kubernetes REST API over HTTPS (kctl.kubeapi.serving,
started first and stopped last but one; every daemon serves it, leader or not).

`run` returns when `stop` is set, or, without one, on SIGINT/SIGTERM (a second signal
exits at once). Unless in node mode it first records the cluster's network settings
(--cluster-cidr, --cluster-dns, --cluster-domain) in kube-system's ConfigMaps
(kctl.client.clusterconfig). Stopping ends the scheduler and controllers first (their pending Events
recorded, the Lease released so the next daemon leads at once), then the agents, then
the Podman services this daemon started; every container is left running for the next
daemon to adopt.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from typing import TYPE_CHECKING, Any

from kctl.daemon.localpodman import (LocalServices, NoLocalPodman, choose_local_url, local_sockets,
                                     make_runtime_factory)
from kctl.daemon.settings import DaemonSettings

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.daemon")

#: how often the main thread wakes while it waits for a stop. Python runs signal handlers in the main thread
#: only; a signal the kernel hands to another thread just sets a flag the main thread sees when it next runs
#: Python code, which an untimed wait never does (the daemon slept through SIGTERM).
SIGNAL_CHECK_SECONDS = 0.5


class APIListenError(Exception):
    """`--listen`: the HTTPS API could not start (the address is taken, the PKI unusable)."""


def run(settings: DaemonSettings, *, api: API, stop: threading.Event | None = None) -> None:
    """Run the daemon until `stop` is set (None: until SIGINT/SIGTERM); NoLocalPodman if this host
    must register and no Podman service answers or can be started."""
    from kctl.agent.supervisor import NodeAgentSupervisor
    from kctl.agent.backoff import Backoff
    from kctl.agent.images import daemon_image_copier
    from kctl.agent.node import register_node

    previous: dict[int, Any] = {}
    if stop is None:
        stop = threading.Event()
        previous = install_signal_handlers(stop)
    node_mode = settings.node_mode
    own_node = (settings.node or socket.gethostname()) if node_mode else None
    services = LocalServices()
    supervisor = None
    plane = None
    copier = None
    kubeapi = None
    try:
        if settings.control_plane and not node_mode:  # as kubeadm: the control plane's network settings, where
            # every agent reads them (and knows from them that node-ipam gives Nodes their podCIDRs)
            _record_cluster_network(api, settings)
        if settings.listen is not None:  # every daemon serves the HTTPS API it is asked to, leader or not
            from kctl.kubeapi.serving import ListenError, start_for_api

            try:
                kubeapi = start_for_api(api, host=settings.listen[0], port=settings.listen[1],
                                        tls_sans=settings.tls_sans)
            except ListenError as exc:
                raise APIListenError(str(exc)) from None
        if node_mode or (settings.agents and not api.list(api.resource("nodes"))[0]):
            try:
                url = choose_local_url(settings.podman_url, services)
            except Exception as exc:  # Podman missing, socket folder not writable...
                raise NoLocalPodman(str(exc)) from None
            register_node(api, settings.node or socket.gethostname(), podman_url=url, node_mode=node_mode)
        local = [url for url in (settings.podman_url,) if url] + [f"unix://{path}" for path in local_sockets()]
        sources = [settings.image_source] if settings.image_source else [] if node_mode else local
        copier = daemon_image_copier(api, source_urls=sources, agents=lambda: supervisor.agents if supervisor else {})
        if settings.control_plane and not node_mode:
            from kctl.daemon.controlplane import ControlPlane

            plane = ControlPlane(api, settings)
        leadership = plane.leadership if plane is not None else None
        host_node = (settings.node or socket.gethostname()) if leadership is not None else None
        supervisor = NodeAgentSupervisor(
            api, runtime_for_node=make_runtime_factory(services), workers=settings.workers, image_copier=copier,
            leadership=leadership, host_node=host_node,
            resync=settings.resync, heartbeat_interval=settings.heartbeat, own_node=own_node,
            metric_resolution=settings.metric_resolution or None,
            backoff=Backoff(initial=settings.backoff_initial,
                            maximum=max(settings.backoff_max, settings.backoff_initial)))
        if settings.agents or node_mode:
            supervisor.start()
        if plane is not None:
            plane.start()
        log.info("daemon running (store %s); SIGINT or SIGTERM stops it", api.where)
        while not stop.wait(SIGNAL_CHECK_SECONDS):
            pass
    finally:
        if kubeapi is not None:
            kubeapi.stop()
        if plane is not None:
            plane.stop()
        if supervisor is not None:
            supervisor.stop()
        if copier is not None:
            copier.close()
        services.stop_all()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("daemon stopped; containers left running")


def _record_cluster_network(api: API, settings: DaemonSettings) -> None:
    """Write --cluster-cidr, --cluster-dns and --cluster-domain into kube-system's ConfigMaps (clusterconfig)."""
    from kctl.client.clusterconfig import ClusterNetwork, write_cluster_network
    from kctl.machinery.errors import APIError

    network = ClusterNetwork(cluster_cidr=settings.cluster_cidr, cluster_dns=(settings.cluster_dns,),
                             cluster_domain=settings.cluster_domain)
    try:
        write_cluster_network(api, network)
    except APIError as exc:  # agents then go on with what is stored (or the defaults)
        log.warning("cannot record the cluster network settings in %s: %s", "kube-system", exc)


def install_signal_handlers(stop: threading.Event) -> dict[int, Any]:
    """SIGINT/SIGTERM set `stop` (a second one exits at once); returns the handlers they replaced."""
    def handler(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        if stop.is_set():  # a second signal while stopping: give up waiting
            log.warning("received %s again: exiting at once", name)
            os._exit(128 + signum)
        log.info("received %s: shutting down", name)
        stop.set()

    previous: dict[int, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    return previous


__all__ = ["NoLocalPodman", "install_signal_handlers", "run"]
