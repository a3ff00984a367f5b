"""kubectl describe's layout for a Pod: status, IPs, controller, containers, conditions, volumes,
QoS class, node selectors, tolerations and events.

One entry of the kind -> describer table in kctl.output.describe; the container and volume
sections come from podspec.py.
"""

from __future__ import annotations

from kctl.output.cells import age
from kctl.output.describe.context import Context
from kctl.output.describe.podspec import env_resolver, qos_class, write_containers, write_volumes
from kctl.output.describe.sections import (controller_of, rfc1123z, write_annotations, write_events, write_header,
                                           write_labels, write_tolerations)
from kctl.output.describe.writer import PrefixWriter

__all__ = ["describe_pod"]


def describe_pod(w: PrefixWriter, pod: dict, ctx: Context) -> None:
    """kubectl's describePod; the scheduler's reason as `Message:` when the pod is unschedulable."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    write_header(w, meta)
    if spec.get("priority") is not None:
        w.write(0, f"Priority:\t{spec['priority']}\n")
    if spec.get("priorityClassName"):
        w.write(0, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    if spec.get("serviceAccountName"):
        w.write(0, f"Service Account:\t{spec['serviceAccountName']}\n")
    node = spec.get("nodeName")
    w.write(0, f"Node:\t{node}/{status.get('hostIP', '')}\n" if node else "Node:\t<none>\n")
    if status.get("startTime"):
        w.write(0, f"Start Time:\t{rfc1123z(status['startTime'])}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    phase = status.get("phase", "")
    if meta.get("deletionTimestamp") and phase not in ("Failed", "Succeeded"):
        w.write(0, f"Status:\tTerminating (lasts {age(meta['deletionTimestamp'], ctx.now)})\n")
        grace = meta.get("deletionGracePeriodSeconds", spec.get("terminationGracePeriodSeconds", 30))
        w.write(0, f"Termination Grace Period:\t{grace}s\n")
    else:
        w.write(0, f"Status:\t{phase}\n")
    if status.get("reason"):
        w.write(0, f"Reason:\t{status['reason']}\n")
    message = status.get("message") or ""
    if not message:
        # Not in kubectl: the scheduler's reason, visible without reading events.
        for c in status.get("conditions") or ():
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message"):
                message = c["message"]
    if message:
        w.write(0, f"Message:\t{message}\n")
    w.write(0, f"IP:\t{status.get('podIP', '')}\n")
    ips = status.get("podIPs") or ()
    if ips:
        w.write(0, "IPs:\n")
        for ip in ips:
            w.write(1, f"IP:\t{ip.get('ip', '')}\n")
    else:
        w.write(0, "IPs:\t<none>\n")
    controller = controller_of(pod)
    if controller:
        w.write(0, f"Controlled By:\t{controller}\n")
    if status.get("nominatedNodeName"):
        w.write(0, f"NominatedNodeName:\t{status['nominatedNodeName']}\n")
    resolve = env_resolver(pod)
    if spec.get("initContainers"):
        write_containers(w, "Init Containers", spec["initContainers"], status.get("initContainerStatuses"),
                         resolve, "")
    write_containers(w, "Containers", spec.get("containers"), status.get("containerStatuses"), resolve, "")
    gates = spec.get("readinessGates") or ()
    conditions = status.get("conditions") or ()
    if gates:
        w.write(0, "Readiness Gates:\n  Type\tStatus\n")
        by_type = {c.get("type"): c.get("status") for c in conditions}
        for g in gates:
            w.write(1, f"{g.get('conditionType', '')} \t{by_type.get(g.get('conditionType'), '<none>')} \n")
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\n")
        for c in conditions:
            w.write(1, f"{c.get('type', '')} \t{c.get('status', '')} \n")
    write_volumes(w, spec.get("volumes"), "")
    w.write(0, f"QoS Class:\t{status.get('qosClass') or qos_class(spec)}\n")
    write_labels(w, "Node-Selectors", spec.get("nodeSelector"))
    write_tolerations(w, "Tolerations", spec.get("tolerations"))
    write_events(w, ctx.events, ctx.now)
