"""kctl.admission.validation: schema and semantic validation of built-in kinds, custom resources and CRDs."""

from __future__ import annotations

import copy

import pytest

from kctl.admission.validation import validate, validate_crd
from kctl.machinery.crd import crd_resource_types
from kctl.machinery.resources import Registry, builtin_registry

REGISTRY = builtin_registry()

POD_SPEC = {
    "containers": [{
        "name": "app", "image": "nginx:1.27",
        "ports": [{"containerPort": 80, "name": "http"}],
        "env": [{"name": "MODE", "value": "prod"},
                {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "key"}}}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": 1, "memory": "128Mi"}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
        "readinessProbe": {"tcpSocket": {"port": 80}, "initialDelaySeconds": 2},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }, {
        "name": "sidecar", "image": "busybox", "command": ["sh", "-c", "sleep 3600"],
        "resources": {"limits": {"memory": "32Mi"}},
    }],
    "volumes": [{"name": "data", "emptyDir": {}}],
}


def deployment() -> dict:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": "web", "tier": "frontend"}},
                         "spec": copy.deepcopy(POD_SPEC)},
        },
    }


def crd() -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A Widget is a thing made by the widget factory.",
                    "properties": {
                        "spec": {
                            "type": "object", "required": ["size"],
                            "description": "What the widget should be.",
                            "properties": {
                                "size": {"type": "integer", "minimum": 1, "description": "How big."},
                                "color": {"type": "string", "enum": ["red", "blue"], "description": "Its color."},
                                "port": {"x-kubernetes-int-or-string": True, "description": "A port."},
                                "note": {"type": "string", "nullable": True, "description": "Free text."},
                                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                          "description": "Anything."},
                                "tags": {"type": "object", "additionalProperties": {"type": "string"},
                                         "description": "Tags."},
                                "parts": {"type": "array", "items": {
                                    "type": "object", "properties": {"name": {"type": "string"}}}},
                            },
                        },
                        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                    },
                }},
            }, {
                "name": "v1beta1", "served": False, "storage": False,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }],
        },
    }


def hook(kind: str) -> dict:
    return {
        "apiVersion": "kctl.io/v1alpha1", "kind": kind, "metadata": {"name": "deny-latest"},
        "spec": {
            "command": ["/usr/local/bin/deny-latest", "--strict"],
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["", "apps"], "apiVersions": ["v1"],
                       "resources": ["pods", "deployments"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {"team": "a"}},
            "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
            "timeoutSeconds": 5, "failurePolicy": "Ignore",
            "env": [{"name": "LOG", "value": "debug"}],
        },
    }


VALID = {
    "Namespace": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "dev"}}},
    "Node": {"apiVersion": "v1", "kind": "Node",
             "metadata": {"name": "host1.example.com", "labels": {"kubernetes.io/hostname": "host1"}},
             "spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]},
             "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": 110},
                        "conditions": [{"type": "Ready", "status": "True"}]}},
    "Pod": {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "uid": "0b1c", "resourceVersion": "7",
                         "creationTimestamp": "2024-05-01T10:00:00Z", "generation": 1},
            "spec": {**copy.deepcopy(POD_SPEC), "restartPolicy": "OnFailure", "nodeSelector": {"disk": "ssd"}},
            "status": {"phase": "Running", "podIP": "10.88.0.5"}},
    "Service": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}, "type": "ClusterIP",
                         "ports": [{"name": "http", "port": 80, "targetPort": "http"},
                                   {"name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP"}]}},
    "Endpoints": {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"},
                  "subsets": [{"addresses": [{"ip": "10.88.0.5"}], "ports": [{"port": 80, "name": "http"}]}]},
    "ConfigMap": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                  "data": {"app.conf": "a=1\n", "MODE": "prod"}},
    "Secret": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "type": "Opaque",
               "data": {"key": "c2VjcmV0"}, "stringData": {"user": "admin"}},
    "Event": {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "web-1.17a2b3c4d5e6f7a8", "namespace": "default"},
              "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"},
              "reason": "Scheduled", "message": "Assigned default/web-1 to host1", "type": "Normal", "count": 1},
    "Deployment": deployment(),
    "ReplicaSet": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-5d9f"},
                   "spec": {"replicas": 2, "selector": {"matchExpressions": [
                       {"key": "app", "operator": "In", "values": ["web"]}]},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}},
    "DaemonSet": {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
                  "spec": {"selector": {"matchLabels": {"app": "agent"}},
                           "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
                           "template": {"metadata": {"labels": {"app": "agent"}},
                                        "spec": {"containers": [{"name": "agent", "image": "agent:1"}],
                                                 "tolerations": [{"operator": "Exists"}]}}}},
    "Job": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
            "spec": {"backoffLimit": 2, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "migrate", "image": "app:1", "args": ["migrate"]}]}}}},
    "CronJob": {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "backup"},
                "spec": {"schedule": "*/15 * * * *", "concurrencyPolicy": "Forbid",
                         "jobTemplate": {"spec": {"template": {"spec": {
                             "restartPolicy": "OnFailure",
                             "containers": [{"name": "backup", "image": "backup:2"}]}}}}}},
    "Lease": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
              "metadata": {"name": "host1", "namespace": "kube-node-lease"},
              "spec": {"holderIdentity": "host1", "leaseDurationSeconds": 40,
                       "renewTime": "2024-05-01T10:00:00.000000Z"}},
    "ServiceCIDR": {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "extra"},
                    "spec": {"cidrs": ["10.97.0.0/24"]}},
    "IPAddress": {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "10.96.0.20"},
                  "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default",
                                         "name": "web"}}},
    "EndpointSlice": {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                      "metadata": {"name": "web-abcde", "labels": {"kubernetes.io/service-name": "web"}},
                      "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                      "endpoints": [{"addresses": ["10.244.1.2"], "nodeName": "h1",
                                     "conditions": {"ready": True, "serving": True, "terminating": False}}]},
    "CustomResourceDefinition": crd(),
    "MutatingAdmissionHook": hook("MutatingAdmissionHook"),
    "ValidatingAdmissionHook": hook("ValidatingAdmissionHook"),
    "GitSource": {"apiVersion": "kctl.io/v1alpha1", "kind": "GitSource",
                  "metadata": {"name": "apps", "namespace": "default"},
                  "spec": {"url": "https://git.example.com/team/apps.git", "branch": "main", "path": "deploy",
                           "interval": "1m", "prune": True, "dependsOn": [{"name": "infra"}]}},
    # issue 15's everyday kinds (stored; see docs/kinds.md)
    "ServiceAccount": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app"},
                       "automountServiceAccountToken": False},
    "ResourceQuota": {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                      "spec": {"hard": {"cpu": "2", "limits.memory": "4Gi", "pods": "10"}}},
    "LimitRange": {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr"},
                   "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}},
    "Role": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
             "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]},
    "RoleBinding": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                    "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "default"}]},
    "ClusterRole": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "cr"},
                    "rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]},
    "ClusterRoleBinding": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                           "metadata": {"name": "crb"},
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cr"},
                           "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ops"}]},
    "Ingress": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
                "spec": {"rules": [{"host": "web.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}},
    "IngressClass": {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "nginx"},
                     "spec": {"controller": "k8s.io/ingress-nginx"}},
    "NetworkPolicy": {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "np"},
                      "spec": {"podSelector": {"matchLabels": {"app": "db"}},
                               "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}],
                                            "ports": [{"port": 5432}]}]}},
    "PodDisruptionBudget": {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
                            "spec": {"maxUnavailable": "25%", "selector": {"matchLabels": {"app": "web"}}}},
    "StatefulSet": {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
                    "spec": {"serviceName": "db", "replicas": 3, "selector": {"matchLabels": {"app": "db"}},
                             "template": {"metadata": {"labels": {"app": "db"}},
                                          "spec": {"containers": [{"name": "db", "image": "busybox"}]}},
                             "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                                 "accessModes": ["ReadWriteOnce"],
                                 "resources": {"requests": {"storage": "1Gi"}}}}]}},
    "ControllerRevision": {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "db-1"},
                           "revision": 1, "data": {"spec": {"template": {}}}},
    "PersistentVolume": {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
                         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                  "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/srv/data"}}},
    "PersistentVolumeClaim": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                              "spec": {"accessModes": ["ReadWriteOnce"],
                                       "resources": {"requests": {"storage": "1Gi"}}}},
    "StorageClass": {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
                     "provisioner": "kctl.io/local-volume", "reclaimPolicy": "Delete",
                     "volumeBindingMode": "WaitForFirstConsumer"},
    "HorizontalPodAutoscaler": {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 2, "maxReplicas": 5,
                 "metrics": [{"type": "Resource", "resource": {
                     "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]}},
    "PriorityClass": {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                      "value": 1000, "preemptionPolicy": "PreemptLowerPriority"},
    "PodMetrics": {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                   "metadata": {"name": "web", "labels": {"app": "web"}}, "timestamp": "2026-12-04T22:00:00Z",
                   "window": "15s", "containers": [{"name": "app", "usage": {"cpu": "12345n", "memory": "3Mi"}}]},
    "NodeMetrics": {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": "h1"},
                    "timestamp": "2026-12-04T22:00:00Z", "window": "15s",
                    "usage": {"cpu": "329087452n", "memory": "2748180Ki"}},
}


def errors_of(obj: dict, registry: Registry = REGISTRY) -> list[str]:
    return [str(e) for e in validate(obj, registry.for_object(obj))]


def test_every_builtin_kind_has_a_valid_example():
    """The table below covers every built-in kind."""
    assert {rt.kind for rt in REGISTRY} == set(VALID)


@pytest.mark.parametrize("kind", sorted(VALID), ids=sorted(VALID))
def test_valid_manifests_pass(kind):
    """A small realistic manifest of each built-in kind validates without errors."""
    assert errors_of(VALID[kind]) == []


def _with(obj: dict, path: str, value) -> dict:
    """A copy of obj with the dotted path (numbers index lists) set to value, or removed for DELETE."""
    obj = copy.deepcopy(obj)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node = obj
    for part in parents:
        node = node[part]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return obj


DELETE = object()
C0 = "spec.template.spec.containers.0"

INVALID = [
    ("unknown-top-level", deployment(), "spec.replicass", 3,
     ['spec.replicass: unknown field "replicass"']),
    ("unknown-deep", deployment(), f"{C0}.imagee", "x",
     ['spec.template.spec.containers[0].imagee: unknown field "imagee"']),
    ("unknown-in-probe", deployment(), f"{C0}.livenessProbe.httpGet.pth", "/",
     ['spec.template.spec.containers[0].livenessProbe.httpGet.pth: unknown field "pth"']),
    ("wrong-type-integer", deployment(), "spec.replicas", "three",
     ['spec.replicas: Invalid value: "three": must be an integer']),
    ("wrong-type-string", deployment(), f"{C0}.image", 5,
     ['spec.template.spec.containers[0].image: Invalid value: 5: must be a string']),
    ("wrong-type-list", deployment(), f"{C0}.env", {"A": "1"},
     ['spec.template.spec.containers[0].env: Invalid value: "object": must be a list']),
    ("bad-quantity", deployment(), f"{C0}.resources.limits.memory", "12Q",
     ['spec.template.spec.containers[0].resources.limits.memory: Invalid value: "12Q": '
      "must be a quantity like 500m or 128Mi"]),
    ("quantity-not-bool", deployment(), f"{C0}.resources.limits.cpu", True,
     ['spec.template.spec.containers[0].resources.limits.cpu: Invalid value: true: '
      "must be a quantity like 500m or 128Mi (YAML reads unquoted yes/no/on/off/y/n/true/false "
      "as booleans, as Kubernetes does: quote the value)"]),
    ("int-or-string-float", deployment(), "spec.strategy.rollingUpdate.maxSurge", 1.5,
     ["spec.strategy.rollingUpdate.maxSurge: Invalid value: 1.5: must be an integer or a string"]),
    ("int-or-string-not-percent", deployment(), "spec.strategy.rollingUpdate.maxSurge", "lots",
     ['spec.strategy.rollingUpdate.maxSurge: Invalid value: "lots": a valid percent string must be a numeric '
      "string followed by an ending '%' (e.g. '1%', or '93%')"]),
    ("required-field", deployment(), f"{C0}.name", DELETE,
     ["spec.template.spec.containers[0].name: Required value"]),
    ("required-image", deployment(), f"{C0}.image", DELETE,
     ["spec.template.spec.containers[0].image: Required value"]),
    ("selector-mismatch", deployment(), "spec.selector.matchLabels", {"app": "api"},
     ['spec.template.metadata.labels: Invalid value: {"app": "web", "tier": "frontend"}: '
      "selector does not match template labels"]),
    ("selector-missing", VALID["DaemonSet"], "spec.selector", DELETE,
     ["spec.selector: Required value"]),
    ("selector-expression-mismatch", VALID["ReplicaSet"], "spec.selector.matchExpressions.0.operator", "NotIn",
     ['spec.template.metadata.labels: Invalid value: {"app": "web"}: selector does not match template labels']),
    ("duplicate-container", deployment(), "spec.template.spec.containers.1.name", "app",
     ['spec.template.spec.containers[1].name: Duplicate value: "app"']),
    ("duplicate-init-container", VALID["Pod"], "spec.initContainers", [{"name": "app", "image": "init"}],
     ['spec.containers[0].name: Duplicate value: "app"']),
    ("container-name-not-label", VALID["Pod"], "spec.containers.1.name", "Side_Car",
     ['spec.containers[1].name: Invalid value: "Side_Car": a lowercase RFC 1123 label must consist of lower '
      "case alphanumeric characters or '-', and must start and end with an alphanumeric character "
      "(e.g. 'my-name', or '123-abc')"]),
    ("no-containers", VALID["Pod"], "spec.containers", [],
     ["spec.containers: Required value"]),
    ("port-out-of-range", VALID["Pod"], "spec.containers.0.ports.0.containerPort", 70000,
     ["spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"]),
    ("unknown-volume", VALID["Pod"], "spec.volumes", [],
     ['spec.containers[0].volumeMounts[0].name: Not found: "data"']),
    ("request-above-limit", VALID["Pod"], "spec.containers.0.resources.requests.cpu", "2",
     ['spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1']),
    ("restart-policy-enum", VALID["Pod"], "spec.restartPolicy", "Sometimes",
     ['spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"']),
    ("deployment-restart-policy", deployment(), "spec.template.spec.restartPolicy", "Never",
     ['spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"']),
    ("job-restart-policy-required", VALID["Job"], "spec.template.spec.restartPolicy", DELETE,
     ['spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']),
    ("cronjob-pod-spec", VALID["CronJob"], "spec.jobTemplate.spec.template.spec.containers.0.name", "Bad",
     ['spec.jobTemplate.spec.template.spec.containers[0].name: Invalid value: "Bad": a lowercase RFC 1123 '
      "label must consist of lower case alphanumeric characters or '-', and must start and end with an "
      "alphanumeric character (e.g. 'my-name', or '123-abc')"]),
    ("cronjob-schedule", VALID["CronJob"], "spec.schedule", "every day",
     ['spec.schedule: Invalid value: "every day": must be a cron schedule of 5 fields (minute hour '
      "day-of-month month day-of-week, e.g. '*/5 * * * *') or a macro such as @hourly"]),
    ("name-not-subdomain", VALID["ConfigMap"], "metadata.name", "My_Settings",
     ['metadata.name: Invalid value: "My_Settings": a lowercase RFC 1123 subdomain must consist of lower case '
      "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
      "(e.g. 'example.com')"]),
    ("namespace-name-is-label", VALID["Namespace"], "metadata.name", "team.a",
     ['metadata.name: Invalid value: "team.a": a lowercase RFC 1123 label must consist of lower case '
      "alphanumeric characters or '-', and must start and end with an alphanumeric character "
      "(e.g. 'my-name', or '123-abc')"]),
    ("service-name-starts-with-letter", VALID["Service"], "metadata.name", "1web",
     ['metadata.name: Invalid value: "1web": a DNS-1035 label must consist of lower case alphanumeric '
      "characters or '-', start with an alphabetic character, and end with an alphanumeric character "
      "(e.g. 'my-name', or 'abc-123')"]),
    ("name-missing", VALID["ConfigMap"], "metadata.name", DELETE,
     ["metadata.name: Required value: name or generateName is required"]),
    ("label-value-too-long", VALID["Namespace"], "metadata.labels", {"env": "x" * 64},
     [f'metadata.labels: Invalid value: "{"x" * 64}": must be no more than 63 characters']),
    ("label-key-bad", VALID["Namespace"], "metadata.labels", {"-env": "dev"},
     ['metadata.labels: Invalid value: "-env": name part must consist of alphanumeric characters, \'-\', '
      "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', "
      "or '123-abc')"]),
    ("enum-operation", hook("ValidatingAdmissionHook"), "spec.rules.0.operations", ["CREATE", "PATCH"],
     ['spec.rules[0].operations[1]: Unsupported value: "PATCH": supported values: "CREATE", "UPDATE", '
      '"DELETE", "*"']),
    ("hook-relative-command", hook("MutatingAdmissionHook"), "spec.command", ["deny-latest"],
     ['spec.command[0]: Invalid value: "deny-latest": must be an absolute path']),
    ("hook-empty-command", hook("MutatingAdmissionHook"), "spec.command", [],
     ["spec.command: Required value: must have at least 1 item"]),
    ("hook-timeout-range", hook("ValidatingAdmissionHook"), "spec.timeoutSeconds", 31,
     ["spec.timeoutSeconds: Invalid value: 31: must be less than or equal to 30"]),
    ("hook-failure-policy", hook("ValidatingAdmissionHook"), "spec.failurePolicy", "Retry",
     ['spec.failurePolicy: Unsupported value: "Retry": supported values: "Fail", "Ignore"']),
    ("hook-rules-required", hook("ValidatingAdmissionHook"), "spec.rules", DELETE,
     ["spec.rules: Required value"]),
    ("secret-not-base64", VALID["Secret"], "data.key", "not base64!",
     ['data.key: Invalid value: "<data>": must be base64-encoded']),
    ("service-port-names", VALID["Service"], "spec.ports.1.name", "http",
     ['spec.ports[1].name: Duplicate value: "http"']),
]


@pytest.mark.parametrize("name, base, path, value, expected", INVALID, ids=[case[0] for case in INVALID])
def test_invalid_manifests_name_the_field(name, base, path, value, expected):
    """Each broken manifest yields exactly the kubectl-style error naming the full field path."""
    assert errors_of(_with(base, path, value)) == expected


ACCEPTED = [
    ("quantity-millicores", f"{C0}.resources.limits.cpu", "500m"),
    ("quantity-binary", f"{C0}.resources.limits.memory", "128Mi"),
    ("quantity-number", f"{C0}.resources.limits.cpu", 0.5),
    ("quantity-exponent", f"{C0}.resources.limits.memory", "1e9"),
    ("max-surge-percent", "spec.strategy.rollingUpdate.maxSurge", "25%"),
    ("max-surge-integer", "spec.strategy.rollingUpdate.maxSurge", 1),
    ("max-surge-null", "spec.strategy.rollingUpdate.maxSurge", None),
    ("probe-port-number", f"{C0}.livenessProbe.httpGet.port", 8080),
    ("replicas-zero", "spec.replicas", 0),
    ("prefixed-label", "spec.template.metadata.labels", {"app": "web", "app.kubernetes.io/name": "web"}),
]


@pytest.mark.parametrize("name, path, value", ACCEPTED, ids=[case[0] for case in ACCEPTED])
def test_valid_variants_pass(name, path, value):
    """Quantities, int-or-string values and other legal variants are accepted."""
    assert errors_of(_with(deployment(), path, value)) == []


def test_schema_errors_come_alone_and_sorted():
    """Schema errors are listed by path; semantic checks wait until the schema passes (as the API server)."""
    obj = _with(deployment(), "spec.replicass", 1)
    obj = _with(obj, "metadata.labelz", {})
    obj["spec"]["template"]["spec"]["containers"][1]["name"] = "app"
    assert errors_of(obj) == [
        'metadata.labelz: unknown field "labelz"',
        'spec.replicass: unknown field "replicass"',
    ]
    del obj["spec"]["replicass"], obj["metadata"]["labelz"]
    assert errors_of(obj) == ['spec.template.spec.containers[1].name: Duplicate value: "app"']


def test_semantic_errors_sorted_by_index():
    """Semantic errors are sorted by path, list indices in numeric order."""
    obj = VALID["Pod"]
    obj = _with(obj, "spec.containers", [{"name": f"c{i}", "image": "x", "ports": [{"containerPort": 0}]}
                                         for i in range(11)])
    obj = _with(obj, "spec.volumes", [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}},
                                      {"name": "v", "emptyDir": {}}])
    found = errors_of(obj)
    assert found[0] == ("spec.containers[0].ports[0].containerPort: Invalid value: 0: "
                        "must be between 1 and 65535, inclusive")
    assert found[1].startswith("spec.containers[1].")
    assert found[10].startswith("spec.containers[10].")
    assert found[11:] == ['spec.volumes[1].name: Duplicate value: "v"', 'spec.volumes[2].name: Duplicate value: "v"']


def test_unknown_fields_are_listed_one_by_one():
    """Two unknown keys in one object give two errors, each with its own path."""
    obj = _with(deployment(), "spec.foo", 1)
    obj["spec"]["bar"] = 2
    assert errors_of(obj) == ['spec.bar: unknown field "bar"', 'spec.foo: unknown field "foo"']


def test_map_keys_with_dots_are_bracketed():
    """A problem under a map key such as a node selector label is shown as [key]."""
    obj = _with(VALID["Pod"], "spec.nodeSelector", {"kubernetes.io/os": 1})
    assert errors_of(obj) == ["spec.nodeSelector[kubernetes.io/os]: Invalid value: 1: must be a string"]


# --- CustomResourceDefinitions -------------------------------------------------------------


def widget_registry() -> Registry:
    registry = builtin_registry()
    for rt in crd_resource_types(crd()):
        registry.add(rt)
    return registry


def widget(**spec) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "default"},
            "spec": {"size": 2, **spec}}


CUSTOM = [
    ("valid", widget(color="red", port="http", note="hi", tags={"a": "b"}, parts=[{"name": "x"}]), []),
    ("unknown-field", widget(colour="red"), ['spec.colour: unknown field "colour"']),
    ("unknown-field-in-list", widget(parts=[{"nam": "x"}]), ['spec.parts[0].nam: unknown field "nam"']),
    ("unknown-top-level", {**widget(), "extra": 1}, ['extra: unknown field "extra"']),
    ("preserve-unknown-fields", widget(extra={"anything": {"goes": [1, 2]}}), []),
    ("nullable", widget(note=None), []),
    ("not-nullable", widget(color=None), ["spec.color: Invalid value: null: must be a string"]),
    ("int-or-string-int", widget(port=8080), []),
    ("int-or-string-bad", widget(port=[1]), ['spec.port: Invalid value: "array": must be an integer or a string']),
    ("enum", widget(color="green"), ['spec.color: Unsupported value: "green": supported values: "red", "blue"']),
    ("minimum", widget(size=0), ["spec.size: Invalid value: 0: must be greater than or equal to 1"]),
    ("required", {**widget(), "spec": {}}, ["spec.size: Required value"]),
    ("map-values", widget(tags={"a": 1}), ["spec.tags.a: Invalid value: 1: must be a string"]),
    ("metadata-is-object-meta", {**widget(), "metadata": {"name": "w1", "labelz": {}}},
     ['metadata.labelz: unknown field "labelz"']),
    ("status", {**widget(), "status": {"ready": "yes"}}, ['status.ready: Invalid value: "yes": must be a boolean']),
]


@pytest.mark.parametrize("name, obj, expected", CUSTOM, ids=[case[0] for case in CUSTOM])
def test_custom_resources_validate_against_the_crd_schema(name, obj, expected):
    """Custom resources: unknown fields refused, preserve-unknown-fields, nullable, int-or-string honoured."""
    assert errors_of(obj, widget_registry()) == expected


def _crd_with(path: str, value) -> dict:
    return _with(crd(), path, value)


CRD_PROBLEMS = [
    ("plural-uppercase", _with(_crd_with("spec.names.plural", "Widgets"), "metadata.name", "Widgets.example.com"),
     'spec.names.plural: Invalid value: "Widgets": a lowercase RFC 1123 label'),
    ("name-mismatch", _crd_with("metadata.name", "widget.example.com"),
     'metadata.name: Invalid value: "widget.example.com": must be spec.names.plural+"."+spec.group'),
    ("two-storage-versions", _crd_with("spec.versions.1.storage", True),
     "spec.versions: Invalid value: 2 storage versions: must have exactly one version marked as storage version"),
    ("no-storage-version", _crd_with("spec.versions.0.storage", False),
     "spec.versions: Invalid value: 0 storage versions: must have exactly one version marked as storage version"),
    ("missing-schema", _crd_with("spec.versions.0.schema", DELETE),
     "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"),
    ("scope", _crd_with("spec.scope", "Global"),
     'spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"'),
    ("group-without-dot", _with(_crd_with("spec.group", "example"), "metadata.name", "widgets.example"),
     'spec.group: Invalid value: "example": should be a domain with at least one dot'),
    ("root-not-object", _crd_with("spec.versions.0.schema.openAPIV3Schema.type", "string"),
     'spec.versions[0].schema.openAPIV3Schema.type: Required value: must be "object" at the root'),
    ("bad-schema", _crd_with("spec.versions.0.schema.openAPIV3Schema.properties.spec.properties.size.minimum", "1"),
     "spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.size.minimum: Invalid value: \"1\": "
     "not a valid schema"),
]


@pytest.mark.parametrize("name, obj, expected", CRD_PROBLEMS, ids=[case[0] for case in CRD_PROBLEMS])
def test_crd_checks_beyond_the_schema(name, obj, expected):
    """validate_crd (and validate on a CRD) reports naming, storage and schema problems."""
    found = [str(e) for e in validate_crd(obj)]
    assert any(message.startswith(expected) for message in found), found
    assert any(message.startswith(expected) for message in errors_of(obj)) or name == "bad-schema"


def test_valid_crd_has_no_crd_problems():
    """The example CRD passes validate_crd."""
    assert validate_crd(crd()) == []
