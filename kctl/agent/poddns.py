"""A pod's resolv.conf, as the kubelet forms it (pkg/kubelet/network/dns) from its dnsPolicy and dnsConfig.

kctl.agent.sandbox calls `pod_dns` before it makes a Pod's Podman pod and passes the result to
kctl.agent.containers.sandbox_spec (`dns=`), which puts it into the PodSandboxSpec's dns fields
(Podman writes the pod's /etc/resolv.conf from them). The rules:

- `ClusterFirst` (the default): nameserver = the cluster DNS address(es); search =
  `<ns>.svc.<domain> svc.<domain> <domain>` followed by the host's search domains; options =
  `ndots:5` (the host's options are not kept). A hostNetwork pod with ClusterFirst gets
  `Default` instead; `ClusterFirstWithHostNet` is ClusterFirst for every pod.
- `Default`: the host's resolv.conf (Podman's own, when there is no dnsConfig to merge).
- `None`: nothing but `spec.dnsConfig`.
- `spec.dnsConfig` is then merged in: its nameservers and searches appended (duplicates
  dropped), its options overriding options of the same name.
- Limits: at most 3 nameservers, 32 search domains, none longer than 253 characters, a
  search line of at most 2048 characters; what is cut is named in a Warning Event
  (DNSConfigForming), with the kubelet's wording.

The host's resolv.conf is read through the runtime (`HostResolvConf`, cached a few minutes
per runtime): locally, or over SSH for agentless hosts. When it cannot be read, ClusterFirst
lacks the host's search domains and Default + dnsConfig lets Podman fill each field it does not
get from the host.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable

from kctl.client.clusterconfig import ClusterNetwork

log = logging.getLogger("kctl.agent.poddns")

MAX_NAMESERVERS = 3            # validation.MaxDNSNameservers
MAX_SEARCH_PATHS = 32          # validation.MaxDNSSearchPathsExpanded
MAX_SEARCH_LINE_CHARS = 2048   # validation.MaxDNSSearchListCharsExpanded
MAX_SEARCH_NAME = 253          # utilvalidation.DNS1123SubdomainMaxLength
DEFAULT_OPTIONS = ("ndots:5",)
RESOLV_CONF = "/etc/resolv.conf"
#: seconds a host's resolv.conf is kept before it is read again (after a failed read: a fifth of it)
HOST_CACHE_SECONDS = 300.0


@dataclass(frozen=True)
class ResolvConf:
    """The three lines of a resolv.conf that matter: nameservers, search domains, options."""

    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodDNS:
    """What the pod's resolv.conf gets; all empty: Podman's own (the host's). warnings: Event messages."""

    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.servers or self.searches or self.options)


def parse_resolv_conf(text: str) -> ResolvConf:
    """The nameservers, search domains (the last search line wins, as the resolver) and options of a resolv.conf."""
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0]
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "nameserver" and len(fields) > 1:
            servers.append(fields[1])
        elif fields[0] == "search":
            searches = [s.rstrip(".") for s in fields[1:] if s != "."]
        elif fields[0] == "options":
            options = _merge_options(options, [_option_pair(o) for o in fields[1:]])
    return ResolvConf(tuple(servers), tuple(searches), tuple(options))


def dns_type(pod: dict) -> str:
    """The kubelet's podDNSType of a pod: "cluster", "host" or "none" (an unknown policy: "cluster")."""
    spec = pod.get("spec") or {}
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    if policy == "None":
        return "none"
    if policy == "ClusterFirstWithHostNet":
        return "cluster"
    if policy == "Default" or (policy == "ClusterFirst" and spec.get("hostNetwork") is True):
        return "host"
    return "cluster"


def pod_dns(pod: dict, network: ClusterNetwork, *, host: ResolvConf | None = None) -> PodDNS:
    """The pod's resolv.conf per its dnsPolicy and dnsConfig (module doc); host: the host's, None if unknown."""
    kind = dns_type(pod)
    base = host or ResolvConf()
    if kind == "cluster" and not network.cluster_dns:
        kind = "host"  # no cluster DNS configured: the kubelet falls back to Default
    if kind == "none":
        servers, searches, options = [], [], []
    elif kind == "cluster":
        namespace = (pod.get("metadata") or {}).get("namespace") or "default"
        cluster = ([f"{namespace}.svc.{network.cluster_domain}", f"svc.{network.cluster_domain}",
                    network.cluster_domain] if network.cluster_domain else [])
        servers = list(network.cluster_dns)
        searches = _unique(cluster + list(base.searches))
        options = list(DEFAULT_OPTIONS)
    else:
        config = (pod.get("spec") or {}).get("dnsConfig")
        if not isinstance(config, dict) or not config:
            return PodDNS()  # the host's, as Podman writes it
        servers, searches, options = list(base.nameservers), list(base.searches), list(base.options)
    config = (pod.get("spec") or {}).get("dnsConfig")
    if isinstance(config, dict):
        servers = _unique(servers + [str(s) for s in config.get("nameservers") or [] if s])
        searches = _unique(searches + [str(s) for s in config.get("searches") or [] if s])
        options = _merge_options(options, [(str(o.get("name")), _opt_value(o)) for o in config.get("options") or []
                                           if isinstance(o, dict) and o.get("name")])
    warnings: list[str] = []
    if len(servers) > MAX_NAMESERVERS:
        servers = servers[:MAX_NAMESERVERS]
        warnings.append("Nameserver limits were exceeded, some nameservers have been omitted, the applied "
                        f"nameserver line is: {' '.join(servers)}")
    searches, cut = _fit_searches(searches)
    if cut:
        warnings.append("Search Line limits were exceeded, some search paths have been omitted, the applied "
                        f"search line is: {' '.join(searches)}")
    return PodDNS(tuple(servers), tuple(searches), tuple(options), tuple(warnings))


def _fit_searches(searches: list[str]) -> tuple[list[str], bool]:
    """formDNSSearchFitsLimits: at most 32 names, none over 253 characters, a line of at most 2048."""
    cut = False
    if len(searches) > MAX_SEARCH_PATHS:
        searches, cut = searches[:MAX_SEARCH_PATHS], True
    kept = [s for s in searches if len(s) <= MAX_SEARCH_NAME]
    cut = cut or len(kept) != len(searches)
    length = len(" ".join(kept))
    while kept and length > MAX_SEARCH_LINE_CHARS:
        length -= len(kept.pop()) + 1
        cut = True
    return kept, cut


def _opt_value(option: dict) -> str | None:
    value = option.get("value")
    return None if value is None else str(value)


def _option_pair(text: str) -> tuple[str, str | None]:
    name, sep, value = text.partition(":")
    return (name, value) if sep else (name, None)


def _merge_options(existing: list[str], more: list[tuple[str, str | None]]) -> list[str]:
    """mergeDNSOptions: one option per name, a later value replacing an earlier one (first place kept)."""
    merged: dict[str, str | None] = dict(_option_pair(o) for o in existing)
    for name, value in more:
        merged[name] = value
    return [name if not value else f"{name}:{value}" for name, value in merged.items()]


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


class HostResolvConf:
    """The host's resolv.conf per runtime, read with `runtime.run_on_host(["cat", ...])` and cached."""

    def __init__(self, *, ttl: float = HOST_CACHE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        # runtime -> (valid until, its host's resolv.conf); weak, so a removed node's runtime is not kept
        self._cache: weakref.WeakKeyDictionary[object, tuple[float, ResolvConf | None]] = weakref.WeakKeyDictionary()

    def get(self, runtime: object) -> ResolvConf | None:
        """The resolv.conf of the runtime's host; None when it cannot be read."""
        now = self.clock()
        with self._lock:
            found = self._lookup(runtime)
            if found is not None and now < found[0]:
                return found[1]
        conf = self._read(runtime)
        with self._lock:
            with contextlib.suppress(TypeError):  # a runtime that cannot be weakly referenced is not cached
                self._cache[runtime] = (now + (self.ttl if conf is not None else self.ttl / 5), conf)
        return conf

    def _lookup(self, runtime: object) -> tuple[float, ResolvConf | None] | None:
        try:
            return self._cache.get(runtime)
        except TypeError:
            return None

    @staticmethod
    def _read(runtime: object) -> ResolvConf | None:
        run = getattr(runtime, "run_on_host", None)
        if run is None:
            return None
        try:
            result = run(["cat", RESOLV_CONF], timeout=10.0)
        except Exception as exc:  # unreachable host, a runtime without host access: go without
            log.debug("cannot read the host's %s: %s", RESOLV_CONF, exc)
            return None
        if getattr(result, "exit_code", 1) != 0:
            return None
        output = getattr(result, "stdout", b"") or b""
        return parse_resolv_conf(output.decode("utf-8", "replace") if isinstance(output, bytes) else str(output))


#: the agents' shared cache (one entry per runtime, so per node)
HOST_RESOLV_CONF = HostResolvConf()

__all__ = ["HOST_RESOLV_CONF", "HostResolvConf", "PodDNS", "ResolvConf", "dns_type", "parse_resolv_conf", "pod_dns"]
