"""`DaemonSettings`: everything one `kctl daemon` runs with, fixed when it starts.

kctl.cli.daemon builds one from the command's flags (after checking them) and hands it
to kctl.daemon.server.run; the control plane (kctl.daemon.controlplane) and the
controller table (kctl.daemon.controllers) read their parts of it. Frozen: nothing
changes a running daemon's settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kctl.apiserver.services.ranges import (DEFAULT_CLUSTER_CIDR, DEFAULT_NODE_CIDR_MASK_SIZE,
                                            DEFAULT_NODE_PORT_RANGE, DEFAULT_SERVICE_CIDR)
from kctl.client.clusterconfig import DEFAULT_CLUSTER_DNS, DEFAULT_CLUSTER_DOMAIN
from kctl.daemon.controllers import CONTROLLER_NAMES


@dataclass(frozen=True)
class DaemonSettings:
    """A daemon's settings; the defaults are those of `kctl daemon` without flags."""

    #: the Node this host registers as when the store has none (None: the hostname)
    node: str | None = None
    #: the Podman API URL this host registers with (None: the local socket that answers)
    podman_url: str | None = None
    #: where nodes that lack an image get it from (None: the local sockets; none in node mode)
    image_source: str | None = None
    #: pod sync threads per node agent
    workers: int = 4
    #: seconds between full re-syncs of a pod
    resync: float = 10.0
    #: seconds between node heartbeats (Lease renewals)
    heartbeat: float = 5.0
    #: seconds between two usage samples of a host (metrics-server's --metric-resolution; 0: no metrics)
    metric_resolution: float = 15.0
    #: the first crash-loop back-off, and the longest
    backoff_initial: float = 10.0
    backoff_max: float = 300.0
    #: a loaded kctl.scheduler.config.SchedulerConfig (None: the default profile)
    scheduler_config: Any = None
    #: seconds an Event is kept after it was last seen
    event_ttl: float = 3600.0
    #: seconds a node may go without renewing its Lease before it is marked Unknown
    node_monitor_grace_period: float = 40.0
    #: seconds pods without their own not-ready/unreachable toleration stay on such a node
    default_toleration_seconds: float = 300.0
    #: most endpoints one EndpointSlice holds (kube-controller-manager's --max-endpoints-per-slice)
    max_endpoints_per_slice: int = 100
    #: the pod network every Node's podCIDR is cut from (--cluster-cidr), and the podCIDRs' prefix length
    cluster_cidr: str = DEFAULT_CLUSTER_CIDR
    node_cidr_mask_size: int = DEFAULT_NODE_CIDR_MASK_SIZE
    #: Services' ClusterIPs and node ports (--service-cluster-ip-range, --service-node-port-range): written to
    #: the store at start (kctl.apiserver.services.config), where every API server allocates from
    service_cluster_ip_range: str = DEFAULT_SERVICE_CIDR
    service_node_port_range: str = DEFAULT_NODE_PORT_RANGE
    #: cluster DNS (kctl.daemon.clusterdns): the kube-dns Service's ClusterIP (--cluster-dns), the domain
    #: (--cluster-domain), the port the leading daemon serves on (--cluster-dns-port; 0: any free one, None:
    #: no DNS served) and the address(es) the kube-dns EndpointSlice names (empty: found from the routes)
    cluster_dns: str = DEFAULT_CLUSTER_DNS
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
    cluster_dns_port: int | None = 10053
    cluster_dns_advertise_addresses: tuple[str, ...] = ()
    #: the HorizontalPodAutoscaler controller (kube-controller-manager's --horizontal-pod-autoscaler-* flags):
    #: seconds between syncs of an HPA, the scale-down stabilization window, the tolerance, the cpu
    #: initialization period and the initial readiness delay
    horizontal_pod_autoscaler_sync_period: float = 15.0
    horizontal_pod_autoscaler_downscale_stabilization: float = 300.0
    horizontal_pod_autoscaler_tolerance: float = 0.1
    horizontal_pod_autoscaler_cpu_initialization_period: float = 300.0
    horizontal_pod_autoscaler_initial_readiness_delay: float = 30.0
    #: run the controller manager and the scheduler (while this daemon holds the leader Lease)
    control_plane: bool = True
    #: the controllers the controller manager runs (`--controllers`), in the table's order
    controllers: tuple[str, ...] = CONTROLLER_NAMES
    #: worker threads per controller
    controller_workers: int = 2
    #: run node agents (one per Node; only this host's in node mode)
    agents: bool = True
    #: node mode (`--server`): only this host's agent, for a control plane reached over SSH
    node_mode: bool = False
    #: the Kubernetes REST API over HTTPS (`--listen ADDR:PORT`, kctl.kubeapi): (host, port), None: not served
    listen: tuple[str, int] | None = None
    #: extra names and addresses of the HTTPS API's serving certificate (`--tls-san`)
    tls_sans: tuple[str, ...] = ()
    #: leader election (kube-controller-manager's --leader-elect-lease-duration, --leader-elect-renew-deadline,
    #: --leader-elect-retry-period), seconds: the leader Lease's duration, how long a leader may go without
    #: renewing before it stops leading (its controllers, scheduler and ssh:// node agents), and how often
    #: candidates try and the leader renews
    leader_elect_lease_duration: float = 15.0
    leader_elect_renew_deadline: float = 10.0
    leader_elect_retry_period: float = 2.0

    def __post_init__(self) -> None:
        from kctl.client.leader import election_timing_problem

        problem = election_timing_problem(self.leader_elect_lease_duration, self.leader_elect_renew_deadline,
                                          self.leader_elect_retry_period, self.leader_elect_retry_period)
        if problem:
            raise ValueError(f"leader election: {problem}")

    def leader_election(self) -> Any:
        """These timings as a kctl.client.leader.LeaderElectionSettings (the controller manager's Lease)."""
        from kctl.client.leader import LeaderElectionSettings

        return LeaderElectionSettings(lease_duration=int(self.leader_elect_lease_duration),
                                      renew_deadline=self.leader_elect_renew_deadline,
                                      renew_interval=self.leader_elect_retry_period,
                                      retry_interval=self.leader_elect_retry_period)


__all__ = ["DaemonSettings"]
