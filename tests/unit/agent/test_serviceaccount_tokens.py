"""Projected serviceAccountToken volumes and the `kubernetes` Service's env (kctl.agent.serviceaccounttokens, env)."""

from __future__ import annotations

import pytest
from podharness import config_map, container, make_pod

from kctl.admission.plugins.serviceaccount import TOKEN_MOUNT_PATH, token_volume_source
from kctl.agent.env import kubernetes_service_env, resolve_env
from kctl.agent.serviceaccounttokens import TokenManager
from kctl.agent.volumes import VolumeError, volume_files
from kctl.machinery.errors import NotFound


class FakeTokenAPI:
    """An API whose create_token answers numbered tokens and records each request."""

    def __init__(self, *, fail: bool = False) -> None:
        self.requests: list[tuple[str, str, dict]] = []
        self.fail = fail

    def create_token(self, namespace: str, name: str, token_request: dict) -> dict:
        self.requests.append((namespace, name, token_request))
        if self.fail:
            raise NotFound("serviceaccounts", name)
        return {"status": {"token": f"token-{len(self.requests)}"}}


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_token_is_bound_to_the_pod_and_cached():
    """The request names the pod's ServiceAccount, binds the token to the pod, and is made once while fresh."""
    api, clock = FakeTokenAPI(), Clock()
    tokens = TokenManager(api, now=clock)
    pod = make_pod(serviceAccountName="robot")
    assert tokens.token(pod, expiration_seconds=3607) == "token-1"
    clock.t += 2000
    assert tokens.token(pod, expiration_seconds=3607) == "token-1"
    namespace, name, request = api.requests[0]
    assert (namespace, name) == ("default", "robot")
    assert request["spec"] == {"audiences": [], "expirationSeconds": 3607, "boundObjectRef": {
        "apiVersion": "v1", "kind": "Pod", "name": "web", "uid": pod["metadata"]["uid"]}}


def test_token_is_refreshed_at_80_percent_of_its_life():
    """Past 80% of the token's life a new one is asked for."""
    api, clock = FakeTokenAPI(), Clock()
    tokens = TokenManager(api, now=clock)
    pod = make_pod()
    tokens.token(pod, expiration_seconds=1000)
    clock.t += 799
    assert tokens.token(pod, expiration_seconds=1000) == "token-1"
    clock.t += 2
    assert tokens.token(pod, expiration_seconds=1000) == "token-2"


def test_refused_token_is_a_mount_error():
    """An API refusal (no such ServiceAccount) is a VolumeError with the kubelet's words."""
    tokens = TokenManager(FakeTokenAPI(fail=True))
    with pytest.raises(VolumeError, match='failed to fetch token: serviceaccounts "default" not found'):
        tokens.token(make_pod())


def test_kube_api_access_volume_files():
    """The injected volume's files: token, ca.crt from kube-root-ca.crt, namespace; mode 0644."""
    pod = make_pod()
    objects = {("ConfigMap", "default", "kube-root-ca.crt"): config_map("kube-root-ca.crt", {"ca.crt": "PEM"})}
    files = volume_files(pod, {"name": "kube-api-access-abcde", "projected": token_volume_source()},
                         lambda kind, ns, name: objects.get((kind, ns, name)),
                         tokens=TokenManager(FakeTokenAPI()))
    assert files == {"token": (b"token-1", 0o644), "ca.crt": (b"PEM", 0o644), "namespace": (b"default", 0o644)}


def test_token_volume_written_into_container_and_refreshed(node):
    """A pod with the volume gets the token file before it starts, and the new token after a refresh."""
    api = FakeTokenAPI()
    node.ctx.tokens = TokenManager(api, now=node.clock)
    node.put(config_map("kube-root-ca.crt", {"ca.crt": "PEM"}))
    volume = {"name": "kube-api-access-abcde", "projected": token_volume_source()}
    mount = {"name": "kube-api-access-abcde", "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}
    node.sync(make_pod(containers=[container("app", volumeMounts=[mount])], volumes=[volume]))
    app = node.running_id("app")
    assert node.runtime.read_file(app, f"{TOKEN_MOUNT_PATH}/token") == (b"token-1", 0o644)
    assert node.runtime.read_file(app, f"{TOKEN_MOUNT_PATH}/namespace") == (b"default", 0o644)
    node.advance(3607 * 0.8 + 1)
    node.sync()
    assert len(api.requests) == 2
    assert node.runtime.volume_files(next(iter(node.runtime.list_volumes({}))))["token"][0] == b"token-2"


SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kubernetes", "namespace": "default"},
           "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                                          "targetPort": 6443}]}}


def test_kubernetes_service_env_matches_the_kubelet():
    """The kubelet's variables for the `kubernetes` Service."""
    assert kubernetes_service_env(SERVICE) == {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_SERVICE_PORT_HTTPS": "443", "KUBERNETES_PORT": "tcp://10.96.0.1:443",
        "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1"}
    assert kubernetes_service_env(None) == {}


def test_container_env_overrides_and_expands_service_env():
    """The container's own env wins over the service variables and may refer to them."""
    pod = make_pod(containers=[container("app", env=[{"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
                                                     {"name": "API", "value": "$(KUBERNETES_SERVICE_HOST)"}])])
    env, errors = resolve_env(pod, pod["spec"]["containers"][0], lookup=lambda *a: None, node_name="n1",
                              host_ip="10.0.0.1", pod_ip="10.244.0.5", base=kubernetes_service_env(SERVICE))
    assert not errors
    assert env["KUBERNETES_SERVICE_PORT"] == "6443" and env["API"] == "10.96.0.1"
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"


def test_service_env_reaches_the_container(node):
    """SyncContext.service_env is every new container's base environment."""
    node.ctx.service_env = lambda: kubernetes_service_env(SERVICE)
    node.sync(make_pod())
    spec_env = node.runtime._containers[node.running_id("app")].spec.env  # noqa: SLF001 - test peek
    assert spec_env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
