"""The everyday kinds of an app folder (issue 15, first slice): registered, scoped, named and validated as in
Kubernetes, and printed by `kctl get` with kubectl's columns; the kinds of later slices are still refused."""

from __future__ import annotations

import datetime as dt

import pytest

from kctl.admission.validation import validate
from kctl.machinery.resources import builtin_registry
from kctl.output.tables import TABLES

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.timezone.utc)
CREATED = "2026-01-01T11:55:00Z"

#: apiVersion, kind, plural, namespaced, short names (as `kubectl api-resources` lists them)
KINDS = [
    ("v1", "ServiceAccount", "serviceaccounts", True, ("sa",)),
    ("v1", "ResourceQuota", "resourcequotas", True, ("quota",)),
    ("v1", "LimitRange", "limitranges", True, ("limits",)),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", True, ()),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True, ()),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False, ()),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False, ()),
    ("networking.k8s.io/v1", "Ingress", "ingresses", True, ("ing",)),
    ("networking.k8s.io/v1", "IngressClass", "ingressclasses", False, ()),
    ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", True, ("netpol",)),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("pdb",)),
]


@pytest.mark.parametrize("api_version, kind, plural, namespaced, short", KINDS)
def test_kind_is_registered_as_kubernetes_has_it(api_version, kind, plural, namespaced, short):
    """Found by apiVersion+kind and by plural, singular and short names, with Kubernetes' scope."""
    registry = builtin_registry()
    rt = registry.for_object({"apiVersion": api_version, "kind": kind})
    assert (rt.plural, rt.namespaced, rt.short_names) == (plural, namespaced, short)
    for name in (plural, kind.lower(), kind, *short):
        assert registry.lookup(name) is rt


@pytest.mark.parametrize("api_version, kind, plural, namespaced, short", [
    ("apps/v1", "StatefulSet", "statefulsets", True, ("sts",)),
    ("apps/v1", "ControllerRevision", "controllerrevisions", True, ()),
    ("v1", "PersistentVolume", "persistentvolumes", False, ("pv",)),
    ("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ("pvc",)),
    ("storage.k8s.io/v1", "StorageClass", "storageclasses", False, ("sc",)),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True, ("hpa",)),
    ("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False, ("pc",)),
])
def test_state_and_scaling_kinds_are_served(api_version, kind, plural, namespaced, short):
    """The kinds of issue 15's later slices are served with kubectl's names and scope."""
    rt = builtin_registry().for_object({"apiVersion": api_version, "kind": kind})
    assert (rt.plural, rt.namespaced, rt.short_names) == (plural, namespaced, short)


#: a valid manifest of each kind (as `kubectl create ... --dry-run=client -o yaml` makes them)
GOOD = {
    "ServiceAccount": {},
    "ResourceQuota": {"spec": {"hard": {"cpu": "1", "limits.memory": "1Gi"}}},
    "LimitRange": {"spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}},
    "Role": {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    "RoleBinding": {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                    "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]},
    "ClusterRole": {"rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]},
    "ClusterRoleBinding": {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "c"},
                           "subjects": [{"kind": "ServiceAccount", "name": "x", "namespace": "default"}]},
    "Ingress": {"spec": {"ingressClassName": "nginx", "rules": [{"host": "a.example", "http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}},
    "IngressClass": {"spec": {"controller": "k8s.io/ingress-nginx"}},
    "NetworkPolicy": {"spec": {"podSelector": {}, "policyTypes": ["Ingress"]}},
    "PodDisruptionBudget": {"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}},
}


def _manifest(api_version: str, kind: str, body: dict, *, namespaced: bool) -> dict:
    meta = {"name": "x", "namespace": "default"} if namespaced else {"name": "x"}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **body}


@pytest.mark.parametrize("api_version, kind, plural, namespaced, short", KINDS)
def test_schema_accepts_a_good_manifest_and_names_a_bad_field(api_version, kind, plural, namespaced, short):
    """The kind has its Kubernetes schema: a good manifest passes, an unknown field is named by its path."""
    rt = builtin_registry().for_object({"apiVersion": api_version, "kind": kind})
    good = _manifest(api_version, kind, GOOD[kind], namespaced=namespaced)
    assert validate(good, rt) == []
    bad = dict(good, bogusField=1)
    assert [str(e) for e in validate(bad, rt)] == ['bogusField: unknown field "bogusField"']


def _row(group_kind: str, obj: dict, *, wide: bool = False) -> tuple[tuple[str, ...], list[str]]:
    table = TABLES[group_kind]
    obj.setdefault("metadata", {}).update(name="x", creationTimestamp=CREATED)
    return table.header(wide=wide), table.row(obj, wide, NOW)


@pytest.mark.parametrize("group_kind, obj, wide, header, row", [
    ("ServiceAccount", {"secrets": [{"name": "t"}]}, False, ("NAME", "SECRETS", "AGE"), ["x", "1", "5m"]),
    ("Role.rbac.authorization.k8s.io", {}, False, ("NAME", "CREATED AT"), ["x", CREATED]),
    ("ClusterRole.rbac.authorization.k8s.io", {}, False, ("NAME", "CREATED AT"), ["x", CREATED]),
    ("LimitRange", {}, False, ("NAME", "CREATED AT"), ["x", CREATED]),
    ("RoleBinding.rbac.authorization.k8s.io", {"roleRef": {"kind": "Role", "name": "r"}}, False,
     ("NAME", "ROLE", "AGE"), ["x", "Role/r", "5m"]),
    ("ClusterRoleBinding.rbac.authorization.k8s.io",
     {"roleRef": {"kind": "ClusterRole", "name": "c"},
      "subjects": [{"kind": "User", "name": "a"}, {"kind": "User", "name": "b"}, {"kind": "Group", "name": "g"},
                   {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}, True,
     ("NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"), ["x", "ClusterRole/c", "5m", "a, b", "g", "ns/sa"]),
    ("Ingress.networking.k8s.io", {"spec": {}}, False, ("NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"),
     ["x", "<none>", "*", "", "80", "5m"]),
    ("Ingress.networking.k8s.io",
     {"spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a"]}],
               "rules": [{"host": h} for h in "abcde"] + [{}]},
      "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}, {"hostname": "lb.example.com"}]}}}, False,
     ("NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"),
     ["x", "nginx", "a,b,c + 3 more...", "10.0.0.9,lb.e...", "80, 443", "5m"]),
    ("Ingress.networking.k8s.io",
     {"spec": {"rules": [{"host": "a"}, {"host": "b"}, {"host": "c"}]},
      "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}, {"hostname": "lb.example.com"}]}}}, True,
     ("NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"),
     ["x", "<none>", "a,b,c", "10.0.0.9,lb.example.com", "80", "5m"]),
    ("IngressClass.networking.k8s.io", {"spec": {"controller": "k8s.io/ingress-nginx"}}, False,
     ("NAME", "CONTROLLER", "PARAMETERS", "AGE"), ["x", "k8s.io/ingress-nginx", "<none>", "5m"]),
    ("IngressClass.networking.k8s.io",
     {"spec": {"controller": "c", "parameters": {"apiGroup": "k8s.example.com", "kind": "P", "name": "n"}}}, False,
     ("NAME", "CONTROLLER", "PARAMETERS", "AGE"), ["x", "c", "P.k8s.example.com/n", "5m"]),
    ("NetworkPolicy.networking.k8s.io", {"spec": {"podSelector": {"matchLabels": {"app": "web"}}}}, False,
     ("NAME", "POD-SELECTOR", "AGE"), ["x", "app=web", "5m"]),
    ("NetworkPolicy.networking.k8s.io", {"spec": {"podSelector": {}}}, False,
     ("NAME", "POD-SELECTOR", "AGE"), ["x", "<none>", "5m"]),
    ("PodDisruptionBudget.policy", {"spec": {"maxUnavailable": "25%"}, "status": {"disruptionsAllowed": 2}}, False,
     ("NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"), ["x", "N/A", "25%", "2", "5m"]),
    ("ResourceQuota",
     {"spec": {"hard": {"cpu": "1"}},
      "status": {"hard": {"pods": "10", "cpu": "1", "limits.cpu": "2"}, "used": {"cpu": "500m", "limits.cpu": "1"}}},
     False, ("NAME", "AGE", "REQUEST", "LIMIT"), ["x", "5m", "cpu: 500m/1, pods: 0/10", "limits.cpu: 1/2"]),
    ("ResourceQuota", {"spec": {"hard": {"cpu": "1"}}}, False, ("NAME", "AGE", "REQUEST", "LIMIT"),
     ["x", "5m", "", ""]),
])
def test_get_columns_are_kubectls(group_kind, obj, wide, header, row):
    """Each kind prints the columns and cells of kubectl's printer (pkg/printers/internalversion)."""
    assert _row(group_kind, obj, wide=wide) == (header, row)
