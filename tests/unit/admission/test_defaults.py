"""Built-in defaulting (kctl.admission.defaults), kind by kind, as Kubernetes' SetDefaults_*."""

from __future__ import annotations

import copy
import time

import pytest

from kctl.admission.defaults import apply_defaults
from kctl.machinery.resources import builtin_registry

REGISTRY = builtin_registry()


def rt(name: str):
    return REGISTRY.lookup(name)


def get(obj, path: str):
    """obj at a dotted path with [i] indices (spec.containers[0].ports[0].protocol)."""
    node = obj
    for part in path.replace("[", ".[").split("."):
        if part.startswith("["):
            node = node[int(part[1:-1])]
        else:
            node = node[part]
    return node


def container(**extra) -> dict:
    return {"name": "app", "image": "nginx:1.27", **extra}


def pod_spec(**extra) -> dict:
    return {"containers": [container()], **extra}


def template(**spec) -> dict:
    return {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec(**spec)}


def pod(**spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod_spec(**spec)}


def deployment(**spec) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template(), **spec}}


def replica_set(**spec) -> dict:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template(), **spec}}


def daemon_set(**spec) -> dict:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template(), **spec}}


def job(**spec) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"template": template(restartPolicy="Never"), **spec}}


def cron_job(**spec) -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template()}}, **spec}}


def service(**spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}], **spec}}


def hook(kind: str) -> dict:
    return {"apiVersion": "kctl.io/v1alpha1", "kind": kind, "metadata": {"name": "h"},
            "spec": {"command": ["/bin/true"], "rules": []}}


PROBE = {"httpGet": {"port": 8080}}
TEMPLATE = "spec.template.spec"
CRON_TEMPLATE = "spec.jobTemplate.spec.template.spec"

# (resource, object, path, expected default)
DEFAULTS = [
    ("pods", pod(), "spec.restartPolicy", "Always"),
    ("pods", pod(), "spec.dnsPolicy", "ClusterFirst"),
    ("pods", pod(), "spec.schedulerName", "default-scheduler"),
    ("pods", pod(), "spec.terminationGracePeriodSeconds", 30),
    ("pods", pod(), "spec.securityContext", {}),
    ("pods", pod(), "spec.containers[0].imagePullPolicy", "IfNotPresent"),
    ("pods", pod(), "spec.containers[0].terminationMessagePath", "/dev/termination-log"),
    ("pods", pod(), "spec.containers[0].terminationMessagePolicy", "File"),
    ("pods", pod(containers=[container(ports=[{"containerPort": 80}])]),
     "spec.containers[0].ports[0].protocol", "TCP"),
    ("pods", pod(initContainers=[container(image="busybox")]), "spec.initContainers[0].imagePullPolicy", "Always"),
    ("pods", pod(initContainers=[container()]), "spec.initContainers[0].terminationMessagePolicy", "File"),
    ("pods", pod(containers=[container(livenessProbe=copy.deepcopy(PROBE))]),
     "spec.containers[0].livenessProbe", {"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
                                          "timeoutSeconds": 1, "periodSeconds": 10,
                                          "successThreshold": 1, "failureThreshold": 3}),
    ("pods", pod(containers=[container(readinessProbe={"exec": {"command": ["true"]}})]),
     "spec.containers[0].readinessProbe.periodSeconds", 10),
    ("pods", pod(containers=[container(startupProbe={"tcpSocket": {"port": 80}})]),
     "spec.containers[0].startupProbe.failureThreshold", 3),
    ("pods", pod(containers=[container(env=[{"name": "N",
                                             "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])]),
     "spec.containers[0].env[0].valueFrom.fieldRef.apiVersion", "v1"),
    ("pods", pod(volumes=[{"name": "c", "configMap": {"name": "cm"}}]), "spec.volumes[0].configMap.defaultMode", 420),
    ("pods", pod(volumes=[{"name": "s", "secret": {"secretName": "s"}}]), "spec.volumes[0].secret.defaultMode", 0o600),
    ("pods", pod(volumes=[{"name": "e"}]), "spec.volumes[0].emptyDir", {}),
    ("pods", pod(volumes=[{"name": "e", "emptyDir": None}]), "spec.volumes[0].emptyDir", {}),
    ("pods", pod(containers=[container(resources={"limits": {"cpu": "1"}})]),
     "spec.containers[0].resources.requests", {"cpu": "1"}),
    ("pods", pod(hostNetwork=True, containers=[container(ports=[{"containerPort": 80}])]),
     "spec.containers[0].ports[0].hostPort", 80),
    ("deployments", deployment(), "spec.replicas", 1),
    ("deployments", deployment(), "spec.strategy", {"type": "RollingUpdate",
                                                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
    ("deployments", deployment(strategy={"type": "Recreate"}), "spec.strategy", {"type": "Recreate"}),
    ("deployments", deployment(), "spec.revisionHistoryLimit", 10),
    ("deployments", deployment(), "spec.progressDeadlineSeconds", 600),
    ("deployments", deployment(), f"{TEMPLATE}.restartPolicy", "Always"),
    ("deployments", deployment(), f"{TEMPLATE}.containers[0].imagePullPolicy", "IfNotPresent"),
    ("replicasets", replica_set(), "spec.replicas", 1),
    ("replicasets", replica_set(), f"{TEMPLATE}.dnsPolicy", "ClusterFirst"),
    ("daemonsets", daemon_set(), "spec.updateStrategy", {"type": "RollingUpdate",
                                                         "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
    ("daemonsets", daemon_set(), "spec.revisionHistoryLimit", 10),
    ("daemonsets", daemon_set(), f"{TEMPLATE}.schedulerName", "default-scheduler"),
    ("jobs", job(), "spec.completions", 1),
    ("jobs", job(), "spec.parallelism", 1),
    ("jobs", job(completions=5), "spec.parallelism", 1),
    ("jobs", job(), "spec.backoffLimit", 6),
    ("jobs", job(), "spec.completionMode", "NonIndexed"),
    ("jobs", job(), "spec.suspend", False),
    ("jobs", job(), "spec.podReplacementPolicy", "TerminatingOrFailed"),
    ("jobs", job(), "metadata.labels", {"app": "web"}),
    ("jobs", job(), f"{TEMPLATE}.terminationGracePeriodSeconds", 30),
    ("cronjobs", cron_job(), "spec.concurrencyPolicy", "Allow"),
    ("cronjobs", cron_job(), "spec.suspend", False),
    ("cronjobs", cron_job(), "spec.successfulJobsHistoryLimit", 3),
    ("cronjobs", cron_job(), "spec.failedJobsHistoryLimit", 1),
    ("cronjobs", cron_job(), f"{CRON_TEMPLATE}.dnsPolicy", "ClusterFirst"),
    ("services", service(), "spec.type", "ClusterIP"),
    ("services", service(), "spec.sessionAffinity", "None"),
    ("services", service(), "spec.ports[0].protocol", "TCP"),
    ("services", service(), "spec.ports[0].targetPort", 80),
    ("services", service(), "spec.internalTrafficPolicy", "Cluster"),
    ("services", service(type="NodePort"), "spec.externalTrafficPolicy", "Cluster"),
    ("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}, "type", "Opaque"),
    ("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
     "metadata.labels", {"kubernetes.io/metadata.name": "team"}),
    ("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4"}}},
     "status.allocatable", {"cpu": "4"}),
    ("mutatingadmissionhooks", hook("MutatingAdmissionHook"), "spec.timeoutSeconds", 10),
    ("mutatingadmissionhooks", hook("MutatingAdmissionHook"), "spec.failurePolicy", "Fail"),
    ("validatingadmissionhooks", hook("ValidatingAdmissionHook"), "spec.timeoutSeconds", 10),
    ("validatingadmissionhooks", hook("ValidatingAdmissionHook"), "spec.failurePolicy", "Fail"),
]


@pytest.mark.parametrize("resource, obj, path, expected", DEFAULTS,
                         ids=[f"{r}:{p}" for r, _, p, _ in DEFAULTS])
def test_default_is_filled(resource, obj, path, expected):
    """An unset field gets the value Kubernetes' defaulting gives it."""
    assert get(apply_defaults(obj, rt(resource)), path) == expected


# (resource, object with the field already set, path)
KEPT = [
    ("pods", pod(restartPolicy="Never"), "spec.restartPolicy"),
    ("pods", pod(dnsPolicy="Default"), "spec.dnsPolicy"),
    ("pods", pod(schedulerName="mine"), "spec.schedulerName"),
    ("pods", pod(terminationGracePeriodSeconds=0), "spec.terminationGracePeriodSeconds"),
    ("pods", pod(securityContext={"runAsUser": 1000}), "spec.securityContext"),
    ("pods", pod(containers=[container(imagePullPolicy="Never")]), "spec.containers[0].imagePullPolicy"),
    ("pods", pod(containers=[container(ports=[{"containerPort": 53, "protocol": "UDP"}])]),
     "spec.containers[0].ports[0].protocol"),
    ("pods", pod(containers=[container(livenessProbe={"exec": {"command": ["true"]}, "periodSeconds": 3,
                                                      "timeoutSeconds": 5, "failureThreshold": 1,
                                                      "successThreshold": 1})]),
     "spec.containers[0].livenessProbe"),
    ("pods", pod(containers=[container(resources={"limits": {"cpu": "1"}, "requests": {"cpu": "500m"}})]),
     "spec.containers[0].resources.requests"),
    ("pods", pod(volumes=[{"name": "c", "configMap": {"name": "cm", "defaultMode": 0o400}}]),
     "spec.volumes[0].configMap.defaultMode"),
    ("pods", pod(hostNetwork=True, containers=[container(ports=[{"containerPort": 80, "hostPort": 8080}])]),
     "spec.containers[0].ports[0].hostPort"),
    ("deployments", deployment(replicas=0), "spec.replicas"),
    ("deployments", deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}),
     "spec.strategy.rollingUpdate.maxSurge"),
    ("deployments", deployment(revisionHistoryLimit=0), "spec.revisionHistoryLimit"),
    ("deployments", deployment(progressDeadlineSeconds=60), "spec.progressDeadlineSeconds"),
    ("replicasets", replica_set(replicas=3), "spec.replicas"),
    ("daemonsets", daemon_set(updateStrategy={"type": "OnDelete"}), "spec.updateStrategy"),
    ("jobs", job(parallelism=4), "spec.parallelism"),
    ("jobs", job(backoffLimit=0), "spec.backoffLimit"),
    ("jobs", job(completionMode="Indexed", completions=3), "spec.completionMode"),
    ("jobs", job(suspend=True), "spec.suspend"),
    ("cronjobs", cron_job(concurrencyPolicy="Forbid"), "spec.concurrencyPolicy"),
    ("cronjobs", cron_job(successfulJobsHistoryLimit=0), "spec.successfulJobsHistoryLimit"),
    ("services", service(type="NodePort"), "spec.type"),
    ("services", service(ports=[{"port": 80, "targetPort": "http"}]), "spec.ports[0].targetPort"),
    ("services", service(sessionAffinity="ClientIP"), "spec.sessionAffinity"),
    ("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "kubernetes.io/tls"},
     "type"),
    ("validatingadmissionhooks", {**hook("ValidatingAdmissionHook"),
                                  "spec": {"timeoutSeconds": 3, "failurePolicy": "Ignore"}}, "spec"),
]


@pytest.mark.parametrize("resource, obj, path", KEPT, ids=[f"{r}:{p}" for r, _, p in KEPT])
def test_set_value_is_never_overwritten(resource, obj, path):
    """A field the user set keeps its value."""
    assert get(apply_defaults(obj, rt(resource)), path) == get(obj, path)


IMAGES = [
    ("nginx", "Always"),
    ("nginx:latest", "Always"),
    ("docker.io/library/nginx:latest", "Always"),
    ("nginx:1.27", "IfNotPresent"),
    ("localhost:5000/app", "Always"),
    ("localhost:5000/app:v2", "IfNotPresent"),
    ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
    ("nginx:1.27@sha256:" + "a" * 64, "IfNotPresent"),
]


@pytest.mark.parametrize("image, policy", IMAGES, ids=[i for i, _ in IMAGES])
def test_image_pull_policy(image, policy):
    """imagePullPolicy is Always for :latest or an untagged image without digest, else IfNotPresent."""
    out = apply_defaults(pod(containers=[container(image=image)]), rt("pods"))
    assert out["spec"]["containers"][0]["imagePullPolicy"] == policy


@pytest.mark.parametrize("obj, path", [
    (job(), TEMPLATE),
    (cron_job(), CRON_TEMPLATE),
], ids=["job", "cronjob"])
def test_job_templates_get_no_restart_policy(obj, path):
    """Job pod templates get no restartPolicy (Kubernetes requires OnFailure or Never there)."""
    obj = copy.deepcopy(obj)
    get(obj, path).pop("restartPolicy", None)
    resource = "jobs" if obj["kind"] == "Job" else "cronjobs"
    assert "restartPolicy" not in get(apply_defaults(obj, rt(resource)), path)


@pytest.mark.parametrize("obj, resource, absent", [
    (job(), "jobs", "spec.selector"),
    (job(), "jobs", f"{TEMPLATE}.enableServiceLinks"),
    (cron_job(), "cronjobs", "spec.jobTemplate.spec.backoffLimit"),
    (deployment(), "deployments", "metadata.labels"),
    (service(type="ExternalName", externalName="example.com"), "services", "spec.internalTrafficPolicy"),
    (deployment(), "deployments", f"{TEMPLATE}.containers[0].resources"),
], ids=["job-selector", "service-links", "cronjob-job-spec", "deployment-labels", "externalname-traffic",
        "template-requests-from-limits"])
def test_not_defaulted(obj, resource, absent):
    """Fields Kubernetes does not default here (or kctl leaves to others) stay absent."""
    with pytest.raises(KeyError):
        get(apply_defaults(obj, rt(resource)), absent)


def test_job_labels_are_kept():
    """A Job with labels of its own does not get the template's."""
    out = apply_defaults({**job(), "metadata": {"name": "j", "labels": {"x": "y"}}}, rt("jobs"))
    assert out["metadata"]["labels"] == {"x": "y"}


@pytest.mark.parametrize("obj, resource", [
    (pod(), "pods"), (deployment(), "deployments"), (job(), "jobs"), (cron_job(), "cronjobs"),
    (service(), "services"),
], ids=["pod", "deployment", "job", "cronjob", "service"])
def test_input_is_not_mutated_and_defaulting_is_idempotent(obj, resource):
    """apply_defaults returns a copy, and defaulting a defaulted object changes nothing."""
    before = copy.deepcopy(obj)
    once = apply_defaults(obj, rt(resource))
    assert obj == before
    assert apply_defaults(once, rt(resource)) == once


@pytest.mark.parametrize("obj, resource", [
    ({"apiVersion": "v1", "kind": "Pod"}, "pods"),
    ({"apiVersion": "v1", "kind": "Pod", "spec": None}, "pods"),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": "bad", "strategy": 3}}, "deployments"),
    ({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": ["bad", None]}}, "pods"),
    ({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}}, "configmaps"),
], ids=["no-spec", "null-spec", "malformed-deployment", "malformed-containers", "configmap"])
def test_malformed_or_undefaulted_objects_pass_through(obj, resource):
    """Malformed objects are left for validation to report, never crash defaulting."""
    apply_defaults(obj, rt(resource))


def test_fast_enough_for_a_large_apply():
    """Defaulting 1,000 Deployments takes well under a second."""
    objs = [deployment() for _ in range(1000)]
    started = time.perf_counter()
    for obj in objs:
        apply_defaults(obj, rt("deployments"))
    assert time.perf_counter() - started < 1.0
