"""kubectl describe's layout for a Service: type, IPs, ports with their ready endpoints (from the
Service's EndpointSlices, as kubectl's formatEndpointSlices), session affinity, traffic policies.

One entry of the kind -> describer table in kctl.output.describe; the slices come from the
`describe` command (kctl.cli.get) through the Context.
"""

from __future__ import annotations

from kctl.output.cells import format_labels
from kctl.output.describe.context import Context
from kctl.output.describe.sections import write_annotations, write_events, write_header, write_labels
from kctl.output.describe.writer import PrefixWriter

__all__ = ["describe_service"]


def describe_service(w: PrefixWriter, svc: dict, ctx: Context) -> None:
    """kubectl's describeService; `Endpoints:` per port from the Service's EndpointSlices."""
    meta, spec, status = svc.get("metadata") or {}, svc.get("spec") or {}, svc.get("status") or {}
    write_header(w, meta)
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Selector:\t{format_labels(spec.get('selector'))}\n")
    w.write(0, f"Type:\t{spec.get('type') or 'ClusterIP'}\n")
    if spec.get("ipFamilyPolicy"):
        w.write(0, f"IP Family Policy:\t{spec['ipFamilyPolicy']}\n")
    w.write(0, f"IP Families:\t{','.join(spec.get('ipFamilies') or ()) or '<none>'}\n")
    w.write(0, f"IP:\t{spec.get('clusterIP') or ''}\n")
    w.write(0, f"IPs:\t{','.join(spec.get('clusterIPs') or ()) or '<none>'}\n")
    if spec.get("externalIPs"):
        w.write(0, f"External IPs:\t{','.join(spec['externalIPs'])}\n")
    if spec.get("loadBalancerIP"):
        w.write(0, f"IP:\t{spec['loadBalancerIP']}\n")
    if spec.get("externalName"):
        w.write(0, f"External Name:\t{spec['externalName']}\n")
    ingress = (status.get("loadBalancer") or {}).get("ingress") or ()
    if ingress:
        shown = [(i.get("ip") or i.get("hostname") or "") + (f" ({i['ipMode']})" if i.get("ipMode") else "")
                 for i in ingress]
        w.write(0, f"LoadBalancer Ingress:\t{', '.join(shown)}\n")
    for port in spec.get("ports") or ():
        name = port.get("name") or "<unset>"
        protocol = port.get("protocol") or "TCP"
        w.write(0, f"Port:\t{name}\t{port.get('port')}/{protocol}\n")
        w.write(0, f"TargetPort:\t{port.get('targetPort', port.get('port'))}/{protocol}\n")
        if port.get("nodePort"):
            w.write(0, f"NodePort:\t{name}\t{port['nodePort']}/{protocol}\n")
        w.write(0, f"Endpoints:\t{_slice_endpoints(ctx.endpoint_slices, port.get('name') or '')}\n")
    w.write(0, f"Session Affinity:\t{spec.get('sessionAffinity') or 'None'}\n")
    for key, title in (("externalTrafficPolicy", "External Traffic Policy"),
                       ("internalTrafficPolicy", "Internal Traffic Policy"),
                       ("healthCheckNodePort", "HealthCheck NodePort")):
        if spec.get(key):
            w.write(0, f"{title}:\t{spec[key]}\n")
    if spec.get("loadBalancerSourceRanges"):
        w.write(0, f"LoadBalancer Source Ranges:\t{','.join(spec['loadBalancerSourceRanges'])}\n")
    write_events(w, ctx.events, ctx.now)


def _slice_endpoints(slices: list[dict], port_name: str) -> str:
    """formatEndpointSlices: the ready `address:port`s of the slices' port of that name (three, `+ N more...`)."""
    if not slices:
        return "<none>"
    shown: list[str] = []
    more, count, limit = False, 0, 3
    for slice_ in slices:
        ports = slice_.get("ports") or ()
        pairs = [(None, e) for e in slice_.get("endpoints") or ()] if not ports else \
            [(p, e) for p in ports if (p.get("name") or "") == port_name for e in slice_.get("endpoints") or ()]
        for port, endpoint in pairs:
            if len(shown) == limit:
                more = True
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            address = str((endpoint.get("addresses") or [""])[0])
            if not more:
                if port is None:
                    shown.append(address)
                else:
                    host = f"[{address}]" if ":" in address else address
                    shown.append(f"{host}:{port.get('port')}")
            count += 1
    text = ",".join(shown)
    return f"{text} + {count - limit} more..." if more else text
