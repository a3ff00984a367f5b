"""An app folder's everyday kinds as `kubectl create ... --dry-run=client -o yaml` makes them (ServiceAccount, RBAC,
Ingress, PodDisruptionBudget, ResourceQuota, ...) apply, list with kubectl's columns, describe and delete."""

from __future__ import annotations

import pytest

#: `kubectl create serviceaccount|role|rolebinding|clusterrole|clusterrolebinding|ingress|poddisruptionbudget|quota
#: ... --dry-run=client -o yaml` (kubectl 1.3x), plus the kinds kubectl has no `create` for
FOLDER = """\
apiVersion: v1
kind: ServiceAccount
metadata:
  creationTimestamp: null
  name: x
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  creationTimestamp: null
  name: r
rules:
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  creationTimestamp: null
  name: rb
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: r
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: alice
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: devs
- kind: ServiceAccount
  name: x
  namespace: default
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  creationTimestamp: null
  name: cr
rules:
- apiGroups:
  - ""
  resources:
  - nodes
  verbs:
  - get
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  creationTimestamp: null
  name: crb
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cr
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: bob
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  creationTimestamp: null
  name: ing
spec:
  ingressClassName: nginx
  rules:
  - host: foo.com
    http:
      paths:
      - backend:
          service:
            name: svc1
            port:
              number: 8080
        path: /bar
        pathType: Exact
  tls:
  - hosts:
    - foo.com
    secretName: my-cert
status:
  loadBalancer: {}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  creationTimestamp: null
  name: pdb
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: web
status:
  currentHealthy: 0
  desiredHealthy: 0
  disruptionsAllowed: 0
  expectedPods: 0
---
apiVersion: v1
kind: ResourceQuota
metadata:
  creationTimestamp: null
  name: q
spec:
  hard:
    cpu: "1"
    limits.cpu: "2"
    memory: 1G
status: {}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: v1
kind: LimitRange
metadata: {name: lr}
spec:
  limits:
  - type: Container
    default: {cpu: 500m}
"""

CREATED = [
    "serviceaccount/x created", "role.rbac.authorization.k8s.io/r created",
    "rolebinding.rbac.authorization.k8s.io/rb created", "clusterrole.rbac.authorization.k8s.io/cr created",
    "clusterrolebinding.rbac.authorization.k8s.io/crb created", "ingress.networking.k8s.io/ing created",
    "poddisruptionbudget.policy/pdb created", "resourcequota/q created",
    "ingressclass.networking.k8s.io/nginx created", "networkpolicy.networking.k8s.io/deny created",
    "limitrange/lr created",
]


def _cells(out: str) -> list[list[str]]:
    """The table's lines split on runs of two or more spaces."""
    import re

    return [re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if line.strip()]


def test_the_folder_applies(kctl):
    """Every document is created, in order, and a second apply changes nothing."""
    result = kctl("apply", "-f", "-", input=FOLDER)
    assert (result.code, result.err) == (0, "")
    assert sorted(result.out.splitlines()) == sorted(CREATED)
    again = kctl("apply", "-f", "-", input=FOLDER)
    assert again.code == 0 and all(line.endswith(" unchanged") for line in again.out.splitlines())


@pytest.mark.parametrize("resource, name, header, row", [
    ("sa", "x", ["NAME", "SECRETS", "AGE"], ["x", "0"]),
    ("roles", "r", ["NAME", "CREATED AT"], ["r"]),
    ("rolebinding", "rb", ["NAME", "ROLE", "AGE"], ["rb", "Role/r"]),
    ("clusterrole", "cr", ["NAME", "CREATED AT"], ["cr"]),
    ("clusterrolebindings", "crb", ["NAME", "ROLE", "AGE"], ["crb", "ClusterRole/cr"]),
    ("ing", "ing", ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"], ["ing", "nginx", "foo.com", "80, 443"]),
    ("ingressclass", "nginx", ["NAME", "CONTROLLER", "PARAMETERS", "AGE"], ["nginx", "k8s.io/ingress-nginx", "<none>"]),
    ("netpol", "deny", ["NAME", "POD-SELECTOR", "AGE"], ["deny", "<none>"]),
    ("pdb", "pdb", ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"],
     ["pdb", "1", "N/A", "0"]),
    ("quota", "q", ["NAME", "AGE", "REQUEST", "LIMIT"], ["q"]),
    ("limits", "lr", ["NAME", "CREATED AT"], ["lr"]),
])
def test_get_by_short_name_with_kubectls_columns(kctl, resource, name, header, row):
    """`kctl get SHORTNAME` prints kubectl's header and the object's cells; describe and delete find it too."""
    assert kctl("apply", "-f", "-", input=FOLDER).code == 0
    result = kctl("get", resource)
    assert result.code == 0, result.err
    lines = _cells(result.out)
    assert lines[0] == header
    assert lines[1][:len(row)] == row
    described = kctl("describe", resource, name)
    assert described.code == 0 and "Name:" in described.out and name in described.out
    deleted = kctl("delete", resource, name)
    assert deleted.code == 0 and deleted.out.endswith(" deleted\n")
    assert kctl("get", resource, name).code != 0


def test_rolebinding_wide_lists_subjects(kctl):
    """`-o wide` adds USERS, GROUPS and SERVICEACCOUNTS (namespace/name)."""
    assert kctl("apply", "-f", "-", input=FOLDER).code == 0
    lines = _cells(kctl("get", "rolebinding", "rb", "-o", "wide").out)
    assert lines[0] == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert lines[1][:2] == ["rb", "Role/r"] and lines[1][3:] == ["alice", "devs", "default/x"]


def test_cluster_scoped_kinds_ignore_the_namespace(kctl):
    """ClusterRole, ClusterRoleBinding and IngressClass are cluster-scoped: found from any namespace."""
    assert kctl("apply", "-f", "-", input=FOLDER).code == 0
    for resource in ("clusterrole/cr", "clusterrolebinding/crb", "ingressclass/nginx"):
        assert kctl("get", resource, "-n", "other", "-o", "name").code == 0, resource
    assert kctl("get", "role/r", "-n", "kube-system").code != 0, "a Role is namespaced"


@pytest.mark.parametrize("doc, message", [
    ("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: bad}\nspec: {minAvailabel: 1}\n",
     'spec.minAvailabel: unknown field "minAvailabel"'),
    ("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: bad}\nrules: [{verbs: get}]\n",
     "rules[0].verbs"),
    ("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: bad}\nspec: {rules: {host: a}}\n",
     "spec.rules"),
])
def test_a_bad_field_is_one_clear_line(kctl, doc, message):
    """Schema validation as for other kinds: one line naming the document and field, non-zero exit."""
    result = kctl("apply", "-f", "-", input=doc)
    assert result.code != 0
    assert len(result.err.strip().splitlines()) == 1 and message in result.err
    assert "Traceback" not in result.err


def test_an_unknown_kind_is_refused_as_kubectl_refuses_it(kctl):
    """A kind kctl does not serve keeps kubectl's `no matches for kind` refusal."""
    doc = "apiVersion: storage.k8s.io/v1\nkind: VolumeAttachment\nmetadata: {name: va}\nspec: {}\n"
    result = kctl("apply", "-f", "-", input=doc)
    assert result.code != 0 and 'no matches for kind "VolumeAttachment" in version "storage.k8s.io/v1"' in result.err
