"""The Service REST strategy's address part: what kube-apiserver does to a Service's IPs and ports on a write.

kctl.apiserver.server calls `before_create(txn, svc, now=...)` and `before_update(txn, old,
new, now=...)` inside the commit transaction, just before the Service is written, and
`after_delete(txn, svc)` when a Service leaves the store. As Kubernetes'
pkg/registry/core/service/storage (alloc.go, storage.go) and its strategy:

- create: `clusterIP`/`clusterIPs` kept in step; `ipFamilyPolicy` (SingleStack) and
  `ipFamilies` ([IPv4]) defaulted; a ClusterIP allocated (or the requested one taken)
  unless the Service is headless (`clusterIP: None`) or ExternalName; node ports for
  NodePort and LoadBalancer Services (requested or allocated, one per port number), a
  healthCheckNodePort for a LoadBalancer with `externalTrafficPolicy: Local`;
- update: values the client left out are kept (patchAllocatedValues), fields the new
  type does not use are dropped when unchanged (dropTypeDependentFields), the ClusterIP
  may not change, a type change allocates or releases addresses and ports;
- delete: the addresses and ports go back.

Errors are kube-apiserver's Invalid errors with its messages; raised inside the
transaction, they roll back everything the write allocated.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from kctl.apiserver.services.clusterip import AllocationError, ClusterIPAllocator
from kctl.apiserver.services.nodeport import NodePortAllocator, PortAllocationError, service_node_ports
from kctl.machinery.errors import APIError, FieldError, Invalid

if TYPE_CHECKING:
    from kctl.store.contract import Transaction

NONE = "None"
NODE_PORT_TYPES = ("NodePort", "LoadBalancer")


def go_strings(values: Any) -> str:
    """A list of strings as Go's %#v prints a []string (kube-apiserver's messages show clusterIPs so)."""
    items = values if isinstance(values, list) else []
    return "[]string{" + ", ".join('"' + str(v).replace('"', '\\"') + '"' for v in items) + "}"


def _quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


class _Errors:
    """Field errors of one Service, raised together as one Invalid."""

    def __init__(self, svc: dict) -> None:
        self.name = (svc.get("metadata") or {}).get("name", "")
        self.items: list[FieldError] = []

    def invalid(self, path: str, shown: str, detail: str) -> None:
        self.items.append(FieldError(path, f"Invalid value: {shown}: {detail}"))

    def forbidden(self, path: str, detail: str) -> None:
        self.items.append(FieldError(path, f"Forbidden: {detail}"))

    def raise_any(self) -> None:
        if self.items:
            raise Invalid(f'Service "{self.name}"', self.items)


def _spec(svc: dict) -> dict:
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        spec = svc["spec"] = {}
    return spec


def _type(svc: dict) -> str:
    return str(_spec(svc).get("type") or "ClusterIP")


def _ports(svc: dict) -> list[dict]:
    return [p for p in _spec(svc).get("ports") or () if isinstance(p, dict)]


def _cluster_ips(svc: dict) -> list[str]:
    ips = _spec(svc).get("clusterIPs")
    return [str(ip) for ip in ips] if isinstance(ips, list) else []


def _headless(svc: dict) -> bool:
    return _cluster_ips(svc) == [NONE]


def _needs_node_ports(svc: dict) -> bool:
    return _type(svc) in NODE_PORT_TYPES


def _allocates_node_ports(svc: dict) -> bool:
    """A LoadBalancer with allocateLoadBalancerNodePorts false takes only the ports asked for."""
    return not (_type(svc) == "LoadBalancer" and _spec(svc).get("allocateLoadBalancerNodePorts") is False)


def _needs_health_check(svc: dict) -> bool:
    spec = _spec(svc)
    return _type(svc) == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def _node_port(port: dict) -> int:
    value = port.get("nodePort")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _ref(svc: dict) -> tuple[str, str]:
    meta = svc.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


# -- checks of the address fields (ValidateServiceClusterIPsRelatedFields, cut to IPv4) ---------------


def _check_address_fields(svc: dict, errors: _Errors) -> None:
    spec = _spec(svc)
    kind = _type(svc)
    if kind == "ExternalName":
        for key in ("clusterIPs", "ipFamilies"):
            if spec.get(key):
                errors.forbidden(f"spec.{key}", "may not be set for ExternalName services")
        if spec.get("ipFamilyPolicy"):
            errors.forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services")
        return
    cluster_ip, ips = spec.get("clusterIP") or "", _cluster_ips(svc)
    if cluster_ip:
        if not ips:
            errors.items.append(FieldError("spec.clusterIPs", "Required value"))
        elif ips[0] != cluster_ip:
            errors.invalid("spec.clusterIPs", go_strings(ips), "first value must match `clusterIP`")
    elif ips:
        errors.invalid("spec.clusterIPs", go_strings(ips), "must be empty when `clusterIP` is not specified")
    for i, ip in enumerate(ips):
        if i == 0 and ip == NONE:
            if len(ips) > 1:
                errors.invalid("spec.clusterIPs", go_strings(ips), "'None' must be the first and only value")
            continue
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            errors.invalid(f"spec.clusterIPs[{i}]", _quoted(ip),
                           "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")
            continue
        if address.version == 6:
            errors.invalid(f"spec.clusterIPs[{i}]", go_strings(ips), "IPv6 is not configured on this cluster")
    if len(ips) > 1 and ips[0] != NONE:
        errors.invalid("spec.clusterIPs", go_strings(ips), "may specify no more than one IP for each IP family")
    if cluster_ip == NONE and kind in NODE_PORT_TYPES:
        errors.invalid("spec.clusterIP", _quoted(cluster_ip), f"may not be set to 'None' for {kind} services")
    if kind == "ClusterIP":
        for i, port in enumerate(_ports(svc)):
            if _node_port(port):
                errors.forbidden(f"spec.ports[{i}].nodePort", "may not be used when `type` is 'ClusterIP'")


def _init_ip_families(svc: dict, old: dict | None, errors: _Errors) -> None:
    """initIPFamilyFields for a single-stack IPv4 cluster."""
    spec = _spec(svc)
    if _type(svc) == "ExternalName":
        return
    if not spec.get("ipFamilyPolicy"):
        old_policy = _spec(old).get("ipFamilyPolicy") if old is not None else None
        if old_policy:
            spec["ipFamilyPolicy"] = old_policy
        elif spec.get("clusterIP") == NONE and not spec.get("selector"):
            spec["ipFamilyPolicy"] = "RequireDualStack"  # headless and selectorless: every family
        else:
            spec["ipFamilyPolicy"] = "SingleStack"
    families = spec.get("ipFamilies") if isinstance(spec.get("ipFamilies"), list) else []
    headless_selectorless = spec.get("clusterIP") == NONE and not spec.get("selector")
    if headless_selectorless:
        families = families or ["IPv4"]
        if len(families) < 2 and spec["ipFamilyPolicy"] != "SingleStack":
            families = [*families, "IPv6" if families[0] == "IPv4" else "IPv4"]
        spec["ipFamilies"] = families
        return
    if spec["ipFamilyPolicy"] == "RequireDualStack":
        errors.invalid("spec.ipFamilyPolicy", _quoted(spec["ipFamilyPolicy"]),
                       "this cluster is not configured for dual-stack services")
    for i, family in enumerate(families):
        if family != "IPv4":
            errors.invalid(f"spec.ipFamilies[{i}]", _quoted(family), "not configured on this cluster")
    spec["ipFamilies"] = families or ["IPv4"]


# -- node ports ---------------------------------------------------------------------------------------


def _init_node_ports(svc: dict, ports: NodePortAllocator, errors: _Errors) -> None:
    """initNodePorts: one node port per service port number, requested ones taken as asked."""
    by_number: dict[Any, int] = {}
    for i, port in enumerate(_ports(svc)):
        wanted = _node_port(port)
        if not wanted and not _allocates_node_ports(svc):
            continue
        known = by_number.get(port.get("port"), 0)
        try:
            if known and wanted in (0, known):
                port["nodePort"] = known
                continue
            if wanted:
                ports.allocate(wanted)
            else:
                wanted = ports.allocate_next()
                port["nodePort"] = wanted
        except PortAllocationError as exc:
            if not wanted:
                raise APIError(f"Internal error occurred: failed to allocate a nodePort: {exc}") from None
            errors.invalid(f"spec.ports[{i}].nodePort", str(wanted), str(exc))
            continue
        by_number.setdefault(port.get("port"), wanted)


def _init_health_check_port(svc: dict, ports: NodePortAllocator, errors: _Errors) -> None:
    spec = _spec(svc)
    wanted = spec.get("healthCheckNodePort") or 0
    try:
        if wanted:
            ports.allocate(int(wanted))
        else:
            spec["healthCheckNodePort"] = ports.allocate_next()
    except PortAllocationError as exc:
        errors.invalid("spec.healthCheckNodePort", str(wanted), str(exc))


# -- create -------------------------------------------------------------------------------------------


def before_create(txn: Transaction, svc: dict, *, now: str) -> None:
    """Default the address fields and allocate the Service's ClusterIP and node ports (svc is changed)."""
    spec = _spec(svc)
    errors = _Errors(svc)
    if spec.get("clusterIP") and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [spec["clusterIP"]]
    _check_address_fields(svc, errors)
    errors.raise_any()
    _init_ip_families(svc, None, errors)
    errors.raise_any()
    namespace, name = _ref(svc)
    if _type(svc) != "ExternalName" and not _headless(svc):
        _allocate_cluster_ip(ClusterIPAllocator(txn, now=now), svc, namespace, name, errors)
        errors.raise_any()
    if _needs_node_ports(svc) or _needs_health_check(svc):
        ports = NodePortAllocator(txn, now=now)
        if _needs_node_ports(svc):
            _init_node_ports(svc, ports, errors)
        if _needs_health_check(svc):
            _init_health_check_port(svc, ports, errors)
        errors.raise_any()
        ports.save()


def _allocate_cluster_ip(ips: ClusterIPAllocator, svc: dict, namespace: str, name: str, errors: _Errors) -> None:
    spec = _spec(svc)
    wanted = spec.get("clusterIP") or ""
    try:
        got = ips.allocate(wanted, namespace, name) if wanted else ips.allocate_next(namespace, name)
    except AllocationError as exc:
        if not wanted:
            raise APIError(f"Internal error occurred: failed to allocate a serviceIP: {exc}") from None
        errors.invalid("spec.clusterIPs", go_strings(_cluster_ips(svc)), f"failed to allocate IP {wanted}: {exc}")
        return
    spec["clusterIP"] = got
    spec["clusterIPs"] = [got]


# -- update -------------------------------------------------------------------------------------------


def _patch_allocated_values(new: dict, old: dict) -> None:
    """Keep what the client did not send: the ClusterIP, node ports by port name, the health-check port."""
    spec, old_spec = _spec(new), _spec(old)
    if _type(old) != "ExternalName" and _type(new) != "ExternalName":
        if not spec.get("clusterIP") and old_spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
        if not spec.get("clusterIPs") and old_spec.get("clusterIPs"):
            spec["clusterIPs"] = list(old_spec["clusterIPs"])
    if _needs_node_ports(old) and _needs_node_ports(new):
        used = {_node_port(p) for p in _ports(old)} & {_node_port(p) for p in _ports(new)}
        by_name = {p.get("name"): _node_port(p) for p in _ports(old)}
        for port in _ports(new):
            if not _node_port(port):
                kept = by_name.get(port.get("name"), 0)
                if kept and kept not in used:
                    port["nodePort"] = kept
    if _needs_health_check(old) and _needs_health_check(new) and not spec.get("healthCheckNodePort"):
        if old_spec.get("healthCheckNodePort"):
            spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]


def _normalize_cluster_ips_on_update(new: dict, old: dict) -> None:
    """normalizeClusterIPs: a changed singular field carries its plural when the plural was left alone."""
    spec, old_spec = _spec(new), _spec(old)
    same_plural = _cluster_ips(new) == _cluster_ips(old)
    if old_spec.get("clusterIP") and not spec.get("clusterIP") and same_plural:
        spec.pop("clusterIPs", None)
    elif spec.get("clusterIP") and spec.get("clusterIP") != old_spec.get("clusterIP") and same_plural:
        ips = _cluster_ips(new)
        spec["clusterIPs"] = [spec["clusterIP"], *ips[1:]] if ips else [spec["clusterIP"]]


def _drop_type_dependent_fields(new: dict, old: dict) -> None:
    """dropTypeDependentFields: what the new type does not use goes, when the client left it as it was."""
    spec, old_spec = _spec(new), _spec(old)
    if _type(new) == "ExternalName" and _type(old) != "ExternalName":
        if spec.get("clusterIP") == old_spec.get("clusterIP") and _cluster_ips(new) == _cluster_ips(old):
            for key in ("clusterIP", "clusterIPs"):
                spec.pop(key, None)
        if spec.get("ipFamilies") == old_spec.get("ipFamilies"):
            spec.pop("ipFamilies", None)
        if spec.get("ipFamilyPolicy") == old_spec.get("ipFamilyPolicy"):
            spec.pop("ipFamilyPolicy", None)
    if not _needs_node_ports(new) and [_node_port(p) for p in _ports(new)] == [_node_port(p) for p in _ports(old)]:
        for port in _ports(new):
            port.pop("nodePort", None)
    if not _needs_health_check(new) and spec.get("healthCheckNodePort") == old_spec.get("healthCheckNodePort"):
        spec.pop("healthCheckNodePort", None)
    if _type(new) != "LoadBalancer" \
            and spec.get("allocateLoadBalancerNodePorts") == old_spec.get("allocateLoadBalancerNodePorts"):
        spec.pop("allocateLoadBalancerNodePorts", None)
    if not _needs_node_ports(new) and spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy"):
        spec.pop("externalTrafficPolicy", None)


def _check_immutable(new: dict, old: dict, errors: _Errors) -> None:
    """validateUpgradeDowngradeClusterIPs for single-stack: the primary ClusterIP may not change."""
    if "ExternalName" in (_type(new), _type(old)) or (_headless(new) and _headless(old)):
        return
    ips, old_ips = _cluster_ips(new), _cluster_ips(old)
    if old_ips and not ips:
        errors.invalid("spec.clusterIPs[0]", go_strings(ips), "primary clusterIP can not be unset")
        return
    for i, ip in enumerate(old_ips[:len(ips)]):
        if ip != ips[i]:
            errors.invalid(f"spec.clusterIPs[{i}]", go_strings(ips), "may not change once set")


def before_update(txn: Transaction, old: dict, new: dict, *, now: str) -> None:
    """Keep, check and (re)allocate the address fields of an updated Service (new is changed)."""
    _patch_allocated_values(new, old)
    _normalize_cluster_ips_on_update(new, old)
    _drop_type_dependent_fields(new, old)
    errors = _Errors(new)
    _check_address_fields(new, errors)
    _check_immutable(new, old, errors)
    errors.raise_any()
    _init_ip_families(new, old, errors)
    errors.raise_any()
    namespace, name = _ref(new)
    is_external = _type(new) == "ExternalName"
    held = [] if _type(old) == "ExternalName" or _headless(old) else _cluster_ips(old)
    if not is_external and not _headless(new) and not held:
        # from ExternalName (or a Service stored before kctl allocated addresses): it gets one now
        _allocate_cluster_ip(ClusterIPAllocator(txn, now=now), new, namespace, name, errors)
        errors.raise_any()
    elif is_external and held:
        ips = ClusterIPAllocator(txn, now=now)
        for ip in held:
            ips.release(ip, namespace, name)
    _update_node_ports(txn, old, new, errors, now=now)


def _update_node_ports(txn: Transaction, old: dict, new: dict, errors: _Errors, *, now: str) -> None:
    """txnUpdateNodePorts: release what the new type or ports no longer use, take the new ones."""
    old_ports = {_node_port(p) for p in _ports(old) if _needs_node_ports(old)} - {0}
    old_hc = int(_spec(old).get("healthCheckNodePort") or 0) if _needs_health_check(old) else 0
    if not (old_ports or old_hc or _needs_node_ports(new) or _needs_health_check(new)):
        return
    ports = NodePortAllocator(txn, now=now)
    kept: set[int] = set()
    if _needs_node_ports(new):
        taken: set[int] = set()
        for i, port in enumerate(_ports(new)):
            wanted = _node_port(port)
            if not wanted and not _allocates_node_ports(new):
                continue
            try:
                if wanted:
                    if wanted not in old_ports and wanted not in taken:
                        ports.allocate(wanted)
                        taken.add(wanted)
                else:
                    port["nodePort"] = wanted = ports.allocate_next()
                    taken.add(wanted)
            except PortAllocationError as exc:
                if not wanted:
                    raise APIError(f"Internal error occurred: failed to allocate a nodePort: {exc}") from None
                errors.invalid(f"spec.ports[{i}].nodePort", str(wanted), str(exc))
            kept.add(wanted)
    new_hc = 0
    if _needs_health_check(new):
        spec = _spec(new)
        new_hc = int(spec.get("healthCheckNodePort") or 0)
        if new_hc != old_hc or not new_hc:
            _init_health_check_port(new, ports, errors)
            new_hc = int(spec.get("healthCheckNodePort") or 0)
    errors.raise_any()
    for port in old_ports - kept - {new_hc}:
        ports.release(port)
    if old_hc and old_hc != new_hc and old_hc not in kept:
        ports.release(old_hc)
    ports.save()


def fill_missing(txn: Transaction, svc: dict, *, now: str) -> dict | None:
    """The Service with the addresses and node ports it lacks (one stored before kctl allocated them), or None.

    Raises Invalid or APIError when they cannot be had (a full range, a clash).
    """
    import copy

    new = copy.deepcopy(svc)
    before_update(txn, svc, new, now=now)
    return new if new != svc else None


# -- delete -------------------------------------------------------------------------------------------


def after_delete(txn: Transaction, svc: dict, *, now: str) -> None:
    """Give a removed Service's addresses and node ports back."""
    namespace, name = _ref(svc)
    if _type(svc) != "ExternalName" and not _headless(svc) and _cluster_ips(svc):
        ips = ClusterIPAllocator(txn, now=now)
        for ip in _cluster_ips(svc):
            ips.release(ip, namespace, name)
    held = service_node_ports(svc)
    if held:
        ports = NodePortAllocator(txn, now=now)
        for port in held:
            ports.release(port)
        ports.save()


__all__ = ["after_delete", "before_create", "before_update", "fill_missing", "go_strings"]
