"""The Service `kctl expose` makes for a Deployment, ReplicaSet, Pod, Service or ReplicationController.

kctl.cli.expose reads the flags and the exposed object and calls `service_for(obj, options)`;
the result is the object kubectl's expose generates (staging/src/k8s.io/kubectl/pkg/cmd/
expose): selector and ports found on the object unless given, labels copied from it,
multiple ports named port-1, port-2..., the protocol of each container port kept, the
target port the same as the port unless --target-port says otherwise. No I/O here:
ExposeError carries kubectl's message for the caller to print.
"""

from __future__ import annotations

from dataclasses import dataclass

#: what can be exposed, by the store's group-kind (kubectl's CanBeExposedFn)
EXPOSABLE = ("Pod", "Service", "ReplicationController", "Deployment.apps", "ReplicaSet.apps")
#: a Service name is a DNS-1035 label: at most 63 characters
MAX_NAME = 63


class ExposeError(Exception):
    """The Service cannot be made; the message is kubectl's."""


@dataclass(frozen=True)
class ExposeOptions:
    """kubectl expose's flags (None: not given)."""

    port: str | None = None
    target_port: str | None = None
    protocol: str | None = None
    type: str | None = None
    name: str | None = None
    selector: str | None = None
    labels: str | None = None
    cluster_ip: str | None = None
    external_ip: str | None = None
    session_affinity: str | None = None


def parse_labels(text: str) -> dict[str, str]:
    """`a=b,c=d` as kubectl's expose reads --selector and --labels."""
    out: dict[str, str] = {}
    for item in text.split(","):
        parts = item.split("=")
        if len(parts) != 2:
            raise ExposeError(f"unexpected label spec: {item}")
        if not parts[0]:
            raise ExposeError("unexpected empty label key")
        out[parts[0]] = parts[1]
    return out


def _pod_spec(obj: dict, group_kind: str) -> dict:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if group_kind == "Pod":
        return spec
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    return template.get("spec") if isinstance(template.get("spec"), dict) else {}


def selector_of(obj: dict, group_kind: str) -> dict[str, str]:
    """The pod selector of the exposed object (kubectl's MapBasedSelectorForObjectFn)."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if group_kind == "Pod":
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if not labels:
            raise ExposeError("the pod has no labels and cannot be exposed")
        return dict(labels)
    if group_kind == "Service":
        if not spec.get("selector"):
            raise ExposeError("the service has no pod selector set")
        return dict(spec["selector"])
    if group_kind == "ReplicationController":
        return dict(spec.get("selector") or {})
    selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
    if selector.get("matchExpressions"):
        raise ExposeError(f'couldn\'t convert expressions - "{selector["matchExpressions"]}" to map-based '
                          "selector format")
    return dict(selector.get("matchLabels") or {})


def _ports_and_protocols(obj: dict, group_kind: str) -> tuple[list[str], dict[str, list[str]]]:
    """The exposed object's ports, in order, and each port's protocols (PortsForObjectFn, MultiProtocolsForObjectFn)."""
    ports: list[str] = []
    protocols: dict[str, list[str]] = {}
    if group_kind == "Service":
        entries = [(p.get("port"), p.get("protocol")) for p in (obj.get("spec") or {}).get("ports") or ()
                   if isinstance(p, dict)]
    else:
        entries = [(p.get("containerPort"), p.get("protocol"))
                   for c in _pod_spec(obj, group_kind).get("containers") or () if isinstance(c, dict)
                   for p in c.get("ports") or () if isinstance(p, dict)]
    for number, protocol in entries:
        if not isinstance(number, int):
            continue
        if str(number) not in ports:  # one port number, several protocols: one entry (port-N-tcp, port-N-udp)
            ports.append(str(number))
        known = protocols.setdefault(str(number), [])
        if (protocol or "TCP") not in known:
            known.append(protocol or "TCP")
    return ports, protocols


def _target_port(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def service_for(obj: dict, group_kind: str, options: ExposeOptions) -> dict:
    """The Service kubectl expose would create for obj (kind `group_kind`), without namespace or status."""
    if group_kind not in EXPOSABLE:
        raise ExposeError(f"cannot expose a {group_kind}")
    meta = obj.get("metadata") or {}
    try:
        selector = parse_labels(options.selector) if options.selector else selector_of(obj, group_kind)
    except ExposeError as exc:
        if options.selector:
            raise
        raise ExposeError(f"couldn't retrieve selectors via --selector flag or introspection: {exc}") from None
    if not selector:
        raise ExposeError("selector must be specified")
    found, protocols = _ports_and_protocols(obj, group_kind)
    numbers = [p.strip() for p in options.port.split(",")] if options.port else found
    if not numbers and options.cluster_ip != "None":
        raise ExposeError("couldn't find port via --port flag or introspection")
    ports = []
    for i, text in enumerate(numbers):
        if not text.isdigit() or not 0 < int(text) < 65536:
            raise ExposeError(f'--port: "{text}" is not a port number')
        name = f"port-{i + 1}" if len(numbers) > 1 else None
        chosen = options.protocol
        if not chosen and len(protocols.get(text, ())) > 1:
            for protocol in protocols[text]:
                ports.append({"name": f"port-{i + 1}-{protocol.lower()}", "port": int(text), "protocol": protocol})
            continue
        if not chosen:
            chosen = (protocols.get(text) or ["TCP"])[0]
        ports.append({**({"name": name} if name else {}), "port": int(text), "protocol": chosen})
    for port in ports:
        port["targetPort"] = _target_port(options.target_port) if options.target_port else port["port"]
    labels = parse_labels(options.labels) if options.labels else dict(meta.get("labels") or {})
    name = options.name or str(meta.get("name", ""))[:MAX_NAME]
    spec: dict = {"ports": ports, "selector": selector}
    if options.external_ip:
        spec["externalIPs"] = [options.external_ip]
    if options.type:
        spec["type"] = options.type
    if options.session_affinity:
        if options.session_affinity not in ("None", "ClientIP"):
            raise ExposeError(f"unknown session affinity: {options.session_affinity}")
        spec["sessionAffinity"] = options.session_affinity
    if options.cluster_ip:
        spec["clusterIP"] = options.cluster_ip
    metadata: dict = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


__all__ = ["EXPOSABLE", "ExposeError", "ExposeOptions", "parse_labels", "selector_of", "service_for"]
