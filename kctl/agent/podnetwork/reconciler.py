"""The pod network of one host, reconciled: the Podman bridge, IP forwarding, routes, the nft table.

A NodeAgent (kctl.agent.agent) makes one `PodNetwork` for its Node and starts and stops
it with itself; its pod syncs ask `pod_network()` which Podman network a new sandbox
joins. The reconciler is level-triggered: a pass looks at the host (the network's subnet,
`ip -j route show proto 76`), compares with what the Nodes say (kctl.agent.podnetwork.plan)
and fixes what differs; it runs when a Node's podCIDR or InternalIP changes (or a Node
comes or goes) and every `resync` seconds. Every command goes through
Runtime.run_on_host (a local process, or ssh with the host's identity and known_hosts).

- A Node with spec.podCIDR gets the Podman network `kctl` (subnet = podCIDR, gateway its
  first address). One of that name with another subnet is removed and made again when no
  running kctl pod has an address in it; else it is kept (Warning `PodNetworkSubnetMismatch`
  on the Node) and pods keep joining it.
- `sysctl -w net.ipv4.ip_forward=1`; the nft table `ip kctl-net` replaced with one
  `nft -f -`; a route to every other Node's podCIDR via its InternalIP, proto 76, and
  proto-76 routes no Node wants deleted.
- A Node without podCIDR (node-ipam off), a rootless host (`id -u` is not 0) or a host
  another Node also claims (same InternalIP): pods keep Podman's default network
  (`pod_network()` is ""), with one Event saying why.
- Until the network is made, `pod_network()` is None: new sandboxes wait, as kubelet's
  pods wait for NetworkReady.
- When the agent stops and its Node is gone (`kctl node remove`, the Node deleted), the
  host's table, routes and network are removed, best effort (a host that cannot be
  reached keeps them; docs/networking.md says how to remove them by hand).

Failures are one log line and a Warning Event on the Node (once per distinct message);
the pass is retried after RETRY_SECONDS.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable

from kctl.agent.podnetwork.plan import (NETWORK_NAME, ROUTE_PROTO, TABLE, current_routes, delete_table_script,
                                        internal_ip_of, network_for, pod_cidr_of, render_table, route_commands,
                                        wanted_routes)
from kctl.client import events
from kctl.client.informer import Informer
from kctl.agent.removal import node_removed
from kctl.runtime.interface import LABEL_MANAGED, Runtime, RuntimeError_

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.agent.podnetwork")

COMPONENT = "kctl-network"
RESYNC_SECONDS = 30.0
RETRY_SECONDS = 5.0
COMMAND_TIMEOUT = 20.0
#: tries (1 s apart) to remove the network on teardown while pods still leave it
NETWORK_REMOVE_ATTEMPTS = 6
#: what pod_network() says while nothing is decided yet: sandboxes wait
#: seconds after its agent starts that a Node without podCIDR keeps new sandboxes waiting for one
POD_CIDR_GRACE_SECONDS = 20.0
NOT_READY = None


class PodNetworkError(Exception):
    """A step of a pass failed (the message says which, in one line)."""


class PodNetwork:
    """The pod network of `node_name`'s host (see the module docstring)."""

    def __init__(self, api: API, node_name: str, runtime: Runtime, *, host_ip: str = "",
                 resync: float = RESYNC_SECONDS, network: str = NETWORK_NAME, table: str = TABLE,
                 paused: Callable[[], bool] = lambda: False,
                 pod_cidr_grace: float = POD_CIDR_GRACE_SECONDS) -> None:
        """`paused()` true: the host cannot be reached now (the node heartbeat says so); passes wait.
        `pod_cidr_grace`: how long after it is made a Node without podCIDR keeps new sandboxes waiting."""
        self.api = api
        self.node_name = node_name
        self.runtime = runtime
        self.host_ip = host_ip
        self.resync = resync
        self.network = network
        self.table = table
        self.paused = paused
        self.nodes = Informer(api, "nodes")
        self.nodes.add_handler(self._on_add, self._on_update, self._on_delete)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._informer_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._joined: str | None = NOT_READY  # what pod_network() returns
        self._default_for_no_cidr = False  # _joined is "" only because the Node had no podCIDR at the last pass
        self._rootless: bool | None = None
        self._said: dict[str, str] = {}  # event reason -> the last message recorded (once per distinct one)
        self.pod_cidr_grace = pod_cidr_grace
        self._made = time.monotonic()
        self.passes = 0  # finished passes
        self._passed = threading.Event()  # set after each pass
        self._pass_lock = threading.Lock()  # one pass at a time

    # -- what the pod syncs ask ---------------------------------------------------------------

    def pod_network(self) -> str | None:
        """The Podman network a new sandbox joins: the pod network's name, "" for Podman's default,
        None while it is not decided or not made yet (the sandbox waits)."""
        joined = self._joined
        if joined is None and self.passes == 0:  # before the first pass: a Node without podCIDR need not wait...
            me = self.nodes.get(None, self.node_name)
            if me is not None and not pod_cidr_of(me):
                joined = ""
        if joined == "" and self._awaiting_pod_cidr():
            return NOT_READY  # ...unless node-ipam may be about to give it one (as kubelet's NetworkReady)
        if joined == "" and self._default_for_no_cidr and self._has_pod_cidr():
            return NOT_READY  # the Node has just got its podCIDR: the pass that makes its network decides
        return joined

    def _has_pod_cidr(self) -> bool:
        me = self.nodes.get(None, self.node_name)
        return me is not None and bool(pod_cidr_of(me))

    def _awaiting_pod_cidr(self) -> bool:
        """This Node has no podCIDR yet, its agent started less than `pod_cidr_grace` s ago, and a control
        plane recorded the cluster network (kube-system/kube-proxy, kctl.client.clusterconfig): node-ipam
        may not have allocated one yet. A pod that started on Podman's default network would stay there
        for its life, out of reach of the other hosts' pods."""
        if time.monotonic() - self._made >= self.pod_cidr_grace:
            return False
        me = self.nodes.get(None, self.node_name)
        if me is None or pod_cidr_of(me):
            return False
        from kctl.client.clusterconfig import KUBE_PROXY_CONFIGMAP, NAMESPACE

        try:
            self.api.get(self.api.resource("configmaps"), KUBE_PROXY_CONFIGMAP, namespace=NAMESPACE)
        except Exception:  # noqa: BLE001 - none (no control plane ever ran here), or the store cannot be read
            return False
        return True

    def wait_first_pass(self, timeout: float, *, stop: threading.Event | None = None) -> bool:
        """Wait until a pass has run (or `timeout` s, or `stop`); whether one has."""
        deadline = time.monotonic() + timeout
        while not self._passed.wait(0.2):
            if time.monotonic() > deadline or (stop is not None and stop.is_set()) or self._stop.is_set():
                return False
        return True

    # -- running --------------------------------------------------------------------------------

    def start(self) -> None:
        """Watch Nodes and reconcile in a thread of its own until stop()."""
        if self._thread is not None:
            return
        self._stop = threading.Event()
        self._informer_thread = self.nodes.start(self._stop)
        self._thread = threading.Thread(target=self._run, name=f"podnetwork-{self.node_name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop reconciling; when this Node is gone from the store, remove what kctl made on the host."""
        self._stop.set()
        self._wake.set()
        for thread in (self._thread, self._informer_thread):
            if thread is not None:
                thread.join(timeout)
        self._thread = self._informer_thread = None
        if node_removed(self.api, self.node_name):
            self.teardown()

    def _run(self) -> None:
        while not self.nodes.wait_for_sync(0.5):
            if self._stop.is_set():
                return
        while not self._stop.is_set():
            self._wake.clear()
            if self.paused():  # no attempts (nor errors) while the host is known to be unreachable
                self._wake.wait(RETRY_SECONDS)
                continue
            ok = self.reconcile()
            self._wake.wait(self.resync if ok else min(self.resync, RETRY_SECONDS))

    # -- informer events: wake only for what the network depends on ---------------------------

    @staticmethod
    def _relevant(node: dict) -> tuple:
        meta = node.get("metadata") or {}
        return meta.get("name"), pod_cidr_of(node), internal_ip_of(node), bool(meta.get("deletionTimestamp"))

    def _on_add(self, node: dict) -> None:
        self._wake.set()

    def _on_update(self, old: dict, new: dict) -> None:
        if self._relevant(old) != self._relevant(new):
            self._wake.set()

    def _on_delete(self, node: dict) -> None:
        self._wake.set()

    # -- one pass -------------------------------------------------------------------------------

    def reconcile(self) -> bool:
        """One pass: look at the host, compare, fix. False when a step failed (retried sooner)."""
        with self._pass_lock:
            try:
                self._reconcile()
                return True
            except (PodNetworkError, RuntimeError_) as error:
                self._warn("PodNetworkFailed", f"pod network of node {self.node_name}: {error}")
                return False
            except Exception as error:  # a bug must not end the reconciler's thread
                log.error("node %s: pod network pass failed: %s: %s", self.node_name, type(error).__name__, error,
                          exc_info=log.isEnabledFor(logging.DEBUG))
                return False
            finally:
                self.passes += 1
                self._passed.set()

    def _reconcile(self) -> None:
        nodes = [n for n in self.nodes.list()]
        me = next((n for n in nodes if (n.get("metadata") or {}).get("name") == self.node_name), None)
        if me is None:  # no such Node (removed, or an agent without one): Podman's default network
            self._joined = ""
            return
        pod_cidr = pod_cidr_of(me)
        my_ip = internal_ip_of(me) or self.host_ip
        if not pod_cidr:  # node-ipam off: as before the pod network (a log line, no Event)
            self._use_default("NoPodCIDR", f"node {self.node_name} has no spec.podCIDR: its pods use Podman's "
                                           "default network (no routes between hosts)", event=False)
            self._default_for_no_cidr = True
            return
        sharing = sorted((n.get("metadata") or {}).get("name", "") for n in nodes
                         if n is not me and my_ip and internal_ip_of(n) == my_ip and pod_cidr_of(n))
        if sharing:
            self._use_default("PodNetworkSharedHost", f"node {self.node_name} shares its host ({my_ip}) with node "
                                                      f"{sharing[0]}: one pod network per host, its pods use "
                                                      "Podman's default network")
            return
        if self._is_rootless():
            self._use_default("PodNetworkRootless", f"node {self.node_name}: rootless Podman cannot make routes "
                                                    "or bridges on the host; its pods use Podman's default "
                                                    "network, reachable only through hostPorts")
            return
        self._ensure_network(pod_cidr, me)
        self._joined, self._default_for_no_cidr = self.network, False
        cluster_cidr = self._cluster_cidr(pod_cidr)
        self._run_ok(["sysctl", "-w", "net.ipv4.ip_forward=1"], what="IP forwarding")
        self._run_ok(["nft", "-f", "-"], what=f"nft table ip {self.table}",
                     stdin=render_table(cluster_cidr=cluster_cidr, pod_cidr=pod_cidr, table=self.table).encode())
        listed = self._run_ok(["ip", "-j", "route", "show", "proto", str(ROUTE_PROTO)], what="routes")
        wanted = wanted_routes(nodes, me=self.node_name, my_ip=my_ip)
        failed: list[str] = []
        for argv in route_commands(current_routes(listed), wanted):  # one bad route does not stop the others
            try:
                self._run_ok(argv, what=f"route to {argv[3]}")
            except PodNetworkError as error:
                failed.append(str(error))
        if failed:
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            raise PodNetworkError(failed[0] + more)
        self._said.pop("PodNetworkFailed", None)

    def _use_default(self, reason: str, message: str, *, event: bool = True) -> None:
        """New sandboxes join Podman's default network; say why once (an Event, or only a log line)."""
        self._joined, self._default_for_no_cidr = "", False
        if not event:
            if self._said.get(reason) != message:
                self._said[reason] = message
                log.info("%s", message)
            return
        self._warn(reason, message)

    def _is_rootless(self) -> bool:
        if self._rootless is None:
            result = self.runtime.run_on_host(["id", "-u"], timeout=COMMAND_TIMEOUT)
            uid = result.stdout.decode(errors="replace").strip()
            self._rootless = result.exit_code == 0 and uid.isdigit() and uid != "0"
        return self._rootless

    def _cluster_cidr(self, pod_cidr: str) -> str:
        from kctl.client.clusterconfig import read_cluster_network

        try:
            cidr = read_cluster_network(self.api).cluster_cidr
            cluster = ipaddress.IPv4Network(cidr, strict=False)
        except Exception as error:  # an unreadable ConfigMap: the Node's own range at least
            log.warning("node %s: cluster CIDR unknown (%s); using the podCIDR %s", self.node_name, error, pod_cidr)
            return pod_cidr
        if not ipaddress.IPv4Network(pod_cidr).subnet_of(cluster):
            raise PodNetworkError(f"podCIDR {pod_cidr} is not inside the cluster CIDR {cluster}")
        return str(cluster)

    def _ensure_network(self, pod_cidr: str, me: dict) -> None:
        subnet, gateway = network_for(pod_cidr)
        current = self.runtime.network_subnet(self.network)
        if current is not None and current != subnet:
            users = self._pods_in(current)
            if users:
                self._warn("PodNetworkSubnetMismatch",
                           f"Podman network {self.network} has subnet {current}, not the podCIDR {subnet}, and "
                           f"{len(users)} pod(s) use it ({users[0]}...): kept until they are gone")
                return
            log.info("node %s: Podman network %s had subnet %s; making it again with %s", self.node_name,
                     self.network, current, subnet)
            self.runtime.remove_network(self.network)
        self.runtime.ensure_network(self.network, subnet=subnet, gateway=gateway,
                                    labels={"io.kctl.network": "pod"})
        self._said.pop("PodNetworkSubnetMismatch", None)

    def _pods_in(self, subnet: str) -> list[str]:
        network = ipaddress.IPv4Network(subnet, strict=False)
        found = []
        for pod in self.runtime.list_pods({LABEL_MANAGED: "true"}):
            with contextlib.suppress(ValueError):
                if pod.running and pod.ip and ipaddress.IPv4Address(pod.ip) in network:
                    found.append(pod.name)
        return found

    def _run_ok(self, argv: list[str], *, what: str, stdin: bytes | None = None) -> str:
        """Run argv on the host; its stdout, or PodNetworkError naming `what` with the command's own words."""
        result = self.runtime.run_on_host(argv, stdin=stdin, timeout=COMMAND_TIMEOUT)
        if result.exit_code != 0:
            said = result.stderr.decode(errors="replace").strip().splitlines()
            raise PodNetworkError(f"{what}: {' '.join(argv[:3])} exited {result.exit_code}"
                                  f"{': ' + said[-1][:300] if said else ''}")
        return result.stdout.decode(errors="replace")

    def _warn(self, reason: str, message: str, *, type: str = "Warning") -> None:
        """Log and record an Event on the Node, once per distinct message."""
        if self._said.get(reason) == message:
            return
        self._said[reason] = message
        (log.warning if type == "Warning" else log.info)("%s", message)
        node = self.nodes.get(None, self.node_name) or {"kind": "Node", "apiVersion": "v1",
                                                          "metadata": {"name": self.node_name}}
        events.record(self.api, {**node, "kind": "Node", "apiVersion": "v1"}, type=type, reason=reason,
                      message=message, component=COMPONENT, host=self.node_name)

    # -- the host leaves ------------------------------------------------------------------------

    def teardown(self) -> None:
        """Remove kctl's table, routes and network from the host (best effort: failures are logged)."""
        steps = [("nft table", lambda: self.runtime.run_on_host(["nft", "-f", "-"], timeout=COMMAND_TIMEOUT,
                                                                  stdin=delete_table_script(self.table).encode())),
                 ("routes", self._remove_routes),
                 ("network", self._remove_network)]
        for what, step in steps:
            try:
                step()
            except Exception as error:  # best effort: a host that cannot be reached keeps them
                log.warning("node %s removed: cannot remove its pod network's %s: %s", self.node_name, what,
                            error)
                if isinstance(error, RuntimeError_) and what != "network":
                    return  # the host cannot be reached: the other steps would wait for it as long
        self._joined = NOT_READY
        log.info("node %s removed: its pod network is gone from the host", self.node_name)

    def _remove_network(self) -> None:
        """Remove the Podman network, waiting a little for pods still being removed to leave it."""
        for attempt in range(NETWORK_REMOVE_ATTEMPTS):
            try:
                self.runtime.remove_network(self.network)
                return
            except RuntimeError_:
                if attempt == NETWORK_REMOVE_ATTEMPTS - 1:
                    raise
                time.sleep(1.0)

    def _remove_routes(self) -> None:
        listed = self._run_ok(["ip", "-j", "route", "show", "proto", str(ROUTE_PROTO)], what="routes")
        for argv in route_commands(current_routes(listed), {}):
            self.runtime.run_on_host(argv, timeout=COMMAND_TIMEOUT)


__all__ = ["COMPONENT", "PodNetwork", "PodNetworkError"]
