"""kubectl describe's layout for a NetworkPolicy, and kctl's line that it is not enforced.

After kubectl's describeNetworkPolicy: the pod selector, the ingress and egress rules
(ports, peers, `----------` between rules), the policy types. kctl stores NetworkPolicies
but its pod network does not enforce them yet (docs/kinds.md), so the spec ends with
`Enforced:  no ...`, a line kubectl does not print: a reader of a folder that relies on a
policy sees at once that it does not protect anything here.
"""

from __future__ import annotations

from kctl.output.cells import format_label_selector
from kctl.output.describe.context import Context
from kctl.output.describe.sections import rfc1123z, write_annotations, write_events, write_header, write_labels
from kctl.output.describe.writer import PrefixWriter

NOT_ENFORCED = "no (kctl's pod network does not enforce NetworkPolicies yet: every pod reaches every pod)"


def describe_network_policy(w: PrefixWriter, policy: dict, ctx: Context) -> None:
    meta, spec = policy.get("metadata") or {}, policy.get("spec") or {}
    write_header(w, meta)
    w.write(0, f"Created on:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, "Spec:\n")
    w.write(1, "PodSelector: ")
    selector = spec.get("podSelector") or {}
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        w.write(2, "<none> (Allowing the specific traffic to all pods in this namespace)\n")
    else:
        w.write(2, f"{format_label_selector(selector)}\n")
    ingress, egress = _policy_types(spec)
    if ingress:
        w.write(1, "Allowing ingress traffic:\n")
        _rules(w, spec.get("ingress") or [], peers="from", direction="ingress")
    else:
        w.write(1, "Not affecting ingress traffic\n")
    if egress:
        w.write(1, "Allowing egress traffic:\n")
        _rules(w, spec.get("egress") or [], peers="to", direction="egress")
    else:
        w.write(1, "Not affecting egress traffic\n")
    w.write(1, f"Policy Types: {', '.join(spec.get('policyTypes') or ())}\n")
    w.write(1, f"Enforced:     {NOT_ENFORCED}\n")
    write_events(w, ctx.events, ctx.now)


def _policy_types(spec: dict) -> tuple[bool, bool]:
    """kubectl's getPolicyType: without policyTypes, ingress always and egress when it has rules."""
    types = spec.get("policyTypes") or []
    if not types:
        return True, bool(spec.get("egress"))
    return "Ingress" in types, "Egress" in types


def _rules(w: PrefixWriter, rules: list[dict], *, peers: str, direction: str) -> None:
    """printNetworkPolicySpecIngressFrom / EgressTo, at kubectl's four-space indent."""
    indent = "    "
    title = "From" if peers == "from" else "To"
    if not rules:
        w.write(0, f"{indent}<none> (Selected pods are isolated for {direction} connectivity)\n")
        return
    for i, rule in enumerate(rules):
        ports = rule.get("ports") or []
        if not ports:
            w.write(0, f"{indent}To Port: <any> (traffic allowed to all ports)\n")
        for port in ports:
            w.write(0, f"{indent}To Port: {port.get('port', '<nil>')}/{port.get('protocol') or 'TCP'}\n")
        targets = rule.get(peers) or []
        if not targets:
            what = "source" if peers == "from" else "destination"
            w.write(0, f"{indent}{title}: <any> (traffic not restricted by {what})\n")
        for peer in targets:
            w.write(0, f"{indent}{title}:\n")
            if peer.get("namespaceSelector") is not None:
                w.write(1, f"{indent}NamespaceSelector: {format_label_selector(peer['namespaceSelector'])}\n")
            if peer.get("podSelector") is not None:
                w.write(1, f"{indent}PodSelector: {format_label_selector(peer['podSelector'])}\n")
            if peer.get("ipBlock") is not None and peer.get("podSelector") is None \
                    and peer.get("namespaceSelector") is None:
                block = peer["ipBlock"]
                w.write(1, f"{indent}IPBlock:\n")
                w.write(2, f"{indent}CIDR: {block.get('cidr', '')}\n")
                w.write(2, f"{indent}Except: {', '.join(block.get('except') or ())}\n")
        if i != len(rules) - 1:
            w.write(0, f"{indent}----------\n")


__all__ = ["NOT_ENFORCED", "describe_network_policy"]
