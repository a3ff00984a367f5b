"""kube-proxy's sync loop for one host: render the host's rules and load them with one `nft -f -`.

The node agent (kctl.agent.agent.NodeAgent) starts one `Proxier` per host it drives, beside
its pod workers, and stops it with the agent. A Proxier:

- reads Services, EndpointSlices, Nodes and the kube-system ConfigMaps (the cluster CIDR:
  kctl.client.clusterconfig) from `ProxySources`. **One set of informers per API object,
  shared by every Proxier of a process** (`ProxySources.acquire(api)`, reference counted):
  one daemon drives many hosts, and every host needs the same cluster-wide Services and
  slices; per-host informers would hold N copies of them and cost N watches. In node mode
  the process drives one host, so it is one set either way. Each Proxier only listens:
  any Service or EndpointSlice change, a change of *its own* Node's addresses, or of the
  `kube-system/kube-proxy` ConfigMap marks it dirty;
- coalesces bursts as kube-proxy's `--min-sync-period` does: at most one sync per
  `min_sync_period` (0.2 s by default, so a pod turning Ready is in the rules well within
  the 1 s the issue asks for), however many changes arrive;
- renders the script (kctl.agent.proxy.nftables.render) and loads it with one
  `nft -f -` (stdin) through `runtime.run_on_host`, only when the rules differ from what it
  last loaded. The script replaces the table `ip kctl` in place (given what the table holds,
  so ClientIP affinity survives syncs) and touches no other table. What the table holds is
  read with `nft list table ip kctl` when unknown (at start, on every resync, after a
  failure); after a successful load it is known from the script itself, so a sync in
  steady state costs one command on the host;
- re-loads on a resync timer (`resync_period`, 30 s) even when nothing changed, which also
  restores the rules of a host that rebooted behind kctl's back;
- on a failure (host unreachable, `nft` missing or refusing the script) logs one line and
  records one Warning Event `FailedProxyRules` on the Node per streak of failures (not one
  per attempt), then retries with exponential back-off (1 s .. 30 s); the first success
  afterwards loads the rules even when unchanged (the host may have rebooted) and logs one
  line. While the agent's heartbeat says the host is unreachable (`paused`), it does not try
  at all, and loads again as soon as the host answers;
- on a rootless host (`id -u` is not 0: nft cannot change the host's netfilter) it loads
  nothing, records one Warning Event `ProxyRulesSkipped` on the Node and logs one line.

`remove_rules(runtime)` deletes the table (a host kctl removes). Nothing here raises into
the agent: every error ends as a log line (and an Event).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Callable

from kctl.agent.proxy.nftables import TABLE, render
from kctl.client import events
from kctl.client.clusterconfig import KUBE_PROXY_CONFIGMAP, KUBELET_CONFIGMAP, NAMESPACE, cluster_network_from
from kctl.client.informer import Informer
from kctl.agent.removal import node_removed

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.runtime.interface import Runtime

log = logging.getLogger("kctl.agent.proxy")

COMPONENT = "kube-proxy"
FAILED_REASON = "FailedProxyRules"
SKIPPED_REASON = "ProxyRulesSkipped"
#: kube-proxy's label that hands a Service to another proxy (such Services get no rules here)
SERVICE_PROXY_NAME_LABEL = "service.kubernetes.io/service-proxy-name"
#: how long one `nft` command on the host may take (1,000 Services load in ~0.6 s)
NFT_TIMEOUT_SECONDS = 60.0
#: how often a paused (unreachable) host is looked at again
PAUSE_POLL_SECONDS = 1.0

_DEFINED = re.compile(r"^add (chain|set|map) " + re.escape(TABLE) + r" (\S+)")


# -- the informers every proxier of a process shares --------------------------------------------

Listener = Callable[[str, "dict | None", dict], None]


class ProxySources:
    """Informers on Services, EndpointSlices, Nodes and kube-system ConfigMaps, for many proxiers.

    `acquire(api)` returns the process's one instance for `api` (started on first use),
    `release()` gives it back (stopped when the last user leaves). Listeners get
    `(kind, old, new)` for every change (old None for an add, new the deleted object for a delete).
    """

    _lock = threading.Lock()
    _shared: dict[int, "ProxySources"] = {}

    def __init__(self, api: API) -> None:
        self.api = api
        self.services = Informer(api, "services")
        self.slices = Informer(api, "endpointslices.discovery.k8s.io")
        self.nodes = Informer(api, "nodes")
        self.configmaps = Informer(api, "configmaps", field_selector=f"metadata.namespace={NAMESPACE}")
        self._listeners: list[Listener] = []
        self._listeners_lock = threading.Lock()
        self._stop = threading.Event()
        self._users = 0
        for kind, informer in (("Service", self.services), ("EndpointSlice", self.slices), ("Node", self.nodes),
                               ("ConfigMap", self.configmaps)):
            informer.add_handler(lambda obj, k=kind: self._emit(k, None, obj),
                                 lambda old, new, k=kind: self._emit(k, old, new),
                                 lambda obj, k=kind: self._emit(k, obj, obj))

    @classmethod
    def acquire(cls, api: API) -> "ProxySources":
        """The shared sources of `api`, started; pair every call with one `release()`."""
        with cls._lock:
            sources = cls._shared.get(id(api))
            if sources is None or sources.api is not api:
                sources = cls._shared[id(api)] = cls(api)
                sources.start()
            sources._users += 1
            return sources

    def release(self) -> None:
        """One user fewer; the last one stops the informers."""
        with ProxySources._lock:
            self._users -= 1
            if self._users > 0:
                return
            if ProxySources._shared.get(id(self.api)) is self:
                del ProxySources._shared[id(self.api)]
        self.stop()

    def informers(self) -> list[Informer]:
        return [self.services, self.slices, self.nodes, self.configmaps]

    def start(self) -> None:
        for informer in self.informers():
            informer.start(self._stop)

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in self.informers():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.wait_for_sync(left):
                return False
        return True

    def listen(self, fn: Listener) -> None:
        with self._listeners_lock:
            self._listeners.append(fn)

    def unlisten(self, fn: Listener) -> None:
        with self._listeners_lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def _emit(self, kind: str, old: dict | None, new: dict) -> None:
        with self._listeners_lock:
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(kind, old, new)
            except Exception:  # noqa: BLE001 - one proxier's bug must not starve the others
                log.exception("proxy listener failed on a %s change", kind)

    def cluster_cidr(self) -> str:
        return cluster_network_from(self.configmaps.get(NAMESPACE, KUBE_PROXY_CONFIGMAP),
                                    self.configmaps.get(NAMESPACE, KUBELET_CONFIGMAP)).cluster_cidr


def node_addresses(node: dict | None) -> list[str]:
    """The IPv4 InternalIP and ExternalIP addresses of a Node (where NodePorts answer)."""
    found = []
    for address in ((node or {}).get("status") or {}).get("addresses") or ():
        if not isinstance(address, dict) or address.get("type") not in ("InternalIP", "ExternalIP"):
            continue
        try:
            ip = ipaddress.ip_address(str(address.get("address")))
        except ValueError:
            continue
        if ip.version == 4:
            found.append(str(ip))
    return sorted(set(found))


def _proxied(service: dict) -> bool:
    return not ((service.get("metadata") or {}).get("labels") or {}).get(SERVICE_PROXY_NAME_LABEL)


def _listing_of(script: str) -> str:
    """What `nft list table` would print (chain/set/map lines) after `script` was loaded."""
    names = sorted({(m.group(1), m.group(2)) for m in map(_DEFINED.match, script.splitlines()) if m})
    return "".join(f"\t{kind} {name} {{\n" for kind, name in names)


def _body(script: str) -> str:
    """The script without its preamble (what differs only with the table's current contents)."""
    return script.split("\n\n", 1)[-1]


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(lines[:2])[:300] if lines else ""


# -- one host's proxier ------------------------------------------------------------------------

class Proxier:
    """Keeps the table `ip kctl` on one host equal to the rules the cluster wants (module doc)."""

    def __init__(self, api: API, node_name: str, runtime: Runtime, *, sources: ProxySources | None = None,
                 min_sync_period: float = 0.2, resync_period: float = 30.0, retry_base: float = 1.0,
                 retry_cap: float = 30.0, paused: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.node_name = node_name
        self.runtime = runtime
        self.min_sync_period = min_sync_period
        self.resync_period = resync_period
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self.paused = paused or (lambda: False)
        self.clock = clock
        self._given_sources = sources
        self.sources: ProxySources | None = sources
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._dirty = True
        self._last_attempt = float("-inf")
        self._next_resync = float("inf")
        self._retry_at: float | None = None
        self._failures = 0
        self._force = True            # load even when unchanged (first sync, resync, after a failure or pause)
        self._applied: str | None = None  # the body of the script last loaded
        self._listing: str | None = None  # what the table holds, when known
        self._root: bool | None = None    # whether nft can run: None = not asked yet
        self._skipped = False
        #: scripts loaded (for tests and metrics)
        self.applies = 0

    # -- running ----------------------------------------------------------------------------

    def start(self) -> None:
        """Listen to the sources and sync in a background thread; returns at once."""
        if self._thread is not None:
            return
        if not callable(getattr(self.runtime, "run_on_host", None)):  # a runtime that cannot run host commands
            log.debug("node %s: the runtime cannot run commands on its host: no kube-proxy rules", self.node_name)
            return
        if self._stop.is_set():  # started again after a stop
            self._stop = threading.Event()
            with self._lock:
                self._force, self._dirty, self._retry_at = True, True, None
        if self.sources is None:
            self.sources = ProxySources.acquire(self.api)
        self.sources.listen(self._on_change)
        self._thread = threading.Thread(target=self._run, name=f"proxy-{self.node_name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop syncing. The rules stay on the host, as kube-proxy leaves them, unless this Node is gone from the
        store (kctl removed the host): then its table goes too (best effort, as the pod network's teardown)."""
        self._stop.set()
        self._wake.set()
        if self.sources is not None:
            self.sources.unlisten(self._on_change)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self.sources is not None and self._given_sources is None:
            self.sources.release()
            self.sources = None
        if callable(getattr(self.runtime, "run_on_host", None)) and node_removed(self.api, self.node_name):
            remove_rules(self.runtime)

    def _on_change(self, kind: str, old: dict | None, new: dict) -> None:
        if kind == "Node":
            if (new.get("metadata") or {}).get("name") != self.node_name:
                return
            if old is not None and old is not new and node_addresses(old) == node_addresses(new):
                return
        elif kind == "ConfigMap":
            if (new.get("metadata") or {}).get("name") != KUBE_PROXY_CONFIGMAP:
                return
        with self._lock:
            self._dirty = True
        self._wake.set()

    def _run(self) -> None:
        sources = self.sources
        assert sources is not None
        while not sources.wait_for_sync(0.5):
            if self._stop.is_set():
                return
        was_paused = False
        while not self._stop.is_set():
            self._wake.clear()
            if self._paused():
                was_paused = True
                self._stop.wait(PAUSE_POLL_SECONDS)
                continue
            if was_paused:
                was_paused = False
                with self._lock:
                    self._force, self._retry_at = True, None
            now = self.clock()
            due = self.due(now)
            if due > now:
                self._wake.wait(min(due - now, PAUSE_POLL_SECONDS))
                continue
            try:
                self.sync()
            except Exception as exc:  # noqa: BLE001 - a bug here must not end kube-proxy
                log.error("node %s: proxy sync failed: %s: %s", self.node_name, type(exc).__name__, exc,
                          exc_info=log.isEnabledFor(logging.DEBUG))
                self._failed(str(exc), event=False)

    def _paused(self) -> bool:
        try:
            return bool(self.paused())
        except Exception:  # noqa: BLE001
            return False

    def due(self, now: float) -> float:
        """When the next sync is due (monotonic seconds)."""
        with self._lock:
            if self._retry_at is not None:
                return self._retry_at
            if self._dirty or self._force:
                return max(now, self._last_attempt + self.min_sync_period)
            return self._next_resync

    # -- one sync ---------------------------------------------------------------------------

    def sync(self) -> bool:
        """Render and, if it changed (or a load is forced), load this host's rules; True on success."""
        sources = self.sources
        assert sources is not None
        now = self.clock()
        with self._lock:
            self._dirty = False
            self._last_attempt = now
            if now >= self._next_resync:
                self._force = True
            force = self._force
        if self._root is None and not self._check_root():
            return False
        if self._root is False:
            with self._lock:
                self._next_resync, self._force, self._retry_at = float("inf"), False, None
            return True
        services = [s for s in sources.services.list() if _proxied(s)]
        slices = sources.slices.list()
        addresses = node_addresses(sources.nodes.get("", self.node_name))
        cidr = sources.cluster_cidr()
        listing = None if force else self._listing
        try:  # the body does not depend on `current`: render once in steady state
            script = render(services, slices, node=self.node_name, node_addresses=addresses, cluster_cidr=cidr,
                            current=listing or "")
        except ValueError as exc:
            self._failed(f"cannot render the rules: {exc}")
            return False
        body = _body(script)
        if not force and body == self._applied:
            return True
        fresh = listing is None
        for attempt in range(2):
            if fresh:
                listing = self._list_table()
                if listing is None:
                    return False
                script = render(services, slices, node=self.node_name, node_addresses=addresses,
                                cluster_cidr=cidr, current=listing)
            error = self._load(script)
            if error is None:
                break
            if fresh or attempt:
                self._failed(error)
                return False
            # the table is not what the last load left (deleted or changed by hand): read it, try once more
            log.debug("node %s: loading on the remembered table failed (%s); reading it", self.node_name, error)
            fresh = True
        self.applies += 1
        self._applied, self._listing = body, _listing_of(script)
        with self._lock:
            self._force, self._retry_at = False, None
            self._next_resync = self.clock() + self.resync_period
        if self._failures:
            log.info("node %s: proxy rules loaded again after %d failed attempt(s)", self.node_name, self._failures)
        self._failures = 0
        log.debug("node %s: proxy rules loaded (%d bytes)", self.node_name, len(script))
        return True

    def _check_root(self) -> bool:
        """Ask the host who runs commands there; a non-root user gets no rules (one Event). False: failed."""
        try:
            result = self.runtime.run_on_host(["id", "-u"], timeout=NFT_TIMEOUT_SECONDS)
        except Exception as exc:  # noqa: BLE001 - RuntimeError_: unreachable
            self._failed(str(exc))
            return False
        uid = result.stdout.decode(errors="replace").strip()
        self._root = not (result.exit_code == 0 and uid.isdigit() and uid != "0")
        if not self._root and not self._skipped:
            self._skipped = True
            message = (f"kube-proxy rules not loaded: commands on this host run as uid {uid}, not root "
                       f"(rootless): Services are not reachable through ClusterIPs or NodePorts here")
            log.warning("node %s: %s", self.node_name, message)
            self._event("Warning", SKIPPED_REASON, message)
        return True

    def _list_table(self) -> str | None:
        """What `nft list table ip kctl` prints ("" when there is no such table); None: failed."""
        try:
            result = self.runtime.run_on_host(["nft", "list", "table", *TABLE.split()], timeout=NFT_TIMEOUT_SECONDS)
        except Exception as exc:  # noqa: BLE001 - RuntimeError_: unreachable
            self._failed(str(exc))
            return None
        if result.exit_code == 0:
            return result.stdout.decode(errors="replace")
        stderr = result.stderr.decode(errors="replace")
        if "No such file or directory" in stderr:
            return ""
        self._failed(f"nft list table {TABLE} exited {result.exit_code}: {_one_line(stderr) or 'no message'}")
        return None

    def _load(self, script: str) -> str | None:
        """Run `nft -f -` with the script on the host; None on success, else what went wrong (one line)."""
        try:
            result = self.runtime.run_on_host(["nft", "-f", "-"], stdin=script.encode(), timeout=NFT_TIMEOUT_SECONDS)
        except Exception as exc:  # noqa: BLE001 - RuntimeError_: unreachable
            return str(exc)
        if result.exit_code != 0:
            detail = _one_line(result.stderr.decode(errors="replace")) or "no message"
            return f"nft -f exited {result.exit_code}: {detail}"
        return None

    def _failed(self, message: str, *, event: bool = True) -> None:
        """One log line and one Event per streak of failures; retry with back-off, then force a load."""
        self._failures += 1
        delay = min(self.retry_cap, self.retry_base * 2 ** min(self._failures - 1, 16))
        with self._lock:
            self._retry_at = self.clock() + delay
            self._force = True
        self._listing = None
        if self._failures == 1:
            log.warning("node %s: cannot load kube-proxy rules: %s (retrying with back-off)", self.node_name, message)
            if event:
                self._event("Warning", FAILED_REASON, f"cannot load kube-proxy rules: {message}")
        else:
            log.debug("node %s: proxy rules still failing (attempt %d): %s", self.node_name, self._failures, message)

    def _event(self, type_: str, reason: str, message: str) -> None:
        sources = self.sources
        node = sources.nodes.get("", self.node_name) if sources is not None else None
        involved = node or {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.node_name}}
        events.record(self.api, involved, type=type_, reason=reason, message=message, component=COMPONENT,
                      host=self.node_name)


def remove_rules(runtime: Runtime) -> bool:
    """Delete the table `ip kctl` from the runtime's host (a host kctl removes); True when it is gone."""
    try:
        result = runtime.run_on_host(["nft", "delete", "table", *TABLE.split()], timeout=NFT_TIMEOUT_SECONDS)
    except Exception as exc:  # noqa: BLE001 - best effort
        log.warning("cannot remove table %s: %s", TABLE, exc)
        return False
    return result.exit_code == 0 or b"No such file or directory" in result.stderr


__all__ = ["FAILED_REASON", "SKIPPED_REASON", "Proxier", "ProxySources", "node_addresses", "remove_rules"]
