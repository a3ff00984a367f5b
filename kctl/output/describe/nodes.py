"""kubectl describe's layout for a Node: roles, taints, conditions, addresses, capacity,
allocatable, system info, pod CIDRs and events.

One entry of the kind -> describer table in kctl.output.describe.
"""

from __future__ import annotations

from kctl.output.describe.context import Context
from kctl.output.describe.sections import (rfc1123z, write_annotations, write_events, write_header, write_labels,
                                           write_taints)
from kctl.output.describe.writer import PrefixWriter
from kctl.output.tables import node_roles

__all__ = ["describe_node"]


def describe_node(w: PrefixWriter, node: dict, ctx: Context) -> None:
    """kubectl's describeNode (without the non-terminated pods and allocated resources tables)."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    write_header(w, meta, namespace=False)
    w.write(0, f"Roles:\t{','.join(node_roles(node)) or '<none>'}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    write_taints(w, "Taints", spec.get("taints"))
    w.write(0, f"Unschedulable:\t{'true' if spec.get('unschedulable') else 'false'}\n")
    conditions = status.get("conditions") or ()
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n")
        w.write(1, "----\t------\t-----------------\t------------------\t------\t-------\n")
        for c in conditions:
            w.write(1, f"{c.get('type', '')} \t{c.get('status', '')} \t"
                       f"{rfc1123z(c.get('lastHeartbeatTime'))} \t{rfc1123z(c.get('lastTransitionTime'))} \t"
                       f"{c.get('reason', '')} \t{c.get('message', '')}\n")
    w.write(0, "Addresses:\n")
    for a in status.get("addresses") or ():
        w.write(1, f"{a.get('type', '')}:\t{a.get('address', '')}\n")
    for title, key in (("Capacity", "capacity"), ("Allocatable", "allocatable")):
        if status.get(key):
            w.write(0, f"{title}:\n")
            for name in sorted(status[key]):
                w.write(0, f"  {name}:\t{status[key][name]}\n")
    info = status.get("nodeInfo") or {}
    w.write(0, "System Info:\n")
    for title, key in (("Machine ID", "machineID"), ("System UUID", "systemUUID"), ("Boot ID", "bootID"),
                       ("Kernel Version", "kernelVersion"), ("OS Image", "osImage"),
                       ("Operating System", "operatingSystem"), ("Architecture", "architecture"),
                       ("Container Runtime Version", "containerRuntimeVersion"),
                       ("Kubelet Version", "kubeletVersion"), ("Kube-Proxy Version", "kubeProxyVersion")):
        w.write(0, f"  {title}:\t{info.get(key, '')}\n")
    if spec.get("podCIDR"):
        w.write(0, f"PodCIDR:\t{spec['podCIDR']}\n")
    if spec.get("podCIDRs"):
        w.write(0, f"PodCIDRs:\t{','.join(spec['podCIDRs'])}\n")
    if spec.get("providerID"):
        w.write(0, f"ProviderID:\t{spec['providerID']}\n")
    write_events(w, ctx.events, ctx.now)
