"""`kctl daemon`: flags in, a DaemonSettings out, then kctl.daemon.server.run until SIGINT/SIGTERM.

This module only reads and checks the command's flags (one line and exit 2 for a bad
one), builds the frozen DaemonSettings (kctl.daemon.settings), opens the API (the
store, or the control host's with --server), sets up logging and calls `run`. What runs
(node registration, the node agents, the controllers chosen by `--controllers`, the
scheduler) and how it stops is kctl.daemon's (see kctl/daemon/server.py).

Logs go to stderr, one line per record: time, level, component, message.
"""

from __future__ import annotations

import enum
import logging
import sys
from typing import Annotated, Optional

import typer

from kctl.cli import connect
from kctl.cli.durations import duration
from kctl.daemon.controllers import CONTROLLER_NAMES

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class LogLevel(str, enum.Enum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


def configure_logging(level: str) -> None:
    """One line per record on stderr: time level component message."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%Y-%m-%dT%H:%M:%S%z"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in ("urllib3", "paramiko", "podman"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def _usage_error(message: str) -> typer.Exit:
    """One line on stderr; the exit (2, as a bad flag) for the caller to raise."""
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(2)


def _check_cluster_dns(address: str | None, service_cidr: str, domain: str, advertise: list[str]) -> str:
    """The --cluster-dns address (None: the Service range's 10th, as kubeadm's GetDNSIP); ValueError naming the
    flag when it, --cluster-domain or an advertised address is not usable."""
    import ipaddress
    import re

    network = ipaddress.ip_network(service_cidr, strict=False)
    if address is None:
        address = str(network[10])
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise ValueError(f"--cluster-dns {address!r} is not an IP address") from None
    if ip.version != network.version or ip not in network:
        raise ValueError(f"--cluster-dns {address} is not in --service-cluster-ip-range {service_cidr}")
    name = domain.rstrip(".").lower()
    label = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
    if not name or len(name) > 253 or not re.fullmatch(rf"{label}(\.{label})*", name):
        raise ValueError(f"--cluster-domain {domain!r} is not a DNS domain name")
    for given in advertise:
        try:
            if ipaddress.ip_address(given).version != 4:
                raise ValueError
        except ValueError:
            raise ValueError(f"--cluster-dns-advertise-address {given!r} is not an IPv4 address") from None
    return address


@app.command()
def daemon(
    store: Annotated[Optional[str], typer.Option(
        "--store", help="SQLite store file or etcd://host:2379[,...][/prefix] (as the global --store).")] = None,
    etcd_compaction_interval: Annotated[float, typer.Option(
        "--etcd-compaction-interval", click_type=duration(min=0.0),
        help="With an etcd:// store: time between compactions of etcd's history (as kube-apiserver's flag; "
             "0: none).")] = 300.0,
    node: Annotated[Optional[str], typer.Option(
        "--node", help="Name this host registers as when the store has no Node (default: hostname).")] = None,
    podman_url: Annotated[Optional[str], typer.Option(
        "--podman-url", help="Podman API URL this host registers with (default: the local socket).")] = None,
    image_source: Annotated[Optional[str], typer.Option(
        "--image-source", help="Podman API URL of the control host's images, copied to nodes that lack one "
                               "(default: the local socket that answers; none in node mode).")] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Pod sync threads per node.")] = 4,
    resync: Annotated[float, typer.Option(
        "--resync", click_type=duration(min=0.5), help="Time between full re-syncs of a pod.")] = 10.0,
    heartbeat: Annotated[float, typer.Option(
        "--heartbeat", click_type=duration(min=0.5), help="Time between node heartbeats (Lease renewals).")] = 5.0,
    metric_resolution: Annotated[float, typer.Option(
        "--metric-resolution", click_type=duration(min=0.0),
        help="Time between two samples of each host's pod and node usage, written as PodMetrics and NodeMetrics "
             "for `kctl top` and autoscaling (as metrics-server's flag; 0: none).")] = 15.0,
    backoff_initial: Annotated[float, typer.Option(
        "--backoff-initial", click_type=duration(min=0.1),
        help="Length of the first crash-loop back-off (doubles each restart).")] = 10.0,
    backoff_max: Annotated[float, typer.Option(
        "--backoff-max", click_type=duration(min=0.1), help="Longest crash-loop back-off.")] = 300.0,
    scheduler_config: Annotated[Optional[str], typer.Option(
        "--scheduler-config", help="Scheduler config file (KubeSchedulerConfiguration-shaped YAML).")] = None,
    event_ttl: Annotated[float, typer.Option(
        "--event-ttl", click_type=duration(min=1.0),
        help="How long an Event is kept after it was last seen.")] = 3600.0,
    node_monitor_grace_period: Annotated[float, typer.Option(
        "--node-monitor-grace-period", click_type=duration(min=1.0),
        help="How long a node may go without renewing its Lease before it is marked Unknown and tainted.")] = 40.0,
    default_toleration_seconds: Annotated[float, typer.Option(
        "--default-toleration-seconds", click_type=duration(min=0.0),
        help="Seconds pods without their own not-ready/unreachable toleration stay on such a node.")] = 300.0,
    max_endpoints_per_slice: Annotated[int, typer.Option(
        "--max-endpoints-per-slice", min=1, max=1000,
        help="Most endpoints one EndpointSlice holds (as kube-controller-manager's flag).")] = 100,
    cluster_cidr: Annotated[str, typer.Option(
        "--cluster-cidr", metavar="CIDR",
        help="The pod network: each Node's podCIDR is cut from it by node-ipam-controller.")] = "10.244.0.0/16",
    node_cidr_mask_size: Annotated[int, typer.Option(
        "--node-cidr-mask-size", help="Prefix length of each Node's podCIDR.")] = 24,
    service_cluster_ip_range: Annotated[str, typer.Option(
        "--service-cluster-ip-range", metavar="CIDR",
        help="Services' ClusterIPs come from it (the ServiceCIDR \"kubernetes\" in the store).")] = "10.96.0.0/16",
    service_node_port_range: Annotated[str, typer.Option(
        "--service-node-port-range", metavar="RANGE",
        help="Ports NodePort and LoadBalancer Services may use, BASE-LAST.")] = "30000-32767",
    cluster_dns: Annotated[Optional[str], typer.Option(
        "--cluster-dns", metavar="IP",
        help="ClusterIP of the kube-system/kube-dns Service, the nameserver of pods' resolv.conf "
             "(in --service-cluster-ip-range; default: its 10th address, 10.96.0.10, as kubeadm).")] = None,
    cluster_domain: Annotated[str, typer.Option(
        "--cluster-domain", metavar="DOMAIN",
        help="The cluster's DNS domain (pods' search domains).")] = "cluster.local",
    cluster_dns_port: Annotated[int, typer.Option(
        "--cluster-dns-port", min=0, max=65535,
        help="UDP and TCP port the leading daemon serves cluster DNS on, on all addresses (0: any free port); "
             "kube-dns's EndpointSlice points there.")] = 10053,
    cluster_dns_advertise_address: Annotated[Optional[list[str]], typer.Option(
        "--cluster-dns-advertise-address", metavar="IP",
        help="Address of this host the Nodes reach its DNS at, for kube-dns's EndpointSlice (repeatable; "
             "default: the source address of the route to each Node).")] = None,
    hpa_sync_period: Annotated[float, typer.Option(
        "--horizontal-pod-autoscaler-sync-period", click_type=duration(min=0.1),
        help="Time between two looks of the horizontal-pod-autoscaler controller at each HPA.")] = 15.0,
    hpa_downscale_stabilization: Annotated[float, typer.Option(
        "--horizontal-pod-autoscaler-downscale-stabilization", click_type=duration(min=0.0),
        help="An HPA scales down to the highest count it recommended within this window (its behavior may "
             "set its own).")] = 300.0,
    hpa_tolerance: Annotated[float, typer.Option(
        "--horizontal-pod-autoscaler-tolerance", min=0.0,
        help="An HPA leaves its target alone while usage/target is within 1 +- this.")] = 0.1,
    hpa_cpu_initialization_period: Annotated[float, typer.Option(
        "--horizontal-pod-autoscaler-cpu-initialization-period", click_type=duration(min=0.0),
        help="After a pod starts, its cpu samples count for an HPA only once it is Ready and sampled a full "
             "window after that, for this long.")] = 300.0,
    hpa_initial_readiness_delay: Annotated[float, typer.Option(
        "--horizontal-pod-autoscaler-initial-readiness-delay", click_type=duration(min=0.0),
        help="After a pod starts, readiness changes within this delay count as its initial readiness for "
             "an HPA.")] = 30.0,
    controllers: Annotated[str, typer.Option(
        "--controllers", metavar="LIST",
        help="Controllers to run, comma-separated: '*' all, 'name' enables one, '-name' disables one "
             f"(as kube-controller-manager's; e.g. '*,-podgc'). Known: {', '.join(CONTROLLER_NAMES)}.")] = "*",
    no_controllers: Annotated[bool, typer.Option(
        "--no-controllers", help="Run no controllers and no scheduler (node agents only).")] = False,
    agents: Annotated[bool, typer.Option(
        "--agents/--no-agents",
        help="Run node agents (--no-agents: controllers and scheduler only, as when nodes run in node mode).")] = True,
    server: Annotated[Optional[str], typer.Option(
        "--server", help="Node mode: run only --node's agent, on this host's Podman, for the control plane at "
                         "ssh://user@host[:port]/path/kctl.db or https://host:port (with --kubeconfig's "
                         "credentials; as the global --server).")] = None,
    identity: Annotated[Optional[str], typer.Option(
        "--identity", help="SSH private key for --server (as the global --identity).")] = None,
    listen: Annotated[Optional[str], typer.Option(
        "--listen", metavar="ADDR:PORT",
        help="Serve the Kubernetes REST API over HTTPS here, for kubectl and client libraries (e.g. "
             "127.0.0.1:6443; ':6443' for every address; docs/api.md). Off unless given.")] = None,
    tls_san: Annotated[Optional[list[str]], typer.Option(
        "--tls-san", metavar="NAME",
        help="Extra DNS name or IP address of the HTTPS API's serving certificate (repeatable; this host's "
             "names and addresses are always in it).")] = None,
    leader_elect_lease_duration: Annotated[float, typer.Option(
        "--leader-elect-lease-duration", click_type=duration(min=1.0),
        help="How long the leader Lease holds without renewal; a follower waits this long before it takes over "
             "from a leader that stopped renewing (whole seconds; as kube-controller-manager's flag).")] = 15.0,
    leader_elect_renew_deadline: Annotated[float, typer.Option(
        "--leader-elect-renew-deadline", click_type=duration(min=0.1),
        help="A leader that could not renew for this long stops leading (its controllers, scheduler and ssh "
             "node agents); shorter than the lease duration.")] = 10.0,
    leader_elect_retry_period: Annotated[float, typer.Option(
        "--leader-elect-retry-period", click_type=duration(min=0.01),
        help="How often the leader renews and followers try to take the Lease; shorter than the renew "
             "deadline.")] = 2.0,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="debug, info, warning or error.")] = LogLevel.info,
) -> None:
    """Run the node agents, controllers and scheduler in the foreground until SIGINT/SIGTERM.

    Registers this host as a Node when the store has none, then runs one agent per Node;
    controllers and scheduler act while this daemon holds the leader Lease. Stopping
    leaves containers running. With --server (node mode, docs/node-mode.md) it runs only
    this host's agent, against the local Podman, for a control plane reached over SSH.
    """
    from kctl.daemon.controllers import UnknownController, enabled_controllers
    from kctl.daemon.localpodman import NoLocalPodman
    from kctl.daemon.server import APIListenError, run
    from kctl.daemon.settings import DaemonSettings

    config = None
    if scheduler_config:
        from kctl.scheduler.config import ConfigError, load_config

        try:
            config = load_config(scheduler_config)
        except ConfigError as exc:
            raise _usage_error(str(exc)) from None
    try:
        chosen = enabled_controllers(controllers)
    except UnknownController as exc:
        raise _usage_error(f"--controllers: {exc}") from None
    from kctl.apiserver.services.ranges import check_cluster_cidr, parse_port_range, parse_service_cidr

    try:
        check_cluster_cidr(cluster_cidr, node_cidr_mask_size)
        parse_service_cidr(service_cluster_ip_range)
        parse_port_range(service_node_port_range)
        cluster_dns = _check_cluster_dns(cluster_dns, service_cluster_ip_range, cluster_domain,
                                         cluster_dns_advertise_address or [])
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    listen_at = None
    if listen is not None:
        from kctl.kubeapi.serving import parse_listen

        try:
            listen_at = parse_listen(listen)
        except ValueError as exc:
            raise _usage_error(str(exc)) from None
    if tls_san and listen is None:
        raise _usage_error("--tls-san needs --listen (it names the HTTPS API's certificate)")
    if image_source and not image_source.startswith(("unix://", "ssh://")):
        raise _usage_error(f"--image-source {image_source!r} is not a unix:// or ssh:// URL")
    from dataclasses import replace

    given = connect.current()
    if store and (server or given.remote):
        raise _usage_error("--store and --server cannot be used together (the store is the control host's)")
    if server or identity:
        connect.use(replace(given, server_url=server or given.server_url, identity=identity or given.identity))
    elif store:
        connect.use(replace(given, store_path=store))
    if connect.current().etcd:  # the daemon compacts etcd's history (coordinated with the other daemons)
        connect.use(replace(connect.current(), etcd_compaction_interval=etcd_compaction_interval or None))
    node_mode = connect.current().remote  # node mode (ssh:// or an HTTPS API): only this host's agent
    if node_mode and listen_at is not None:
        raise _usage_error("--listen serves the store on this host: run it on the control host, not in node mode")
    from kctl.client.leader import election_timing_problem

    problem = election_timing_problem(leader_elect_lease_duration, leader_elect_renew_deadline,
                                      leader_elect_retry_period, leader_elect_retry_period)
    if problem:
        raise _usage_error(f"--leader-elect-*: {problem}")
    settings = DaemonSettings(
        leader_elect_lease_duration=leader_elect_lease_duration,
        leader_elect_renew_deadline=leader_elect_renew_deadline,
        leader_elect_retry_period=leader_elect_retry_period,
        node=node, podman_url=podman_url, image_source=image_source, workers=workers, resync=resync,
        heartbeat=heartbeat, backoff_initial=backoff_initial, backoff_max=backoff_max, scheduler_config=config,
        metric_resolution=metric_resolution,
        horizontal_pod_autoscaler_sync_period=hpa_sync_period,
        horizontal_pod_autoscaler_downscale_stabilization=hpa_downscale_stabilization,
        horizontal_pod_autoscaler_tolerance=hpa_tolerance,
        horizontal_pod_autoscaler_cpu_initialization_period=hpa_cpu_initialization_period,
        horizontal_pod_autoscaler_initial_readiness_delay=hpa_initial_readiness_delay,
        event_ttl=event_ttl, node_monitor_grace_period=node_monitor_grace_period,
        default_toleration_seconds=default_toleration_seconds, max_endpoints_per_slice=max_endpoints_per_slice,
        control_plane=not no_controllers,
        controllers=chosen, agents=agents, node_mode=node_mode, cluster_cidr=cluster_cidr,
        node_cidr_mask_size=node_cidr_mask_size, service_cluster_ip_range=service_cluster_ip_range,
        service_node_port_range=service_node_port_range, cluster_dns=cluster_dns,
        cluster_domain=cluster_domain.rstrip(".").lower(), cluster_dns_port=cluster_dns_port,
        cluster_dns_advertise_addresses=tuple(cluster_dns_advertise_address or ()),
        listen=listen_at, tls_sans=tuple(tls_san or ()))
    configure_logging(log_level.value)
    api = connect.api()
    if not node_mode:  # as kube-apiserver at start: the Service ranges into the store, the node-port bitmap repaired
        from kctl.apiserver.services.config import configure

        for warning in configure(api, service_cidr=service_cluster_ip_range, node_port_range=service_node_port_range):
            logging.getLogger("kctl.daemon").warning("%s", warning)
    try:
        run(settings, api=api)
    except NoLocalPodman as exc:
        print(f"error: no local Podman service: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    except APIListenError as exc:
        print(f"error: --listen {listen}: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    finally:
        if node_mode:
            api.close()  # the ssh connection to the control host
