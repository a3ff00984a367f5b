"""The root CA publisher: `kube-root-ca.crt` with the cluster CA in every active namespace, put back when changed."""

from __future__ import annotations

from lifecycle_harness import running, wait_for

from kctl.controllers.rootcacert import CA_RETRY_SECONDS, CONFIGMAP, RootCACertPublisher
from kctl.kubeapi.pki import PKI


def _ca_of(api, namespace: str) -> str | None:
    cm = api.find(api.resource("configmaps"), CONFIGMAP, namespace=namespace)
    return (cm or {}).get("data", {}).get("ca.crt")


def test_every_namespace_gets_the_ca_and_it_is_put_back(api):
    """Existing and new namespaces get the CA; a deleted or edited ConfigMap is restored."""
    pki = PKI.for_store(api.local_path)
    pki.ensure(sans=[])
    ca = pki.ca_pem().decode()
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    with running(api, [RootCACertPublisher()]):
        wait_for(lambda: _ca_of(api, "default") == ca and _ca_of(api, "team") == ca, what="CA published")
        cm = api.get(api.resource("configmaps"), CONFIGMAP, namespace="team")
        assert cm["metadata"]["annotations"]["kubernetes.io/description"].startswith("Contains a CA bundle")
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "late"}})
        wait_for(lambda: _ca_of(api, "late") == ca, what="CA in a new namespace")
        api.update({**cm, "data": {"ca.crt": "tampered"}})
        wait_for(lambda: _ca_of(api, "team") == ca, what="CA put back")
        api.delete(api.resource("configmaps"), CONFIGMAP, namespace="team")
        wait_for(lambda: _ca_of(api, "team") == ca, what="ConfigMap made again")


def test_no_ca_no_configmaps(api):
    """A store whose CA was never made gets no ConfigMaps (kctl without its HTTPS API is unchanged)."""
    controller = RootCACertPublisher()
    with running(api, [controller]):
        # the controller is set up on the manager's thread: its informer exists only once that has run
        wait_for(lambda: getattr(controller, "namespaces", None) is not None
                 and controller.namespaces.get("", "default") is not None, what="namespaces listed")
        assert controller.reconcile("default") is None
        controller.wait_for_ca = True  # a daemon serving the HTTPS API: look again until the CA exists
        assert controller.reconcile("default") == CA_RETRY_SECONDS
    assert _ca_of(api, "default") is None
