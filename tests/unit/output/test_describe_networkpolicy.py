"""`describe networkpolicy` as kubectl lays it out (describeNetworkPolicy), plus kctl's line that it is not enforced."""

from __future__ import annotations

from datetime import datetime, timezone

from kctl.machinery.resources import builtin_registry
from kctl.output.describe import describe
from kctl.output.describe.networkpolicy import NOT_ENFORCED

NOW = datetime(2026, 12, 4, 17, 0, 0, tzinfo=timezone.utc)


def _policy(spec: dict) -> dict:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "db", "namespace": "default", "creationTimestamp": "2026-12-04T16:00:00Z"},
            "spec": spec}


def _spec_lines(spec: dict) -> list[str]:
    text = describe(_policy(spec), builtin_registry().lookup("netpol"), [], now=NOW)
    lines = text.splitlines()
    return lines[lines.index("Spec:") + 1:]


def test_rules_ports_peers_and_the_not_enforced_line():
    """Selector, each rule's ports and peers (namespace then pod selector, an ipBlock), rules apart by dashes."""
    spec = {"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}},
                                   "namespaceSelector": {"matchLabels": {"team": "a"}}}],
                         "ports": [{"port": 5432}]},
                        {"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}],
            "egress": []}
    assert _spec_lines(spec)[:-1] == [
        "  PodSelector:     app=db",
        "  Allowing ingress traffic:",
        "    To Port: 5432/TCP",
        "    From:",
        "      NamespaceSelector: team=a",
        "      PodSelector: app=web",
        "    ----------",
        "    To Port: <any> (traffic allowed to all ports)",
        "    From:",
        "      IPBlock:",
        "        CIDR: 10.0.0.0/8",
        "        Except: 10.1.0.0/16",
        "  Allowing egress traffic:",
        "    <none> (Selected pods are isolated for egress connectivity)",
        "  Policy Types: Ingress, Egress",
        f"  Enforced:     {NOT_ENFORCED}",
    ]


def test_an_empty_selector_and_no_policy_types():
    """No policyTypes: ingress is affected, egress only with rules; an empty selector means every pod."""
    lines = _spec_lines({"podSelector": {}, "ingress": [{}]})
    assert lines[:5] == [
        "  PodSelector:     <none> (Allowing the specific traffic to all pods in this namespace)",
        "  Allowing ingress traffic:",
        "    To Port: <any> (traffic allowed to all ports)",
        "    From: <any> (traffic not restricted by source)",
        "  Not affecting egress traffic",
    ]
    assert any(line.startswith("  Enforced:     no ") for line in lines)
