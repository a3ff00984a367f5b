"""What `kctl port-forward` forwards: the pod chosen, the ports resolved, the addresses listened on, the way in.

kctl.cli.portforward calls, in order: `split_ports` (at least TYPE/NAME and one port),
`forwardable_pod` (a Pod itself, or the most active pod a Service's or workload's selector
picks, waiting up to --pod-running-timeout for one to appear), `resolve_ports` (named and
Service ports to container port numbers), `parse_ports` and `parse_addresses` (the local
listeners), `require_running`, then `route_for` (how one connection reaches the pod's
IP and port: straight from this machine, or through `ssh -W` to the pod's host, or through
the control host with `--server`). The relay itself is kctl.ops.portrelay.

The rules and messages are kubectl's: staging/src/k8s.io/kubectl/pkg/cmd/portforward,
pkg/polymorphichelpers (AttachablePodForObjectFn, SelectorsForObject, GetFirstPod),
pkg/util/podutils (ActivePods), pkg/util (port lookups) and client-go/tools/portforward
(parsePorts, parseAddresses). PortForwardError carries the message; no printing here.
"""

from __future__ import annotations

import functools
import ipaddress
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.ops.portrelay import ListenAddress, Route

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.machinery.selectors import LabelSelector

#: kubectl's --pod-running-timeout default (1m0s)
DEFAULT_POD_RUNNING_TIMEOUT = 60.0
#: the kinds whose pods port-forward can pick by selector, by the store's group-kind
SELECTOR_KINDS = ("Service", "ReplicationController", "Deployment.apps", "ReplicaSet.apps", "StatefulSet.apps",
                  "DaemonSet.apps", "Job.batch")


class PortForwardError(Exception):
    """Port-forwarding cannot start; the message is kubectl's (printed as `error: ...`, exit 1)."""


class PortForwardUsageError(PortForwardError):
    """The command line lacks what port-forward needs (kubectl adds "See ... -h")."""


@dataclass(frozen=True)
class ForwardedPort:
    """One local port (0: any free one) and the pod's port it leads to."""

    local: int
    remote: int


# -- the command line -------------------------------------------------------------------------

def split_ports(args: list[str]) -> tuple[str, list[str]]:
    """(TYPE/NAME, port specs) from the arguments; PortForwardUsageError with fewer than two."""
    if len(args) < 2:
        raise PortForwardUsageError("TYPE/NAME and list of ports are required for port-forward")
    return args[0], list(args[1:])


def target_of(resource: str) -> tuple[str, str]:
    """(type, name) of `TYPE/NAME`, or ("pods", NAME) for a bare name (kubectl's builder.ResourceNames)."""
    if "/" in resource:
        kind, _, name = resource.partition("/")
        if not kind or not name:
            raise PortForwardError(f"arguments in resource/name form must have a single resource and name: "
                                   f"{resource}")
        return kind, name
    return "pods", resource


def _split_port(spec: str) -> tuple[str, str]:
    """kubectl's splitPort: `L:R` -> (L, R); anything else -> (spec's first part, the same)."""
    parts = spec.split(":")
    if len(parts) == 2:
        return parts[0], parts[1]
    return parts[0], parts[0]


def _go_parse_uint16(text: str) -> int:
    """strconv.ParseUint(text, 10, 16) with Go's error text."""
    if not text or not text.isascii() or not text.isdigit():
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    value = int(text)
    if value > 65535:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value


def parse_ports(specs: list[str]) -> list[ForwardedPort]:
    """client-go's parsePorts: `[LOCAL:]REMOTE` each, `:REMOTE` for a free local port."""
    forwards = []
    for spec in specs:
        parts = spec.split(":")
        if len(parts) == 1:
            local_text = remote_text = parts[0]
        elif len(parts) == 2:
            local_text, remote_text = parts[0] or "0", parts[1]
        else:
            raise PortForwardError(f"invalid port format '{spec}'")
        try:
            local = _go_parse_uint16(local_text)
        except ValueError as exc:
            raise PortForwardError(f"error parsing local port '{local_text}': {exc}") from None
        try:
            remote = _go_parse_uint16(remote_text)
        except ValueError as exc:
            raise PortForwardError(f"error parsing remote port '{remote_text}': {exc}") from None
        if remote == 0:
            raise PortForwardError("remote port must be > 0")
        forwards.append(ForwardedPort(local, remote))
    return forwards


def parse_addresses(addresses: list[str]) -> list[ListenAddress]:
    """client-go's parseAddresses: `localhost` is 127.0.0.1 and ::1 (either may fail), an IP must listen;
    de-duplicated and sorted by address, as kubectl prints them."""
    parsed: dict[str, ListenAddress] = {}
    for address in addresses:
        if address == "localhost":
            parsed.setdefault("127.0.0.1", ListenAddress("127.0.0.1", 4, required=False))
            parsed.setdefault("::1", ListenAddress("::1", 6, required=False))
            continue
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            raise PortForwardError(f"{address} is not a valid IP") from None
        parsed[address] = ListenAddress(address, ip.version, required=True)
    return sorted(parsed.values(), key=lambda a: a.address)


# -- which pod --------------------------------------------------------------------------------

def _conditions_ready(pod: dict) -> dict | None:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition
    return None


def is_ready(pod: dict) -> bool:
    """podutils.IsPodReady: the Ready condition is True."""
    condition = _conditions_ready(pod)
    return bool(condition and condition.get("status") == "True")


def _time(text: object) -> float | None:
    from kctl.machinery.times import parse_seconds

    return parse_seconds(text)


def _after_or_zero(t1: float | None, t2: float | None) -> bool:
    """podutils.afterOrZero: a zero time sorts first, else the later one."""
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _max_restarts(pod: dict) -> int:
    counts = [s.get("restartCount") or 0 for s in (pod.get("status") or {}).get("containerStatuses") or ()
              if isinstance(s, dict)]
    return max(counts, default=0)


_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def less_active(a: dict, b: dict) -> bool:
    """podutils.ActivePods.Less: whether `a` is less active than `b` (unassigned, pending, not ready,
    ready later, restarted more, created later or never)."""
    node_a, node_b = (a.get("spec") or {}).get("nodeName") or "", (b.get("spec") or {}).get("nodeName") or ""
    if node_a != node_b and (not node_a or not node_b):
        return not node_a
    rank_a = _PHASE_RANK.get((a.get("status") or {}).get("phase") or "", 0)
    rank_b = _PHASE_RANK.get((b.get("status") or {}).get("phase") or "", 0)
    if rank_a != rank_b:
        return rank_a < rank_b
    ready_a, ready_b = is_ready(a), is_ready(b)
    if ready_a != ready_b:
        return not ready_a
    if ready_a and ready_b:
        since_a = _time((_conditions_ready(a) or {}).get("lastTransitionTime"))
        since_b = _time((_conditions_ready(b) or {}).get("lastTransitionTime"))
        if since_a != since_b:
            return _after_or_zero(since_a, since_b)
    if _max_restarts(a) != _max_restarts(b):
        return _max_restarts(a) > _max_restarts(b)
    created_a = _time((a.get("metadata") or {}).get("creationTimestamp"))
    created_b = _time((b.get("metadata") or {}).get("creationTimestamp"))
    if created_a != created_b:
        return _after_or_zero(created_a, created_b)
    return False


def most_active_first(pods: list[dict]) -> list[dict]:
    """The pods in sort.Reverse(ActivePods) order: the one kubectl picks first."""
    def compare(a: dict, b: dict) -> int:
        return -1 if less_active(b, a) else 1 if less_active(a, b) else 0

    return sorted(pods, key=functools.cmp_to_key(compare))


def _go_type(obj: dict) -> str:
    """How kubectl names an object's Go type in messages: *v1.Service, *v1.ConfigMap."""
    version = str(obj.get("apiVersion") or "v1").rpartition("/")[2]
    return f"*{version}.{obj.get('kind', '')}"


def selector_for(obj: dict, group_kind: str) -> LabelSelector:
    """polymorphichelpers.SelectorsForObject: the pods a Service or workload selects."""
    from kctl.machinery.errors import Invalid
    from kctl.machinery.selectors import from_label_selector_object

    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    name = (obj.get("metadata") or {}).get("name", "")
    where = f"cannot attach to {_go_type(obj)}"
    if group_kind not in SELECTOR_KINDS:
        raise PortForwardError(f"{where}: selector for {_go_type(obj)} not implemented")
    if group_kind == "Service":
        if not spec.get("selector"):
            raise PortForwardError(f"{where}: invalid service '{name}': Service is defined without a selector")
        return from_label_selector_object({"matchLabels": dict(spec["selector"])})
    if group_kind == "ReplicationController":
        return from_label_selector_object({"matchLabels": dict(spec.get("selector") or {})})
    try:
        return from_label_selector_object(spec.get("selector"))
    except Invalid as exc:
        raise PortForwardError(f"{where}: invalid label selector: {exc}") from None


def forwardable_pod(api: API, obj: dict, group_kind: str, *, namespace: str, timeout: float) -> dict:
    """AttachablePodForObjectFn: a Pod itself; else the most active pod the object selects, waiting up to
    `timeout` seconds for a first one to be created (`timed out waiting for the condition`)."""
    if group_kind == "Pod":
        return obj
    selector = selector_for(obj, group_kind)
    pods_rt = api.resource("pods")
    pods, revision = api.list(pods_rt, namespace=namespace, label_selector=selector)
    if pods:
        return most_active_first(pods)[0]
    for event, pod in api.watch(pods_rt, namespace=namespace, since=revision, label_selector=selector,
                                timeout=timeout):
        if event in ("ADDED", "MODIFIED"):
            return pod
    raise PortForwardError("timed out waiting for the condition")


def require_running(pod: dict) -> None:
    """kubectl's check before it forwards: the pod's phase is Running."""
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if phase != "Running":
        raise PortForwardError(f"unable to forward port because pod is not running. Current status={phase}")


# -- which ports ------------------------------------------------------------------------------

def _container_port_by_name(pod: dict, name: str) -> int:
    """util.LookupContainerPortNumberByName."""
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in (container or {}).get("ports") or ():
            if isinstance(port, dict) and port.get("name") == name:
                return int(port.get("containerPort") or 0)
    raise PortForwardError(f"Pod '{(pod.get('metadata') or {}).get('name', '')}' does not have a named port "
                           f"'{name}'")


def _service_port_by_name(service: dict, name: str) -> int:
    """util.LookupServicePortNumberByName."""
    for port in (service.get("spec") or {}).get("ports") or ():
        if isinstance(port, dict) and port.get("name") == name:
            return int(port.get("port") or 0)
    raise PortForwardError(f"Service '{(service.get('metadata') or {}).get('name', '')}' does not have a named "
                           f"port '{name}'")


def _container_port_for_service_port(service: dict, pod: dict, number: int) -> int:
    """util.LookupContainerPortNumberByServicePort: the targetPort behind Service port `number`."""
    spec = service.get("spec") or {}
    for port in spec.get("ports") or ():
        if not isinstance(port, dict) or port.get("port") != number:
            continue
        if spec.get("clusterIP") == "None":
            return number
        target = port.get("targetPort")
        if target is None or isinstance(target, int):
            return target or number
        if isinstance(target, str) and target.isdigit():
            return int(target) or number
        return _container_port_by_name(pod, str(target))
    raise PortForwardError(f"Service {(service.get('metadata') or {}).get('name', '')} does not have a service "
                           f"port {number}")


def _check_udp(specs: list[str], obj: dict, group_kind: str) -> None:
    """checkUDPPortInService / checkUDPPortInPod: a port only served over UDP cannot be forwarded."""
    if group_kind == "Service":
        entries = [(p.get("port"), p.get("protocol")) for p in (obj.get("spec") or {}).get("ports") or ()
                   if isinstance(p, dict)]
    else:
        entries = [(p.get("containerPort"), p.get("protocol"))
                   for c in (obj.get("spec") or {}).get("containers") or () if isinstance(c, dict)
                   for p in c.get("ports") or () if isinstance(p, dict)]
    udp = {n for n, proto in entries if proto == "UDP"} - {n for n, proto in entries if proto in ("TCP", None)}
    for spec in specs:
        _, remote = _split_port(spec)
        if remote.isdigit():
            number = int(remote)
        elif group_kind == "Service":
            number = _service_port_by_name(obj, remote)
        else:
            number = _container_port_by_name(obj, remote)
        if number in udp:
            raise PortForwardError(f"UDP protocol is not supported for {remote}")


def resolve_ports(specs: list[str], pod: dict, *, service: dict | None = None) -> list[str]:
    """The port specs with names and Service ports turned into the pod's port numbers
    (translateServicePortToTargetPort for a Service, convertPodNamedPortToNumber otherwise)."""
    _check_udp(specs, service if service is not None else pod, "Service" if service is not None else "Pod")
    out = []
    for spec in specs:
        local, remote = _split_port(spec)
        if service is not None:
            if remote.isdigit():
                number = int(remote)
            else:
                number = _service_port_by_name(service, remote)
                if local == remote:
                    local = str(number)
            remote = str(_container_port_for_service_port(service, pod, number))
            out.append(remote if local == remote else f"{local}:{remote}")
        else:
            number = remote if remote.isdigit() else str(_container_port_by_name(pod, remote))
            out.append(number if local == remote else f"{local}:{number}")
    return out


# -- how a connection gets there --------------------------------------------------------------

@dataclass(frozen=True)
class Reach:
    """What the CLI knows about where it runs: the --server URL and key, and this store's known_hosts."""

    server_url: str | None = None
    server_identity: str | None = None
    #: the known_hosts kctl keeps beside the store (for a Node without its own annotation)
    known_hosts: str | None = None


def _pod_address(pod: dict, *, on_host: bool) -> str:
    """The address to dial on the pod's host: its IP; a hostNetwork pod's is the host's loopback there."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("hostNetwork") and on_host:
        return "127.0.0.1"
    address = status.get("podIP") or (status.get("podIPs") or [{}])[0].get("ip") or ""
    if not address and spec.get("hostNetwork"):
        address = status.get("hostIP") or ""
    if not address:
        raise PortForwardError(f"pod {(pod.get('metadata') or {}).get('name', '')} has no IP address yet")
    return address


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def route_for(pod: dict, node: dict | None, remote_port: int, reach: Reach) -> Route:
    """How each connection reaches the pod's `remote_port`.

    A pod on a local Podman (unix://): straight to podIP:port (this host routes to its bridge).
    A pod on an ssh:// host: `ssh -W podIP:port` to that host, with the Node's key and known_hosts.
    A node-mode host (its own daemon, unix:// there): straight to the pod IP, which the pod
    network's routes reach from any Node. With --server the control host is the way in: `ssh -W`
    to it for its own pods, else it runs the ssh to the Node (the Nodes' keys are kept there).
    """
    from kctl.agent.node import AGENT_NODE_MODE, ANNOTATION_AGENT
    from kctl.runtime.connect import ANNOTATION_PODMAN_URL, ANNOTATION_SSH_IDENTITY, ANNOTATION_SSH_KNOWN_HOSTS
    from kctl.ssh import SSHTarget, ssh_options

    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    url = str(annotations.get(ANNOTATION_PODMAN_URL) or "unix://")
    node_mode = annotations.get(ANNOTATION_AGENT) == AGENT_NODE_MODE
    node_name = ((node or {}).get("metadata") or {}).get("name", "")
    if url.startswith("ssh://"):
        try:
            host = SSHTarget.parse(url)
        except ValueError as exc:
            raise PortForwardError(f"node {node_name}: {exc}") from None
        address = _pod_address(pod, on_host=True)
        known = annotations.get(ANNOTATION_SSH_KNOWN_HOSTS) or (_server_known_hosts_file(reach)
                                                                if reach.server_url else reach.known_hosts)
        inner = ["ssh", *ssh_options(identity=annotations.get(ANNOTATION_SSH_IDENTITY) or None,
                                     known_hosts=known or None, port=host.port),
                 "-T", "-W", _hostport(address, remote_port), "--", host.destination]
        if not reach.server_url:
            return Route(address, remote_port, ssh=tuple(inner), via=f"{host.host}:{host.port}")
        control = _control_target(reach)
        outer = ["ssh", *ssh_options(identity=_server_identity(reach), known_hosts=_server_known_hosts(),
                                     port=control.port), "-T", "--", control.destination,
                 " ".join(shlex.quote(w) for w in inner)]
        return Route(address, remote_port, ssh=tuple(outer), via=f"{control.host}:{control.port}")
    if reach.server_url:
        control = _control_target(reach)
        address = _pod_address(pod, on_host=not node_mode)
        outer = ["ssh", *ssh_options(identity=_server_identity(reach), known_hosts=_server_known_hosts(),
                                     port=control.port), "-T", "-W", _hostport(address, remote_port), "--",
                 control.destination]
        return Route(address, remote_port, ssh=tuple(outer), via=f"{control.host}:{control.port}")
    return Route(_pod_address(pod, on_host=not node_mode), remote_port)


def _control_target(reach: Reach):
    from kctl.ssh import SSHTarget

    try:
        return SSHTarget.parse(reach.server_url or "")
    except ValueError as exc:
        raise PortForwardError(f"--server: {exc}") from None


def _server_known_hosts_file(reach: Reach) -> str | None:
    """kctl's known_hosts on the control host: beside its store (none named: ssh's usual files there)."""
    from kctl.ssh import known_hosts_for_store

    path = _control_target(reach).path
    return known_hosts_for_store(path) if path not in ("", "/") else None


def _server_identity(reach: Reach) -> str | None:
    import os

    return reach.server_identity or os.environ.get("KCTL_SSH_IDENTITY") or None


def _server_known_hosts() -> str | None:
    import os

    return os.environ.get("KCTL_KNOWN_HOSTS") or None


__all__ = ["DEFAULT_POD_RUNNING_TIMEOUT", "ForwardedPort", "PortForwardError", "PortForwardUsageError", "Reach",
           "forwardable_pod", "is_ready", "less_active", "most_active_first", "parse_addresses", "parse_ports",
           "require_running", "resolve_ports", "route_for", "selector_for", "split_ports", "target_of"]
