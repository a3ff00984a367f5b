"""Pod Security admission (kctl.admission.podsecurity): levels, each rule, kctl's deviations."""

from __future__ import annotations

import copy

import pytest

from kctl.admission.podsecurity import ENFORCE_LABEL, check, level_for
from kctl.machinery.resources import builtin_registry

REGISTRY = builtin_registry()
PRIVILEGED = {ENFORCE_LABEL: "privileged"}
BASELINE = {ENFORCE_LABEL: "baseline"}
RESTRICTED = {ENFORCE_LABEL: "restricted"}

RESTRICTED_SC = {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                 "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def container(name: str = "app", **sc) -> dict:
    c: dict = {"name": name, "image": "nginx:1.27"}
    if sc:
        c["securityContext"] = sc
    return c


def pod(*containers: dict, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": list(containers) or [container()], **spec}}


def wrap(kind: str, pod_obj: dict) -> dict:
    """The pod as the template of a workload of this kind."""
    template = {"metadata": pod_obj.get("metadata", {}), "spec": pod_obj["spec"]}
    if kind == "CronJob":
        return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "w"},
                "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}}
    group = "batch/v1" if kind == "Job" else "apps/v1"
    return {"apiVersion": group, "kind": kind, "metadata": {"name": "w"}, "spec": {"template": template}}


def run(obj: dict, labels: dict | None = None, **kw):
    return check(obj, REGISTRY.for_object(obj), BASELINE if labels is None else labels, **kw)


def paths(errors) -> list[str]:
    return [e.path for e in errors]


# (id, pod, path of the one baseline violation, words the message must contain)
BASELINE_CASES = [
    ("privileged", pod(container(privileged=True)),
     "spec.containers[0].securityContext.privileged",
     'privileged (container "app" must not set securityContext.privileged=true)'),
    ("privileged-init", pod(initContainers=[container("init", privileged=True)]),
     "spec.initContainers[0].securityContext.privileged", 'container "init"'),
    ("hostNetwork", pod(hostNetwork=True), "spec.hostNetwork", "host namespaces (hostNetwork=true)"),
    ("hostPID", pod(hostPID=True), "spec.hostPID", "host namespaces (hostPID=true)"),
    ("hostIPC", pod(hostIPC=True), "spec.hostIPC", "host namespaces (hostIPC=true)"),
    ("hostPath", pod(volumes=[{"name": "data", "hostPath": {"path": "/srv"}}]),
     "spec.volumes[0].hostPath", 'hostPath volumes (volume "data" uses hostPath)'),
    ("capabilities", pod(container(capabilities={"add": ["NET_BIND_SERVICE", "SYS_ADMIN"]})),
     "spec.containers[0].securityContext.capabilities.add",
     'non-default capabilities (container "app" must not include "SYS_ADMIN" in securityContext.capabilities.add)'),
    ("procMount", pod(container(procMount="Unmasked")),
     "spec.containers[0].securityContext.procMount", 'procMount to "Unmasked"'),
    ("seLinux-type", pod(container(seLinuxOptions={"type": "spc_t"})),
     "spec.containers[0].securityContext.seLinuxOptions.type", '"spc_t"'),
    ("seLinux-user-pod", pod(securityContext={"seLinuxOptions": {"user": "system_u"}}),
     "spec.securityContext.seLinuxOptions.user", "pod must not set securityContext.seLinuxOptions.user"),
    ("sysctls", pod(securityContext={"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"},
                                                 {"name": "kernel.msgmax", "value": "1"}]}),
     "spec.securityContext.sysctls[1].name", "forbidden sysctls (kernel.msgmax)"),
    ("seccomp-pod", pod(securityContext={"seccompProfile": {"type": "Unconfined"}}),
     "spec.securityContext.seccompProfile.type", "seccompProfile (pod must not set"),
    ("seccomp-container", pod(container(seccompProfile={"type": "Unconfined"})),
     "spec.containers[0].securityContext.seccompProfile.type", 'container "app"'),
    ("appArmor-field", pod(container(appArmorProfile={"type": "Unconfined"})),
     "spec.containers[0].securityContext.appArmorProfile.type", "forbidden AppArmor profile"),
    ("appArmor-annotation",
     {**pod(), "metadata": {"name": "p", "annotations": {
         "container.apparmor.security.beta.kubernetes.io/app": "unconfined"}}},
     "metadata.annotations[container.apparmor.security.beta.kubernetes.io/app]", "forbidden AppArmor profile"),
    ("hostProcess", pod(container(windowsOptions={"hostProcess": True})),
     "spec.containers[0].securityContext.windowsOptions.hostProcess", "hostProcess"),
    ("ephemeral", pod(ephemeralContainers=[container("debug", privileged=True)]),
     "spec.ephemeralContainers[0].securityContext.privileged", 'container "debug"'),
]


@pytest.mark.parametrize("pod_obj, path, words", [c[1:] for c in BASELINE_CASES],
                         ids=[c[0] for c in BASELINE_CASES])
def test_baseline_refuses(pod_obj, path, words):
    """Each baseline rule refuses its field, named by path, with Kubernetes' wording."""
    errors = run(pod_obj)
    assert paths(errors) == [path]
    assert errors[0].message.startswith('violates PodSecurity "baseline:latest": ')
    assert words in errors[0].message


@pytest.mark.parametrize("pod_obj", [c[1] for c in BASELINE_CASES], ids=[c[0] for c in BASELINE_CASES])
def test_privileged_namespace_allows_everything(pod_obj):
    """A namespace labelled privileged lets every baseline violation through."""
    assert run(pod_obj, PRIVILEGED) == []


@pytest.mark.parametrize("kind, prefix", [
    ("Deployment", "spec.template."), ("ReplicaSet", "spec.template."), ("DaemonSet", "spec.template."),
    ("Job", "spec.template."), ("CronJob", "spec.jobTemplate.spec.template."),
], ids=["deployment", "replicaset", "daemonset", "job", "cronjob"])
def test_templates_are_enforced(kind, prefix):
    """A workload whose pods would be refused is refused itself, with the template's path."""
    errors = run(wrap(kind, pod(container(privileged=True), hostNetwork=True)))
    assert paths(errors) == [f"{prefix}spec.hostNetwork", f"{prefix}spec.containers[0].securityContext.privileged"]


@pytest.mark.parametrize("labels", [{}, BASELINE, RESTRICTED], ids=["unlabelled", "baseline", "restricted"])
def test_host_port_is_allowed(labels):
    """kctl allows hostPort at every level: it is how ports are published on Podman hosts."""
    c = container(**RESTRICTED_SC)
    c["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    assert run(pod(c), labels) == []


@pytest.mark.parametrize("labels, level", [
    ({}, ("baseline", "latest")),
    (BASELINE, ("baseline", "latest")),
    (PRIVILEGED, ("privileged", "latest")),
    ({ENFORCE_LABEL: "restricted", "pod-security.kubernetes.io/enforce-version": "v1.30"}, ("restricted", "v1.30")),
    ({ENFORCE_LABEL: "bogus"}, ("restricted", "latest")),
], ids=["absent-is-baseline", "baseline", "privileged", "version", "invalid-fails-closed"])
def test_level_for(labels, level):
    """The enforced level and version come from the namespace labels."""
    assert level_for(labels) == level


def test_unlabelled_namespace_enforces_baseline():
    """Without the enforce label kctl enforces baseline (Kubernetes would allow everything)."""
    assert paths(run(pod(hostNetwork=True), {})) == ["spec.hostNetwork"]


def test_plain_pod_passes_baseline():
    """An ordinary pod has no baseline violations."""
    assert run(pod(container(capabilities={"add": ["NET_BIND_SERVICE"]}))) == []


# (id, pod, paths of the restricted violations)
RESTRICTED_CASES = [
    ("compliant", pod(container(**RESTRICTED_SC)), []),
    ("pod-level-defaults", pod(container(allowPrivilegeEscalation=False, capabilities={"drop": ["ALL"]}),
                               securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "Localhost",
                                                                                        "localhostProfile": "p.json"}}),
     []),
    ("plain-container", pod(), [
        "spec.containers[0].securityContext.runAsNonRoot",
        "spec.containers[0].securityContext.allowPrivilegeEscalation",
        "spec.containers[0].securityContext.seccompProfile.type",
        "spec.containers[0].securityContext.capabilities.drop"]),
    ("escalation", pod(container(**{**RESTRICTED_SC, "allowPrivilegeEscalation": True})),
     ["spec.containers[0].securityContext.allowPrivilegeEscalation"]),
    ("run-as-root", pod(container(**{**RESTRICTED_SC, "runAsNonRoot": False})),
     ["spec.containers[0].securityContext.runAsNonRoot"]),
    ("uid-0", pod(container(**{**RESTRICTED_SC, "runAsUser": 0})),
     ["spec.containers[0].securityContext.runAsUser"]),
    ("add-capability", pod(container(**{**RESTRICTED_SC, "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}})),
     ["spec.containers[0].securityContext.capabilities.add"]),
    ("add-net-bind", pod(container(**{**RESTRICTED_SC, "capabilities": {"drop": ["ALL"],
                                                                        "add": ["NET_BIND_SERVICE"]}})), []),
    ("seccomp-unconfined", pod(container(**{**RESTRICTED_SC, "seccompProfile": {"type": "Unconfined"}})),
     ["spec.containers[0].securityContext.seccompProfile.type"]),
    ("hostPath-volume", pod(container(**RESTRICTED_SC), volumes=[{"name": "h", "hostPath": {"path": "/"}}]),
     ["spec.volumes[0].hostPath"]),
    ("allowed-volumes", pod(container(**RESTRICTED_SC), volumes=[
        {"name": "a", "emptyDir": {}}, {"name": "b", "configMap": {"name": "c"}},
        {"name": "c", "secret": {"secretName": "s"}}, {"name": "d", "projected": {"sources": []}}]), []),
    ("nfs-volume", pod(container(**RESTRICTED_SC), volumes=[{"name": "n", "nfs": {"server": "x", "path": "/"}}]),
     ["spec.volumes[0].nfs"]),
    ("baseline-still-applies", pod(container(**{**RESTRICTED_SC, "privileged": True})),
     ["spec.containers[0].securityContext.privileged"]),
]


@pytest.mark.parametrize("pod_obj, expected", [c[1:] for c in RESTRICTED_CASES],
                         ids=[c[0] for c in RESTRICTED_CASES])
def test_restricted_tightens(pod_obj, expected):
    """The restricted level adds its rules to baseline, each naming its field."""
    errors = run(pod_obj, RESTRICTED)
    assert sorted(paths(errors)) == sorted(expected)
    assert all(e.message.startswith('violates PodSecurity "restricted:latest": ') for e in errors)


def test_restricted_is_relaxed_by_baseline_label():
    """A pod refused by restricted is fine in a baseline namespace."""
    assert run(pod(), RESTRICTED) and run(pod(), BASELINE) == []


def test_update_with_unchanged_pod_spec_is_not_checked():
    """An update that leaves the pod spec alone (scale, relabel) passes a since-tightened namespace."""
    old = wrap("Deployment", pod(hostNetwork=True))
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 5
    assert run(new, old_obj=old) == []
    new["spec"]["template"]["spec"]["hostPID"] = True
    assert paths(run(new, old_obj=old)) == ["spec.template.spec.hostNetwork", "spec.template.spec.hostPID"]


@pytest.mark.parametrize("obj", [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 1}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": None}},
], ids=["configmap", "service", "pod-without-spec", "deployment-without-template"])
def test_other_kinds_and_malformed_objects_pass(obj):
    """Kinds without pods, and objects without a pod spec, have nothing to check."""
    assert run(obj, RESTRICTED) == []


def test_str_reads_well():
    """A FieldError prints as path, then Kubernetes' message."""
    (error,) = run(pod(container(privileged=True)))
    assert str(error) == ('spec.containers[0].securityContext.privileged: violates PodSecurity "baseline:latest": '
                          'privileged (container "app" must not set securityContext.privileged=true)')
