"""Pod Security admission: the Kubernetes Pod Security Standards, enforced per namespace.

The API layer calls `check` after schema validation and before validating hooks, for
Pods and for every kind with a pod template (Deployment, ReplicaSet, DaemonSet, Job,
CronJob), and turns a non-empty result into a Forbidden error. The level is the
namespace label `pod-security.kubernetes.io/enforce` (privileged | baseline |
restricted), as in k8s.io/pod-security-admission; the checks and their messages follow
that package's `policy/check_*.go`.

kctl's deviations from Kubernetes (docs/admission.md says why):
- a namespace without the label gets `baseline` (Kubernetes: privileged);
- `hostPort` is allowed at every level: it is how kctl publishes ports on Podman hosts;
- pod templates are enforced, not only warned about, so a Deployment whose pods would be
  refused is refused itself.
An update that leaves the pod spec as it was is not checked again (as Kubernetes), so a
namespace tightened later does not block scaling or relabelling existing workloads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from kctl.machinery.errors import FieldError
from kctl.machinery.resources import ResourceType

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION_LABEL = "pod-security.kubernetes.io/enforce-version"
PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
#: kctl's level for a namespace without the enforce label (Kubernetes uses privileged).
DEFAULT_LEVEL = BASELINE

BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
})
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
})
RESTRICTED_VOLUME_TYPES = frozenset({
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
})
SECCOMP_ALLOWED = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"

#: where each kind keeps its pod (template): path of the template's metadata and spec.
_POD_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): (),
    ("apps", "Deployment"): ("spec", "template"),
    ("apps", "ReplicaSet"): ("spec", "template"),
    ("apps", "DaemonSet"): ("spec", "template"),
    ("batch", "Job"): ("spec", "template"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template"),
}


def applies_to(rt: ResourceType) -> bool:
    """Whether objects of this kind carry a pod or a pod template that Pod Security checks."""
    return (rt.group, rt.kind) in _POD_PATHS


def level_for(namespace_labels: dict[str, str] | None) -> tuple[str, str]:
    """(level, version) a namespace enforces; an unknown level fails closed to restricted."""
    labels = namespace_labels or {}
    level = labels.get(ENFORCE_LABEL, DEFAULT_LEVEL)
    if level not in LEVELS:
        level = RESTRICTED
    return level, labels.get(ENFORCE_VERSION_LABEL) or "latest"


def check(obj: dict, rt: ResourceType, namespace_labels: dict[str, str],
          *, old_obj: dict | None = None) -> list[FieldError]:
    """The Pod Security violations of `obj` in a namespace with these labels ([] if none).

    Each FieldError names the offending field (`spec.template.spec.containers[0].
    securityContext.privileged`) and reads `violates PodSecurity "baseline:latest":
    privileged (container "app" must not set securityContext.privileged=true)`.
    Pass `old_obj` on update: an unchanged pod spec is not checked again.
    """
    where = _POD_PATHS.get((rt.group, rt.kind))
    if where is None:
        return []
    level, version = level_for(namespace_labels)
    if level == PRIVILEGED:
        return []
    pod = _pod(obj, where)
    if pod is None:
        return []
    if old_obj is not None:
        old = _pod(old_obj, where)
        if old is not None and old.spec == pod.spec and _apparmor(old.meta) == _apparmor(pod.meta):
            return []
    prefix = ".".join(where)
    ctx = _Context(pod, prefix, f'violates PodSecurity "{level}:{version}": ')
    _check_baseline(ctx, restricted=level == RESTRICTED)
    if level == RESTRICTED:
        _check_restricted(ctx)
    return ctx.errors


# --------------------------------------------------------------------------- plumbing


@dataclass(frozen=True)
class _Pod:
    meta: dict
    spec: dict


def _pod(obj: dict, where: tuple[str, ...]) -> _Pod | None:
    node: object = obj
    for key in where:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict) or not isinstance(node.get("spec"), dict):
        return None
    meta = node.get("metadata")
    return _Pod(meta if isinstance(meta, dict) else {}, node["spec"])


def _apparmor(meta: dict) -> dict:
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        return {}
    return {k: v for k, v in annotations.items() if k.startswith(APPARMOR_ANNOTATION_PREFIX)}


def _as_dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _as_list(value: object) -> list:
    return value if isinstance(value, list) else []


class _Context:
    """The pod under check, the path prefixes of its parts, and the errors found so far."""

    def __init__(self, pod: _Pod, prefix: str, message_prefix: str) -> None:
        self.meta = pod.meta
        self.spec = pod.spec
        self.meta_path = f"{prefix}.metadata" if prefix else "metadata"
        self.spec_path = f"{prefix}.spec" if prefix else "spec"
        self.pod_sc = _as_dict(self.spec.get("securityContext"))
        self.pod_sc_path = f"{self.spec_path}.securityContext"
        self.windows = _as_dict(self.spec.get("os")).get("name") == "windows"
        self.message_prefix = message_prefix
        self.errors: list[FieldError] = []

    def containers(self) -> Iterator[tuple[str, str, dict, dict]]:
        """(path, name, container, securityContext) of every container, init and ephemeral too."""
        for key in ("initContainers", "containers", "ephemeralContainers"):
            for i, container in enumerate(_as_list(self.spec.get(key))):
                if not isinstance(container, dict):
                    continue
                name = container.get("name") or f"{key}[{i}]"
                yield (f"{self.spec_path}.{key}[{i}]", str(name), container,
                       _as_dict(container.get("securityContext")))

    def violation(self, path: str, reason: str, detail: str) -> None:
        self.errors.append(FieldError(path, f"{self.message_prefix}{reason} ({detail})"))


def _quoted(names: list[str] | set[str]) -> str:
    return ", ".join(f'"{n}"' for n in sorted(names))


# --------------------------------------------------------------------------- baseline


def _check_baseline(ctx: _Context, *, restricted: bool) -> None:
    """The baseline policy; at restricted, the checks that restricted replaces are skipped."""
    _host_process(ctx)
    _host_namespaces(ctx)
    _privileged(ctx)
    if not restricted:
        _baseline_capabilities(ctx)
        _host_path_volumes(ctx)
        _baseline_seccomp(ctx)
    _apparmor_profiles(ctx)
    _selinux(ctx)
    _proc_mount(ctx)
    _sysctls(ctx)
    # hostPort: allowed by kctl at every level (Kubernetes baseline forbids it).


def _host_process(ctx: _Context) -> None:
    if _as_dict(ctx.pod_sc.get("windowsOptions")).get("hostProcess") is True:
        ctx.violation(f"{ctx.pod_sc_path}.windowsOptions.hostProcess", "hostProcess",
                      "pod must not set securityContext.windowsOptions.hostProcess=true")
    for path, name, _, sc in ctx.containers():
        if _as_dict(sc.get("windowsOptions")).get("hostProcess") is True:
            ctx.violation(f"{path}.securityContext.windowsOptions.hostProcess", "hostProcess",
                          f'container "{name}" must not set securityContext.windowsOptions.hostProcess=true')


def _host_namespaces(ctx: _Context) -> None:
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if ctx.spec.get(field) is True:
            ctx.violation(f"{ctx.spec_path}.{field}", "host namespaces", f"{field}=true")


def _privileged(ctx: _Context) -> None:
    for path, name, _, sc in ctx.containers():
        if sc.get("privileged") is True:
            ctx.violation(f"{path}.securityContext.privileged", "privileged",
                          f'container "{name}" must not set securityContext.privileged=true')


def _added_capabilities(sc: dict) -> list[str]:
    return [str(c) for c in _as_list(_as_dict(sc.get("capabilities")).get("add"))]


def _baseline_capabilities(ctx: _Context) -> None:
    for path, name, _, sc in ctx.containers():
        forbidden = {c for c in _added_capabilities(sc) if c not in BASELINE_CAPABILITIES}
        if forbidden:
            ctx.violation(f"{path}.securityContext.capabilities.add", "non-default capabilities",
                          f'container "{name}" must not include {_quoted(forbidden)} '
                          "in securityContext.capabilities.add")


def _volumes(ctx: _Context) -> Iterator[tuple[str, str, dict]]:
    for i, volume in enumerate(_as_list(ctx.spec.get("volumes"))):
        if isinstance(volume, dict):
            yield f"{ctx.spec_path}.volumes[{i}]", str(volume.get("name") or i), volume


def _host_path_volumes(ctx: _Context) -> None:
    for path, name, volume in _volumes(ctx):
        if volume.get("hostPath") is not None:
            ctx.violation(f"{path}.hostPath", "hostPath volumes", f'volume "{name}" uses hostPath')


def _baseline_seccomp(ctx: _Context) -> None:
    if _as_dict(ctx.pod_sc.get("seccompProfile")).get("type") == "Unconfined":
        ctx.violation(f"{ctx.pod_sc_path}.seccompProfile.type", "seccompProfile",
                      'pod must not set securityContext.seccompProfile.type to "Unconfined"')
    for path, name, _, sc in ctx.containers():
        if _as_dict(sc.get("seccompProfile")).get("type") == "Unconfined":
            ctx.violation(f"{path}.securityContext.seccompProfile.type", "seccompProfile",
                          f'container "{name}" must not set securityContext.seccompProfile.type to "Unconfined"')


def _apparmor_profiles(ctx: _Context) -> None:
    reason = "forbidden AppArmor profile"
    for key, value in _apparmor(ctx.meta).items():
        if value and value != "runtime/default" and not str(value).startswith("localhost/"):
            ctx.violation(f"{ctx.meta_path}.annotations[{key}]", reason, f'{key}="{value}"')
    if _as_dict(ctx.pod_sc.get("appArmorProfile")).get("type") == "Unconfined":
        ctx.violation(f"{ctx.pod_sc_path}.appArmorProfile.type", reason,
                      'pod must not set securityContext.appArmorProfile.type to "Unconfined"')
    for path, name, _, sc in ctx.containers():
        if _as_dict(sc.get("appArmorProfile")).get("type") == "Unconfined":
            ctx.violation(f"{path}.securityContext.appArmorProfile.type", reason,
                          f'container "{name}" must not set securityContext.appArmorProfile.type to "Unconfined"')


def _selinux(ctx: _Context) -> None:
    def one(sc_path: str, who: str, sc: dict) -> None:
        options = _as_dict(sc.get("seLinuxOptions"))
        if options.get("type", "") not in SELINUX_TYPES:
            ctx.violation(f"{sc_path}.seLinuxOptions.type", "seLinuxOptions",
                          f'{who} must not set securityContext.seLinuxOptions.type to "{options["type"]}"')
        for field in ("user", "role"):
            if options.get(field):
                ctx.violation(f"{sc_path}.seLinuxOptions.{field}", "seLinuxOptions",
                              f"{who} must not set securityContext.seLinuxOptions.{field}")

    one(ctx.pod_sc_path, "pod", ctx.pod_sc)
    for path, name, _, sc in ctx.containers():
        one(f"{path}.securityContext", f'container "{name}"', sc)


def _proc_mount(ctx: _Context) -> None:
    for path, name, _, sc in ctx.containers():
        mount = sc.get("procMount")
        if mount not in (None, "", "Default"):
            ctx.violation(f"{path}.securityContext.procMount", "procMount",
                          f'container "{name}" must not set securityContext.procMount to "{mount}"')


def _sysctls(ctx: _Context) -> None:
    for i, sysctl in enumerate(_as_list(ctx.pod_sc.get("sysctls"))):
        name = _as_dict(sysctl).get("name")
        if name not in SAFE_SYSCTLS:
            ctx.violation(f"{ctx.pod_sc_path}.sysctls[{i}].name", "forbidden sysctls", str(name))


# --------------------------------------------------------------------------- restricted


def _check_restricted(ctx: _Context) -> None:
    _restricted_volumes(ctx)
    _run_as_non_root(ctx)
    _run_as_user(ctx)
    if not ctx.windows:  # as Kubernetes: these do not apply to Windows pods
        _allow_privilege_escalation(ctx)
        _restricted_seccomp(ctx)
        _restricted_capabilities(ctx)


def _restricted_volumes(ctx: _Context) -> None:
    for path, name, volume in _volumes(ctx):
        for key, value in volume.items():
            if key != "name" and value is not None and key not in RESTRICTED_VOLUME_TYPES:
                ctx.violation(f"{path}.{key}", "restricted volume types",
                              f'volume "{name}" uses restricted volume type "{key}"')


def _allow_privilege_escalation(ctx: _Context) -> None:
    for path, name, _, sc in ctx.containers():
        if sc.get("allowPrivilegeEscalation") is not False:
            ctx.violation(f"{path}.securityContext.allowPrivilegeEscalation",
                          "allowPrivilegeEscalation != false",
                          f'container "{name}" must set securityContext.allowPrivilegeEscalation=false')


def _run_as_non_root(ctx: _Context) -> None:
    reason = "runAsNonRoot != true"
    pod_value = ctx.pod_sc.get("runAsNonRoot")
    if pod_value is False:
        ctx.violation(f"{ctx.pod_sc_path}.runAsNonRoot", reason,
                      "pod must not set securityContext.runAsNonRoot=false")
    for path, name, _, sc in ctx.containers():
        value = sc.get("runAsNonRoot")
        if value is False:
            ctx.violation(f"{path}.securityContext.runAsNonRoot", reason,
                          f'container "{name}" must not set securityContext.runAsNonRoot=false')
        elif value is None and pod_value is not True:
            ctx.violation(f"{path}.securityContext.runAsNonRoot", reason,
                          f'pod or container "{name}" must set securityContext.runAsNonRoot=true')


def _run_as_user(ctx: _Context) -> None:
    if ctx.pod_sc.get("runAsUser") == 0:
        ctx.violation(f"{ctx.pod_sc_path}.runAsUser", "runAsUser=0",
                      "pod must not set runAsUser=0")
    for path, name, _, sc in ctx.containers():
        if sc.get("runAsUser") == 0:
            ctx.violation(f"{path}.securityContext.runAsUser", "runAsUser=0",
                          f'container "{name}" must not set runAsUser=0')


def _restricted_seccomp(ctx: _Context) -> None:
    reason = "seccompProfile"
    pod_type = _as_dict(ctx.pod_sc.get("seccompProfile")).get("type")
    if pod_type is not None and pod_type not in SECCOMP_ALLOWED:
        ctx.violation(f"{ctx.pod_sc_path}.seccompProfile.type", reason,
                      f'pod must not set securityContext.seccompProfile.type to "{pod_type}"')
    for path, name, _, sc in ctx.containers():
        kind = _as_dict(sc.get("seccompProfile")).get("type")
        if kind is not None and kind not in SECCOMP_ALLOWED:
            ctx.violation(f"{path}.securityContext.seccompProfile.type", reason,
                          f'container "{name}" must not set securityContext.seccompProfile.type to "{kind}"')
        elif kind is None and pod_type not in SECCOMP_ALLOWED:
            ctx.violation(f"{path}.securityContext.seccompProfile.type", reason,
                          f'pod or container "{name}" must set securityContext.seccompProfile.type '
                          'to "RuntimeDefault" or "Localhost"')


def _restricted_capabilities(ctx: _Context) -> None:
    reason = "unrestricted capabilities"
    for path, name, _, sc in ctx.containers():
        caps = _as_dict(sc.get("capabilities"))
        if "ALL" not in [str(c) for c in _as_list(caps.get("drop"))]:
            ctx.violation(f"{path}.securityContext.capabilities.drop", reason,
                          f'container "{name}" must set securityContext.capabilities.drop=["ALL"]')
        forbidden = {c for c in _added_capabilities(sc) if c not in RESTRICTED_CAPABILITIES}
        if forbidden:
            ctx.violation(f"{path}.securityContext.capabilities.add", reason,
                          f'container "{name}" must not include {_quoted(forbidden)} '
                          "in securityContext.capabilities.add")
