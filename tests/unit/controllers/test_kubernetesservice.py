"""The `kubernetes` Service controller: default/kubernetes and its EndpointSlice point at the HTTPS API."""

from __future__ import annotations

import pytest
from lifecycle_harness import running, wait_for

from kctl.controllers.kubernetesservice import KubernetesServiceController, KubernetesServiceSettings
from kctl.daemon.controllers import CONTROLLERS
from kctl.daemon.settings import DaemonSettings

SETTINGS = KubernetesServiceSettings(cluster_ip="10.96.0.1", port=6443, advertise_addresses=("192.0.2.7",))


def _service(api):
    return api.find(api.resource("services"), "kubernetes", namespace="default")


def _slice(api):
    return api.find(api.resource("endpointslices"), "kubernetes", namespace="default")


def test_service_and_slice_are_kubernetes_shape_and_kept(api):
    """The Service (10.96.0.1, https 443 -> 6443) and its slice (the advertise address) exist and are put back."""
    with running(api, [KubernetesServiceController(settings=SETTINGS)]):
        wait_for(lambda: _service(api) is not None and _slice(api) is not None, what="service and slice")
        service = _service(api)
        assert service["spec"]["clusterIP"] == "10.96.0.1" and not service["spec"].get("selector")
        assert service["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]
        assert service["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
        slice_ = _slice(api)
        assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == "kubernetes"
        assert [e["addresses"] for e in slice_["endpoints"]] == [["192.0.2.7"]]
        assert slice_["ports"] == [{"name": "https", "port": 6443, "protocol": "TCP"}]
        api.update({**slice_, "endpoints": []})
        wait_for(lambda: len(_slice(api)["endpoints"]) == 1, what="slice put back")
        api.delete(api.resource("services"), "kubernetes", namespace="default")
        wait_for(lambda: _service(api) is not None, what="service made again")


def test_without_listen_nothing_is_made(api):
    """A daemon that does not serve the HTTPS API makes no kubernetes Service."""
    controller = CONTROLLERS["kubernetes-service"](DaemonSettings())
    assert controller.settings.port is None
    assert controller.reconcile("default/kubernetes") is None
    assert _service(api) is None


@pytest.mark.parametrize("host, addresses", [
    ("192.0.2.9", ("192.0.2.9",)),
    ("127.0.0.1", ()),
    ("localhost", ()),
], ids=["address", "loopback", "loopback-name"])
def test_daemon_settings_become_controller_settings(host, addresses):
    """--listen's port is the target port; its address is advertised unless loopback; 10.96.0.1 is the IP."""
    controller = CONTROLLERS["kubernetes-service"](DaemonSettings(listen=(host, 7443)))
    assert controller.settings == KubernetesServiceSettings(cluster_ip="10.96.0.1", port=7443,
                                                            advertise_addresses=addresses)


def test_wildcard_listen_advertises_a_host_address():
    """0.0.0.0 advertises the host's default-route address (never loopback)."""
    controller = CONTROLLERS["kubernetes-service"](DaemonSettings(listen=("0.0.0.0", 6443)))
    assert all(not a.startswith("127.") for a in controller.settings.advertise_addresses)
