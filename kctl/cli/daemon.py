"""`kctl daemon`: run the node agents in the foreground until SIGINT or SIGTERM.

On start, if the store has no Node yet, this host registers itself as one, reached
through a local Podman socket: `--podman-url`, else the system socket
(/run/podman/podman.sock) if it answers, else a `podman system service` the daemon
starts itself on /run/kctl/podman.sock (kctl.runtime.service) and stops on exit. Then a
NodeAgentSupervisor (kctl.agent.agent) runs one agent per Node. Stopping leaves every
container running: the next daemon adopts them.

Logs go to stderr, one line per record: time, level, component, message.
"""

from __future__ import annotations

import enum
import logging
import os
import signal
import socket
import sys
import threading
from typing import Annotated, Optional
from urllib.parse import urlparse

import typer

from kctl.cli import connect
from kctl.cli.main import app

log = logging.getLogger("kctl.daemon")

SYSTEM_SOCKET = "/run/podman/podman.sock"
KCTL_SOCKET = "/run/kctl/podman.sock"  # kctl.runtime.connect.DEFAULT_SOCKET
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class LogLevel(str, enum.Enum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


# -- local Podman --------------------------------------------------------------------------

def podman_answers(socket_path: str) -> bool:
    """Whether a Podman API service answers on the unix socket."""
    from kctl.runtime.service import ping

    return ping(socket_path)


def local_sockets() -> tuple[str, str]:
    """(the system Podman socket to try, the socket kctl starts its own service on)."""
    if os.geteuid() == 0:
        return SYSTEM_SOCKET, KCTL_SOCKET
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/kctl-{os.geteuid()}"
    return os.path.join(runtime_dir, "podman", "podman.sock"), os.path.join(runtime_dir, "kctl", "podman.sock")


class LocalServices:
    """The Podman services this daemon started (on kctl's own socket); stopped on exit."""

    def __init__(self) -> None:
        self._services: dict[str, object] = {}
        self._lock = threading.Lock()

    def ensure(self, socket_path: str) -> None:
        """A Podman service answers on socket_path: an existing one, or one started now."""
        with self._lock:
            if socket_path in self._services or podman_answers(socket_path):
                return
            from kctl.runtime.service import LocalPodmanService, default_conf

            conf = default_conf()
            log.info("starting podman system service on %s%s", socket_path,
                     f" (CONTAINERS_CONF={conf})" if conf else "")
            service = LocalPodmanService.ensure(socket_path, conf=conf)
            if service.owned:
                self._services[socket_path] = service

    def stop_all(self) -> None:
        with self._lock:
            services, self._services = self._services, {}
        for path, service in services.items():
            try:
                service.stop()
                log.info("stopped podman system service on %s", path)
            except Exception as exc:
                log.warning("cannot stop podman system service on %s: %s", path, exc)


def _unix_path(url: str) -> str | None:
    parsed = urlparse(url)
    return parsed.path if parsed.scheme == "unix" else None


def choose_local_url(podman_url: str | None, services: LocalServices) -> str:
    """The Podman URL this host registers with (see the module docstring)."""
    if podman_url:
        return podman_url
    system, own = local_sockets()
    if podman_answers(system):
        return f"unix://{system}"
    services.ensure(own)
    return f"unix://{own}"


def make_runtime_factory(services: LocalServices):
    """runtime_for_node, first starting kctl's own local service when a Node names its socket."""
    own = local_sockets()[1]

    def runtime_for(node: dict):
        from kctl.agent.agent import node_connection
        from kctl.runtime.connect import runtime_for_node

        path = _unix_path(node_connection(node)[0])
        if path == own:
            services.ensure(own)
        return runtime_for_node(node)

    return runtime_for


# -- the command ---------------------------------------------------------------------------

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


def _install_signal_handlers(stop: threading.Event) -> dict:
    def handler(signum, _frame) -> None:
        name = signal.Signals(signum).name
        if stop.is_set():  # a second signal while stopping: give up waiting
            log.warning("received %s again: exiting at once", name)
            os._exit(128 + signum)
        log.info("received %s: shutting down", name)
        stop.set()

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    return previous


@app.command()
def daemon(
    store: Annotated[Optional[str], typer.Option(
        "--store", help="SQLite store file (as the global --store).")] = None,
    node: Annotated[Optional[str], typer.Option(
        "--node", help="Name this host registers as when the store has no Node (default: hostname).")] = None,
    podman_url: Annotated[Optional[str], typer.Option(
        "--podman-url", help="Podman API URL this host registers with (default: the local socket).")] = None,
    image_source: Annotated[Optional[str], typer.Option(
        "--image-source", help="Podman API URL of the control host's images, copied to nodes that lack one "
                               "(default: the local socket that answers; none in node mode).")] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Pod sync threads per node.")] = 4,
    resync: Annotated[float, typer.Option("--resync", min=0.5, help="Seconds between full re-syncs of a pod.")] = 10.0,
    heartbeat: Annotated[float, typer.Option(
        "--heartbeat", min=0.5, help="Seconds between node heartbeats (Lease renewals).")] = 5.0,
    backoff_initial: Annotated[float, typer.Option(
        "--backoff-initial", min=0.1, help="Seconds of the first crash-loop back-off (doubles each restart).")] = 10.0,
    backoff_max: Annotated[float, typer.Option(
        "--backoff-max", min=0.1, help="Longest crash-loop back-off, in seconds.")] = 300.0,
    scheduler_config: Annotated[Optional[str], typer.Option(
        "--scheduler-config", help="Scheduler config file (KubeSchedulerConfiguration-shaped YAML).")] = None,
    event_ttl: Annotated[float, typer.Option(
        "--event-ttl", min=1.0, help="Seconds an Event is kept after it was last seen.")] = 3600.0,
    node_monitor_grace_period: Annotated[float, typer.Option(
        "--node-monitor-grace-period", min=1.0,
        help="Seconds a node may go without renewing its Lease before it is marked Unknown and tainted.")] = 40.0,
    default_toleration_seconds: Annotated[float, typer.Option(
        "--default-toleration-seconds", min=0.0,
        help="Seconds pods without their own not-ready/unreachable toleration stay on such a node.")] = 300.0,
    controllers: Annotated[bool, typer.Option(
        "--controllers/--no-controllers",
        help="Run the controllers and the scheduler (while this daemon holds the leader Lease).")] = True,
    agents: Annotated[bool, typer.Option(
        "--agents/--no-agents",
        help="Run node agents (--no-agents: controllers and scheduler only, as when nodes run in node mode).")] = True,
    server: Annotated[Optional[str], typer.Option(
        "--server", help="Node mode: run only --node's agent, on this host's Podman, for the control plane at "
                         "ssh://user@host[:port]/path/kctl.db (as the global --server).")] = None,
    identity: Annotated[Optional[str], typer.Option(
        "--identity", help="SSH private key for --server (as the global --identity).")] = None,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="debug, info, warning or error.")] = LogLevel.info,
) -> None:
    """Run the node agents, controllers and scheduler in the foreground until SIGINT/SIGTERM.

    Registers this host as a Node when the store has none, then runs one agent per Node;
    controllers and scheduler act while this daemon holds the leader Lease. Stopping
    leaves containers running. With --server (node mode, docs/node-mode.md) it runs only
    this host's agent, against the local Podman, for a control plane reached over SSH.
    """
    from kctl.agent.agent import NodeAgentSupervisor
    from kctl.agent.backoff import Backoff
    from kctl.agent.node import register_node

    configure_logging(log_level.value)
    config = None
    if scheduler_config:
        from kctl.scheduler.config import ConfigError, load_config

        try:
            config = load_config(scheduler_config)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
    if image_source and not image_source.startswith(("unix://", "ssh://")):
        print(f"error: --image-source {image_source!r} is not a unix:// or ssh:// URL", file=sys.stderr)
        raise typer.Exit(2)
    if store and (server or connect.SERVER_URL):
        print("error: --store and --server cannot be used together (the store is the control host's)",
              file=sys.stderr)
        raise typer.Exit(2)
    if server or identity:
        connect.SERVER_URL, connect.IDENTITY = server or connect.SERVER_URL, identity or connect.IDENTITY
        connect.api.cache_clear()
    elif store:
        connect.STORE_PATH = store
        connect.api.cache_clear()
    node_mode = bool(connect.SERVER_URL)  # node mode: only this host's agent, no controllers
    own_node = (node or socket.gethostname()) if node_mode else None
    api = connect.api()
    stop = threading.Event()
    previous = _install_signal_handlers(stop)
    services = LocalServices()
    supervisor = None
    plane = None
    copier = None
    try:
        if node_mode or (agents and not api.list(api.resource("nodes"))[0]):
            try:
                url = choose_local_url(podman_url, services)
            except Exception as exc:  # Podman missing, socket folder not writable...
                print(f"error: no local Podman service: {exc}", file=sys.stderr)
                raise typer.Exit(1) from None
            register_node(api, node or socket.gethostname(), podman_url=url, node_mode=node_mode)
        from kctl.agent.images import daemon_image_copier

        local = [url for url in (podman_url,) if url] + [f"unix://{path}" for path in local_sockets()]
        sources = [image_source] if image_source else [] if node_mode else local
        copier = daemon_image_copier(api, source_urls=sources, agents=lambda: supervisor.agents if supervisor else {})
        supervisor = NodeAgentSupervisor(api, runtime_for_node=make_runtime_factory(services), workers=workers,
                                         image_copier=copier,
                                         resync=resync, heartbeat_interval=heartbeat, own_node=own_node,
                                         backoff=Backoff(initial=backoff_initial, maximum=max(backoff_max, backoff_initial)))
        if agents or node_mode:
            supervisor.start()
        if controllers and not node_mode:
            from kctl.controllers.controlplane import ControlPlane

            plane = ControlPlane(api, scheduler_config=config, event_ttl_seconds=event_ttl,
                                 node_monitor_grace_period=node_monitor_grace_period,
                                 default_toleration_seconds=default_toleration_seconds)
            plane.start()
        log.info("daemon running (store %s); SIGINT or SIGTERM stops it", api.store.path)
        stop.wait()
    finally:
        if plane is not None:
            plane.stop()
        if supervisor is not None:
            supervisor.stop()
        if copier is not None:
            copier.close()
        services.stop_all()
        if node_mode:
            api.close()  # the ssh connection to the control host
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("daemon stopped; containers left running")
