"""container_spec and sandbox_spec: a Pod's containers as runtime specs, names and labels."""

from __future__ import annotations

import pytest
from podharness import container, make_pod

from kctl.agent.containers import (
    LABEL_IMAGE,
    container_spec,
    pull_policy,
    sandbox_spec,
    security_error,
    spec_hash,
)
from kctl.runtime.interface import (
    LABEL_CONTAINER,
    LABEL_CONTAINER_KIND,
    LABEL_MANAGED,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    LABEL_RESTART,
    LABEL_SPEC_HASH,
    Mount,
    PortMapping,
)


def spec_of(app: dict, *, pod_fields: dict | None = None, restart: int = 0, kind: str = "app"):
    pod = make_pod(containers=[app], **(pod_fields or {}))
    return container_spec(pod, app, kind=kind, env={"A": "1"}, mounts=(Mount(target="/d", volume="v"),),
                          restart_count=restart)


def test_labels_and_name() -> None:
    """Labels name the pod, the container, its kind, spec hash, restart count and image."""
    app = container("app")
    spec = spec_of(app, restart=3, kind="init")
    assert spec.name == "kctl_default_web_web-0123_app_3"
    assert spec.labels == {LABEL_MANAGED: "true", LABEL_POD_UID: "web-0123-4567-89ab-cdef",
                           LABEL_POD_NAMESPACE: "default", LABEL_POD_NAME: "web", LABEL_CONTAINER: "app",
                           LABEL_CONTAINER_KIND: "init", LABEL_SPEC_HASH: spec_hash(app), LABEL_RESTART: "3",
                           LABEL_IMAGE: app["image"]}
    assert spec.env == {"A": "1"} and spec.mounts == (Mount(target="/d", volume="v"),)


def test_spec_hash_is_stable() -> None:
    """The hash ignores key order and changes with the content."""
    a = {"name": "app", "image": "x", "args": ["1"]}
    assert spec_hash(a) == spec_hash(dict(reversed(list(a.items()))))
    assert spec_hash(a) != spec_hash({**a, "image": "y"})


@pytest.mark.parametrize(("fields", "attr", "expected"), [
    ({"command": ["sh", "-c"], "args": ["echo $(A)"]}, ("entrypoint", "command"), (["sh", "-c"], ["echo 1"])),
    ({}, ("entrypoint", "command"), (None, None)),
    ({"workingDir": "/srv"}, ("working_dir",), ("/srv",)),
    ({"resources": {"limits": {"cpu": "250m", "memory": "128Mi"}}}, ("cpu_limit_millis", "memory_limit_bytes"),
     (250, 128 * 1024 * 1024)),
    ({"resources": {"limits": {"cpu": "1.5", "memory": "1G"}}}, ("cpu_limit_millis", "memory_limit_bytes"),
     (1500, 10 ** 9)),
    ({"resources": {"requests": {"cpu": "1"}}}, ("cpu_limit_millis", "memory_limit_bytes"), (None, None)),
    ({"securityContext": {"runAsUser": 1000, "runAsGroup": 2000}}, ("user",), ("1000:2000",)),
    ({"securityContext": {"runAsUser": 1000}}, ("user",), ("1000",)),
    ({"securityContext": {"runAsGroup": 2000}}, ("user",), (None,)),
    ({"securityContext": {"readOnlyRootFilesystem": True, "privileged": True}},
     ("read_only_rootfs", "privileged"), (True, True)),
    ({"securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}}}, ("cap_add", "cap_drop"),
     (("NET_ADMIN",), ("ALL",))),
    ({"stdin": True, "tty": True}, ("stdin", "tty"), (True, True)),
], ids=["command-args-expanded", "image-defaults", "working-dir", "limits", "limits-decimal", "requests-only",
        "user-group", "user", "group-alone-dropped", "readonly-privileged", "capabilities", "stdin-tty"])
def test_container_fields(fields: dict, attr: tuple[str, ...], expected: tuple) -> None:
    """Pod spec fields map onto ContainerSpec fields."""
    spec = spec_of(container("app", **fields))
    assert tuple(getattr(spec, a) for a in attr) == expected


def test_pod_security_context_is_fallback() -> None:
    """runAsUser/runAsGroup of the pod apply unless the container sets its own."""
    pod_fields = {"securityContext": {"runAsUser": 10, "runAsGroup": 20}}
    assert spec_of(container("app"), pod_fields=pod_fields).user == "10:20"
    own = container("app", securityContext={"runAsUser": 30})
    assert spec_of(own, pod_fields=pod_fields).user == "30:20"


@pytest.mark.parametrize(("pod_context", "own", "error"), [
    ({"runAsNonRoot": True, "runAsUser": 0}, {}, "container's runAsUser breaks non-root policy"),
    ({"runAsNonRoot": True}, {"runAsUser": 0}, "container's runAsUser breaks non-root policy"),
    ({"runAsNonRoot": True}, {"runAsUser": 1000}, None),
    ({}, {"runAsUser": 0}, None),
], ids=["pod-root", "container-root", "non-root-ok", "root-allowed"])
def test_security_error(pod_context: dict, own: dict, error: str | None) -> None:
    """runAsNonRoot with user 0 is refused as the kubelet does."""
    pod = make_pod(securityContext=pod_context)
    assert security_error(pod, container("app", securityContext=own)) == error


@pytest.mark.parametrize(("image", "policy", "expected"), [
    ("busybox", None, "Always"), ("busybox:latest", None, "Always"), ("busybox:1.36", None, "IfNotPresent"),
    ("localhost:5000/busybox", None, "Always"), ("busybox@sha256:abc", None, "IfNotPresent"),
    ("busybox:1.36", "Never", "Never"),
], ids=["no-tag", "latest", "tag", "registry-port", "digest", "explicit"])
def test_pull_policy(image: str, policy: str | None, expected: str) -> None:
    """imagePullPolicy defaults as the API server's."""
    app = {"name": "app", "image": image, **({"imagePullPolicy": policy} if policy else {})}
    assert pull_policy(app) == expected


def test_sandbox_spec() -> None:
    """The Podman pod: name, labels, hostname and the hostPorts of every container."""
    app = container("app", ports=[{"containerPort": 8080, "hostPort": 18080}, {"containerPort": 9090}])
    dns = container("dns", ports=[{"containerPort": 53, "hostPort": 1053, "protocol": "UDP", "hostIP": "127.0.0.1"}])
    spec = sandbox_spec(make_pod(containers=[app, dns]))
    assert spec.name == "kctl_default_web_web-0123"
    assert spec.hostname == "web"
    assert spec.labels[LABEL_POD_UID] == "web-0123-4567-89ab-cdef" and spec.labels[LABEL_MANAGED] == "true"
    assert spec.port_mappings == (PortMapping(8080, 18080, "TCP", ""), PortMapping(53, 1053, "UDP", "127.0.0.1"))
    assert sandbox_spec(make_pod(hostname="custom")).hostname == "custom"
