"""The default RBAC policy: the ClusterRoles and ClusterRoleBindings every cluster starts with.

As Kubernetes' bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy) for what kctl serves:
the user-facing roles cluster-admin, admin, edit and view (admin/edit/view are aggregated from the
`system:aggregate-to-*` roles and any ClusterRole labelled `rbac.authorization.k8s.io/aggregate-to-*:
"true"`, by kctl.controllers.clusterroleaggregation), system:basic-user (the access reviews),
system:discovery and system:public-info-viewer (discovery, health, version), and their bindings:
cluster-admin to the group system:masters, basic-user and discovery to system:authenticated,
public-info-viewer to system:authenticated and system:unauthenticated.

`ensure(api)` writes them when the control plane starts (kctl.controllers.rbacbootstrap, registered in
kctl/daemon/controllers.py as "rbac-bootstrap"), as kube-apiserver's `rbac/bootstrap-roles` post-start
hook reconciles them: a missing object is created; one annotated `rbac.authorization.kubernetes.io/autoupdate:
"true"` gets what it lacks (rules, aggregation selectors, labels, annotations, binding subjects) added,
never removed; one whose annotation is anything else is the user's and left alone. Running it twice
writes nothing the second time.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING

from kctl.machinery.errors import AlreadyExists, Conflict, NotFound

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.apiserver.bootstrappolicy")

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API_VERSION = f"{RBAC_GROUP}/v1"
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
BOOTSTRAPPING_LABEL = "kubernetes.io/bootstrapping"
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
READ_WRITE = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _rule(verbs: list[str], groups: list[str], resources: list[str]) -> dict:
    return {"apiGroups": groups, "resources": resources, "verbs": list(verbs)}


def _paths(verbs: list[str], urls: list[str]) -> dict:
    return {"nonResourceURLs": urls, "verbs": list(verbs)}


def _role(name: str, rules: list[dict] | None = None, *, labels: dict | None = None,
          aggregate_from: str | None = None) -> dict:
    role: dict = {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRole",
                  "metadata": {"name": name, "labels": {BOOTSTRAPPING_LABEL: "rbac-defaults", **(labels or {})},
                               "annotations": {AUTOUPDATE: "true"}}}
    if aggregate_from:
        role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE_TO + aggregate_from: "true"}}]}
    role["rules"] = rules or []
    return role


def _binding(name: str, role: str, groups: list[str]) -> dict:
    return {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {BOOTSTRAPPING_LABEL: "rbac-defaults"},
                         "annotations": {AUTOUPDATE: "true"}},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups]}


_DISCOVERY_URLS = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
                   "/readyz", "/version", "/version/"]
_PUBLIC_INFO_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]

_VIEW_RULES = [
    _rule(READ, [""], ["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods",
                       "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                       "services/status"]),
    _rule(READ, [""], ["bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
                       "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"]),
    _rule(READ, [""], ["namespaces"]),
    _rule(READ, ["discovery.k8s.io"], ["endpointslices"]),
    _rule(READ, ["apps"], ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
                           "deployments/scale", "deployments/status", "replicasets", "replicasets/scale",
                           "replicasets/status", "statefulsets", "statefulsets/scale", "statefulsets/status"]),
    _rule(READ, ["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
    _rule(READ, ["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
    _rule(READ, ["extensions"], ["daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                                 "deployments/status", "ingresses", "ingresses/status", "networkpolicies",
                                 "replicasets", "replicasets/scale", "replicasets/status",
                                 "replicationcontrollers/scale"]),
    _rule(READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
    _rule(READ, ["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"]),
]

_EDIT_RULES = [
    _rule(READ, [""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"]),
    _rule(["impersonate"], [""], ["serviceaccounts"]),
    _rule(WRITE, [""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"]),
    _rule(["create"], [""], ["pods/eviction"]),
    _rule(WRITE, [""], ["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
                        "replicationcontrollers/scale", "secrets", "serviceaccounts", "services",
                        "services/proxy"]),
    _rule(["create"], [""], ["serviceaccounts/token"]),
    _rule(WRITE, ["apps"], ["daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets",
                            "replicasets/scale", "statefulsets", "statefulsets/scale"]),
    _rule(WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
    _rule(WRITE, ["batch"], ["cronjobs", "jobs"]),
    _rule(WRITE, ["extensions"], ["daemonsets", "deployments", "deployments/rollback", "deployments/scale",
                                  "ingresses", "networkpolicies", "replicasets", "replicasets/scale",
                                  "replicationcontrollers/scale"]),
    _rule(WRITE, ["policy"], ["poddisruptionbudgets"]),
    _rule(WRITE, ["networking.k8s.io"], ["ingresses", "networkpolicies"]),
    _rule(READ_WRITE, ["coordination.k8s.io"], ["leases"]),
]

_ADMIN_RULES = [
    _rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
    _rule(READ_WRITE, [RBAC_GROUP], ["rolebindings", "roles"]),
]


def cluster_roles() -> list[dict]:
    """The default ClusterRoles (fresh copies)."""
    return [
        _role("cluster-admin", [_rule(["*"], ["*"], ["*"]), _paths(["*"], ["*"])]),
        _role("admin", aggregate_from="admin"),
        _role("edit", labels={AGGREGATE_TO + "admin": "true"}, aggregate_from="edit"),
        _role("view", labels={AGGREGATE_TO + "edit": "true"}, aggregate_from="view"),
        _role("system:aggregate-to-admin", copy.deepcopy(_ADMIN_RULES), labels={AGGREGATE_TO + "admin": "true"}),
        _role("system:aggregate-to-edit", copy.deepcopy(_EDIT_RULES), labels={AGGREGATE_TO + "edit": "true"}),
        _role("system:aggregate-to-view", copy.deepcopy(_VIEW_RULES), labels={AGGREGATE_TO + "view": "true"}),
        _role("system:basic-user", [
            _rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
            _rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"])]),
        _role("system:discovery", [_paths(["get"], list(_DISCOVERY_URLS))]),
        _role("system:public-info-viewer", [_paths(["get"], list(_PUBLIC_INFO_URLS))]),
    ]


def cluster_role_bindings() -> list[dict]:
    """The default ClusterRoleBindings (fresh copies)."""
    return [
        _binding("cluster-admin", "cluster-admin", ["system:masters"]),
        _binding("system:basic-user", "system:basic-user", ["system:authenticated"]),
        _binding("system:discovery", "system:discovery", ["system:authenticated"]),
        _binding("system:public-info-viewer", "system:public-info-viewer",
                 ["system:authenticated", "system:unauthenticated"]),
    ]


def policy() -> list[dict]:
    """Every default object, roles first."""
    return cluster_roles() + cluster_role_bindings()


# -- reconciling ------------------------------------------------------------------------------------

def reconciled(existing: dict, wanted: dict) -> dict | None:
    """`existing` with what it lacks of `wanted` added (None: nothing to add, or not ours to change)."""
    meta = existing.get("metadata") or {}
    if (meta.get("annotations") or {}).get(AUTOUPDATE) != "true":
        return None
    out = copy.deepcopy(existing)
    out_meta = out.setdefault("metadata", {})
    changed = False
    for key in ("labels", "annotations"):
        have = out_meta.setdefault(key, {}) if wanted["metadata"].get(key) else out_meta.get(key)
        for k, v in (wanted["metadata"].get(key) or {}).items():
            if k not in have:
                have[k] = v
                changed = True
    if wanted["kind"] == "ClusterRole":
        if "aggregationRule" in wanted:
            rule = out.setdefault("aggregationRule", {})
            selectors = rule.setdefault("clusterRoleSelectors", [])
            for selector in wanted["aggregationRule"]["clusterRoleSelectors"]:
                if selector not in selectors:
                    selectors.append(copy.deepcopy(selector))
                    changed = True
        else:  # an aggregated role's rules are the aggregation controller's
            rules = out.setdefault("rules", [])
            for rule in wanted.get("rules") or []:
                if not any(_covers(have, rule) for have in rules):
                    rules.append(copy.deepcopy(rule))
                    changed = True
    else:
        subjects = out.setdefault("subjects", [])
        for subject in wanted.get("subjects") or []:
            if not any(_same_subject(s, subject) for s in subjects):
                subjects.append(copy.deepcopy(subject))
                changed = True
    return out if changed else None


def _covers(have: dict, rule: dict) -> bool:
    """`have` is the same rule as `rule` (each field compared as a set)."""
    fields = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")
    return all(set(have.get(f) or []) == set(rule.get(f) or []) for f in fields)


def _same_subject(a: dict, b: dict) -> bool:
    return (a.get("kind"), a.get("name"), a.get("namespace") or "") == (b.get("kind"), b.get("name"),
                                                                         b.get("namespace") or "")


def ensure(api: API) -> list[str]:
    """Create the missing default objects and complete the auto-updated ones; the `Kind/name`s written."""
    written: list[str] = []
    for wanted in policy():
        rt = api.resource_for(wanted)
        name = wanted["metadata"]["name"]
        try:
            existing = api.find(rt, name)
            if existing is None:
                api.create(wanted)
            else:
                update = reconciled(existing, wanted)
                if update is None:
                    continue
                api.update(update)
            written.append(f"{wanted['kind']}/{name}")
        except (AlreadyExists, Conflict, NotFound) as exc:  # another writer raced us: the next start completes it
            log.info("default RBAC %s/%s: %s", wanted["kind"], name, exc)
    if written:
        log.info("default RBAC policy: wrote %s", ", ".join(written))
    return written


__all__ = ["AGGREGATE_TO", "AUTOUPDATE", "cluster_role_bindings", "cluster_roles", "ensure", "policy", "reconciled"]
