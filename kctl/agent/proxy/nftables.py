"""kube-proxy's rules as one nftables script: `render(...)` -> the text `nft -f` loads.

Pure (no I/O): the node agent calls `render(services, slices, node=..., node_addresses=...,
cluster_cidr=...)` with what its informers hold and loads the result with `nft -f -` on
its host, locally or over SSH. The design follows Kubernetes' nftables proxier
(pkg/proxy/nftables, its README), cut down to one address family (IPv4):

- The script owns exactly one table, `ip kctl`: it creates it (so the delete cannot
  fail), deletes it and defines it again, all in one `nft -f` transaction, so the
  kernel swaps the old rules for the new ones atomically and no other table (Podman's,
  a firewall's) is touched. Established connections keep their NAT (conntrack).
- `nat` base chains at `dstnat` on prerouting (traffic from pods and other hosts) and
  output (this host's processes) jump to `services`, which looks up
  `ip daddr . l4proto . dport` in the verdict map `service-ips` (ClusterIPs,
  spec.externalIPs, status.loadBalancer.ingress IPs) and `l4proto . dport` in
  `service-nodeports` for packets to this node's addresses (NodePorts, and for
  `type: LoadBalancer` the Service's own port on every host, as k3s's ServiceLB does).
- A Service port's chain DNATs to an endpoint picked at random (`numgen random mod N`
  into a map of address . port; one endpoint: a plain `dnat to`). New connections go
  to ready endpoints; a terminating endpoint gets new ones only when no endpoint is
  ready (kube-proxy's fallback for graceful termination). `sessionAffinity: ClientIP`
  instead sends the pick through a vmap of per-endpoint chains, each with a dynamic
  set of client addresses and the affinity timeout: the endpoint chain records the
  client, the Service chain sends a known client back to its endpoint.
- `externalTrafficPolicy: Local`: node-port/external traffic from outside goes only to
  this node's endpoints, unmasqueraded (the pod sees the client's IP), and is dropped
  when this node has none; traffic from pods and from this host is short-circuited to
  all endpoints. `internalTrafficPolicy: Local`: ClusterIP traffic goes only to this
  node's endpoints, dropped when there are none here.
- A Service port with no endpoint at all is in `no-endpoint-services` /
  `no-endpoint-nodeports`; filter chains on input, forward and output send new
  connections to it to `reject-chain` (TCP reset, else ICMP port unreachable), so a
  client is refused at once instead of hanging. Packets to a ClusterIP on a port it
  does not serve are rejected too.
- Masquerade (a mark, then `masquerade` in `nat-postrouting`) only where replies
  must come back through this host: ClusterIP traffic from outside `cluster_cidr`,
  node-port and external traffic (unless externalTrafficPolicy Local), and hairpin
  traffic: a pod reaching its own Service may land on itself, so a backend's
  connections to its own Service are masqueraded (with affinity, per endpoint chain,
  only when it does land on itself, as kube-proxy does). Masquerading pod
  traffic that leaves the cluster is the pod network's job, not this table's.

Given `current` (what `nft list table ip kctl` prints now), the script replaces the
table in place instead: it flushes every chain's rules and every map, deletes the
chains and sets no longer wanted, and defines the rest again, still in one
transaction; the ClientIP affinity sets that are still wanted keep their clients.
Without it, affinity sets start empty after each sync (an open connection keeps its
endpoint; a new one from the same client may pick another).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
from typing import Iterable

from kctl.agent.proxy.model import Endpoint, ServicePort, service_ports, usable

#: the one table the script owns (family, name)
TABLE = "ip kctl"
#: the packet-mark bit that asks nat-postrouting to masquerade (kube-proxy's default)
MASQUERADE_MARK = 0x4000
_TABLE_COMMENT = "kctl: Service rules (kube-proxy); replaced as a whole by kctl, do not edit"


def _hash(text: str) -> str:
    """kube-proxy's chain-name prefix: 8 base32 characters of the SHA-256 of the name."""
    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:8]


def _endpoint_ident(sp: ServicePort, ep: Endpoint) -> str:
    return f"{sp.ident}__{ep.ip}/{ep.port}"


class _Script:
    """The lines of one script, with the table name filled in and element conflicts noted."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.lines: list[str] = []
        self._elements: dict[str, list[str]] = {}
        self._keys: dict[tuple[str, str], str] = {}
        #: (kind, name) of every chain, set and map the script defines
        self.names: set[tuple[str, str]] = set()

    def add(self, line: str) -> None:
        self.lines.append(line.replace("@T", self.table))

    def comment(self, text: str) -> None:
        self.lines.append(f"# {text}")

    def blank(self) -> None:
        self.lines.append("")

    def chain(self, name: str, spec: str = "") -> str:
        self.add(f"add chain @T {name}" + (f" {{ {spec} ; }}" if spec else ""))
        self.names.add(("chain", name))
        return name

    def container(self, kind: str, name: str, spec: str) -> str:
        """Define a set or map (kind "set" / "map")."""
        self.add(f"add {kind} @T {name} {{ {spec} ; }}")
        self.names.add((kind, name))
        return name

    def rule(self, chain: str, text: str) -> None:
        self.add(f"add rule @T {chain} {text}")

    def element(self, container: str, key: str, value: str, *, owner: str) -> bool:
        """One map element, unless an earlier Service port holds the key (then a comment says so)."""
        held = self._keys.get((container, key))
        entries = self._elements.setdefault(container, [])
        if held is not None:
            entries.append(f"\t# {owner}: {key} is already {held}'s; skipped")
            return False
        self._keys[(container, key)] = owner
        entries.append(f"\t{key} : {value},")
        return True

    def text(self, preamble: list[str]) -> str:
        """The script: the preamble, the definitions, then each map's elements in one command."""
        lines = [line.replace("@T", self.table) for line in preamble] + self.lines
        for container, entries in self._elements.items():
            lines += ["", f"add element {self.table} {container} {{", *entries, "}"]
        return "\n".join(lines) + "\n"


def _check_ipv4(value: str, what: str) -> str:
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{what} {value!r} is not an IP address") from None
    if address.version != 4:
        raise ValueError(f"{what} {value!r} is not IPv4 (kctl's proxy is IPv4 only)")
    return str(address)


def render(services: Iterable[dict], slices: Iterable[dict], *, node: str, node_addresses: Iterable[str],
           cluster_cidr: str, current: str | None = None, table: str = TABLE,
           masquerade_mark: int = MASQUERADE_MARK) -> str:
    """The nft script that makes `table` hold this node's Service rules (see the module doc).

    `services` and `slices` are Service and EndpointSlice objects (all namespaces);
    `node` is this Node's name (for Local traffic policies), `node_addresses` its IPv4
    addresses (where NodePorts and ServiceLB ports answer), `cluster_cidr` the pod
    network (e.g. 10.244.0.0/16). ValueError names a bad address or CIDR.

    `current`, when given, is what `nft list table ip kctl` prints now ("" when there is
    no such table): the script then flushes the table's rules and maps and deletes only
    the chains and sets no longer wanted, instead of deleting the table, so the
    ClientIP affinity sets keep their clients across syncs. Without it the table is
    deleted and made again.
    """
    try:
        cidr = str(ipaddress.ip_network(cluster_cidr, strict=False))
    except ValueError:
        raise ValueError(f"cluster CIDR {cluster_cidr!r} is not a network (e.g. 10.244.0.0/16)") from None
    if ipaddress.ip_network(cidr).version != 4:
        raise ValueError(f"cluster CIDR {cluster_cidr!r} is not IPv4 (kctl's proxy is IPv4 only)")
    addresses = sorted(set(_check_ipv4(a, "node address") for a in node_addresses),
                       key=lambda a: int(ipaddress.ip_address(a)))
    ports = service_ports(services, slices)
    out = _Script(table)
    mark = f"0x{masquerade_mark:x}"
    _base(out, addresses=addresses, ports=ports, mark=mark)
    for sp in ports:
        _service_port(out, sp, node=node, cidr=cidr)
    header = [f"# kctl kube-proxy rules for node {node}: load with `nft -f`; replaces table {out.table} only",
              f'add table @T {{ comment "{_TABLE_COMMENT}" ; }}']
    if current is None:
        return out.text(header + ["delete table @T", f'add table @T {{ comment "{_TABLE_COMMENT}" ; }}'])
    return out.text(header + _replace_in_place(table_objects(current), out.names))


def table_objects(listing: str) -> set[tuple[str, str]]:
    """The (kind, name) of the chains, sets and maps in an `nft list table` listing."""
    found = set()
    for line in listing.splitlines():
        match = _LISTED.match(line)
        if match:
            found.add((match.group(1), match.group(2)))
    return found


_LISTED = re.compile(r"^\s*(chain|set|map) (\S+) \{\s*$")


def _replace_in_place(existing: set[tuple[str, str]], wanted: set[tuple[str, str]]) -> list[str]:
    """Empty the table but for the affinity sets still wanted; drop what is no longer wanted."""
    lines = ["flush table @T"]  # every chain's rules (sets and maps keep their elements)
    for kind, name in sorted(existing & wanted):
        if kind != "chain" and not name.startswith("affinity-"):
            lines.append(f"flush {kind} @T {name}")
    for kind, name in sorted(existing - wanted):
        lines.append(f"delete {kind} @T {name}")  # chains after the flush: nothing refers to them now
    return lines


def _base(out: _Script, *, addresses: list[str], ports: list[ServicePort], mark: str) -> None:
    out.blank()
    out.container("map", "service-ips", "type ipv4_addr . inet_proto . inet_service : verdict")
    out.container("map", "service-nodeports", "type inet_proto . inet_service : verdict")
    out.container("map", "no-endpoint-services", "type ipv4_addr . inet_proto . inet_service : verdict")
    out.container("map", "no-endpoint-nodeports", "type inet_proto . inet_service : verdict")
    out.container("set", "node-addresses", "type ipv4_addr")
    if addresses:
        out.add(f"add element @T node-addresses {{ {', '.join(addresses)} }}")
    out.container("set", "cluster-ips", "type ipv4_addr")
    cluster_ips = sorted({ip for sp in ports for ip in sp.cluster_ips}, key=lambda a: int(ipaddress.ip_address(a)))
    if cluster_ips:
        out.add(f"add element @T cluster-ips {{ {', '.join(cluster_ips)} }}")
    out.blank()
    out.chain("mark-for-masquerade")
    out.rule("mark-for-masquerade", f"meta mark set meta mark or {mark}")
    out.chain("masquerading")
    out.rule("masquerading", f"meta mark & {mark} == 0 return")
    out.rule("masquerading", f"meta mark set meta mark xor {mark}")
    out.rule("masquerading", "masquerade fully-random")
    out.chain("reject-chain")
    out.rule("reject-chain", "meta l4proto tcp reject with tcp reset")
    out.rule("reject-chain", "reject with icmp type port-unreachable")
    out.blank()
    out.chain("services")
    out.rule("services", "ip daddr . meta l4proto . th dport vmap @service-ips")
    out.rule("services", "ip daddr @node-addresses meta l4proto . th dport vmap @service-nodeports")
    out.chain("endpoints-check")
    out.rule("endpoints-check", "ip daddr . meta l4proto . th dport vmap @no-endpoint-services")
    out.chain("nodeport-endpoints-check")
    out.rule("nodeport-endpoints-check", "ip daddr @node-addresses meta l4proto . th dport vmap @no-endpoint-nodeports")
    out.chain("cluster-ips-check")
    out.rule("cluster-ips-check", "ip daddr @cluster-ips goto reject-chain")
    out.blank()
    out.chain("nat-prerouting", "type nat hook prerouting priority -100")
    out.rule("nat-prerouting", "jump services")
    out.chain("nat-output", "type nat hook output priority -100")
    out.rule("nat-output", "jump services")
    out.chain("nat-postrouting", "type nat hook postrouting priority 100")
    out.rule("nat-postrouting", "jump masquerading")
    out.chain("filter-input", "type filter hook input priority -10")
    out.rule("filter-input", "ct state new jump nodeport-endpoints-check")
    out.rule("filter-input", "ct state new jump endpoints-check")
    out.chain("filter-forward", "type filter hook forward priority -10")
    out.rule("filter-forward", "ct state new jump endpoints-check")
    out.rule("filter-forward", "ct state new jump cluster-ips-check")
    out.chain("filter-output", "type filter hook output priority -10")
    out.rule("filter-output", "ct state new jump endpoints-check")
    out.rule("filter-output", "ct state new jump cluster-ips-check")


def _describe(sp: ServicePort, everywhere: list[Endpoint], here: list[Endpoint]) -> str:
    parts = [f"{sp.namespace}/{sp.name} port {sp.port_name or sp.port} ({sp.port}/{sp.protocol})"]
    if sp.cluster_ips:
        parts.append("ClusterIP " + ",".join(sp.cluster_ips))
    if sp.node_port:
        parts.append(f"NodePort {sp.node_port}")
    if sp.load_balancer:
        parts.append(f"LoadBalancer port {sp.port} on node addresses")
    if sp.external_ips:
        parts.append("external " + ",".join(sp.external_ips))
    parts.append(f"{len(everywhere)} usable endpoint(s), {len(here)} on this node")
    return "; ".join(parts)


def _service_port(out: _Script, sp: ServicePort, *, node: str, cidr: str) -> None:
    """The chains, sets and map elements of one Service port."""
    if not sp.cluster_ips and not sp.has_external:
        return  # headless: DNS gives the pods' own addresses, nothing to translate
    everywhere = usable(sp.endpoints)
    here = [e for e in everywhere if e.node == node]
    ident, h = sp.ident, _hash(sp.ident)
    proto = sp.protocol.lower()
    out.blank()
    out.comment(_describe(sp, everywhere, here))
    owner = ident
    if not everywhere:
        # no endpoint anywhere: new connections are refused, not left to time out
        for ip in sp.cluster_ips + sp.external_ips:
            out.element("no-endpoint-services", f"{ip} . {proto} . {sp.port}", "goto reject-chain", owner=owner)
        for port in _node_ports(sp):
            out.element("no-endpoint-nodeports", f"{proto} . {port}", "goto reject-chain", owner=owner)
        return
    cluster_chain = f"service-{h}-{ident}"
    local_chain = f"local-{h}-{ident}"
    need_cluster = bool((sp.cluster_ips and not sp.internal_local) or sp.has_external)
    need_local = bool(here and ((sp.cluster_ips and sp.internal_local) or (sp.has_external and sp.external_local)))
    used = everywhere if need_cluster else here if need_local else []
    # per-endpoint chains only where affinity must record the client; else the Service chain DNATs itself
    endpoint_chains = {(e.ip, e.port): _endpoint_chain(out, sp, e) for e in used} if sp.affinity_seconds else {}
    if need_cluster:
        _balance(out, out.chain(cluster_chain), sp, everywhere, endpoint_chains, cidr=cidr)
    if need_local:
        _balance(out, out.chain(local_chain), sp, here, endpoint_chains, cidr=cidr)
    if sp.cluster_ips:
        if not sp.internal_local:
            target = f"goto {cluster_chain}"
        elif here:
            target = f"goto {local_chain}"
        else:
            target = None  # internalTrafficPolicy Local and no endpoint here: dropped
        for ip in sp.cluster_ips:
            key = f"{ip} . {proto} . {sp.port}"
            if target is None:
                out.element("no-endpoint-services", key, "drop", owner=owner)
            else:
                out.element("service-ips", key, target, owner=owner)
    if sp.has_external:
        external = out.chain(f"external-{h}-{ident}")
        if sp.external_local:
            out.rule(external, f"ip saddr {cidr} goto {cluster_chain}")
            out.rule(external, "fib saddr type local jump mark-for-masquerade")
            out.rule(external, f"fib saddr type local goto {cluster_chain}")
            out.rule(external, f"goto {local_chain}" if here else "drop")
        else:
            out.rule(external, "jump mark-for-masquerade")
            out.rule(external, f"goto {cluster_chain}")
        for ip in sp.external_ips:
            out.element("service-ips", f"{ip} . {proto} . {sp.port}", f"goto {external}", owner=owner)
        for port in _node_ports(sp):
            out.element("service-nodeports", f"{proto} . {port}", f"goto {external}", owner=owner)


def _node_ports(sp: ServicePort) -> list[int]:
    """The ports this Service port answers on at the node's addresses: its NodePort, and for ServiceLB its port."""
    found = [sp.node_port] if sp.node_port else []
    if sp.load_balancer and sp.port not in found:
        found.append(sp.port)
    return found


def affinity_set(sp: ServicePort, ep: Endpoint) -> str:
    """The name of an endpoint's ClientIP set; the timeout is part of it, so a new timeout makes a new set."""
    return f"affinity-{_hash(f'{_endpoint_ident(sp, ep)}@{sp.affinity_seconds}s')}"


def _endpoint_chain(out: _Script, sp: ServicePort, ep: Endpoint) -> str:
    ident = _endpoint_ident(sp, ep)
    chain = out.chain(f"endpoint-{_hash(ident)}-{ident}")
    out.rule(chain, f"ip saddr {ep.ip} jump mark-for-masquerade")  # hairpin: a pod reaching itself
    if sp.affinity_seconds:
        name = out.container("set", affinity_set(sp, ep),
                             f"type ipv4_addr ; flags dynamic,timeout ; timeout {sp.affinity_seconds}s")
        out.rule(chain, f"update @{name} {{ ip saddr }}")
    out.rule(chain, f"meta l4proto {sp.protocol.lower()} dnat to {ep.ip}:{ep.port}")
    return chain


def _balance(out: _Script, chain: str, sp: ServicePort, endpoints: list[Endpoint],
             endpoint_chains: dict[tuple[str, int], str], *, cidr: str) -> None:
    """A Service chain: masquerade off-cluster ClusterIP clients, honour affinity, then pick at random.

    Without affinity the chain DNATs itself (`numgen random mod N` into a map of
    address . port), and masquerades a backend of the Service that reaches it (hairpin:
    it may land on itself); with affinity each endpoint has its own chain, which records
    the client and masquerades hairpin traffic exactly.
    """
    proto = sp.protocol.lower()
    for ip in sp.cluster_ips:
        out.rule(chain, f"ip daddr {ip} {proto} dport {sp.port} ip saddr != {cidr} jump mark-for-masquerade")
    if endpoint_chains:
        targets = [endpoint_chains[(e.ip, e.port)] for e in endpoints]
        for e, target in zip(endpoints, targets):
            out.rule(chain, f"ip saddr @{affinity_set(sp, e)} goto {target}")
        vmap = " , ".join(f"{i} : goto {target}" for i, target in enumerate(targets))
        out.rule(chain, f"numgen random mod {len(targets)} vmap {{ {vmap} }}")
        return
    backends = sorted({e.ip for e in endpoints}, key=lambda a: int(ipaddress.ip_address(a)))
    out.rule(chain, f"ip saddr {{ {', '.join(backends)} }} jump mark-for-masquerade")  # hairpin
    if len(endpoints) == 1:
        out.rule(chain, f"meta l4proto {proto} dnat to {endpoints[0].ip}:{endpoints[0].port}")
        return
    choices = " , ".join(f"{i} : {e.ip} . {e.port}" for i, e in enumerate(endpoints))
    out.rule(chain, f"meta l4proto {proto} dnat ip to numgen random mod {len(endpoints)} map {{ {choices} }}")


__all__ = ["MASQUERADE_MARK", "TABLE", "render", "table_objects"]
