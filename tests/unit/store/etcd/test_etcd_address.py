"""etcd addresses (`etcd://h:p[,h:p...][/prefix]`) and the key layout, without an etcd."""

from __future__ import annotations

import pytest

from kctl.store.etcd.address import EtcdAddress, EtcdTLS, is_etcd_address, parse_address
from kctl.store.etcd.keys import Layout, kind_of, segment


@pytest.mark.parametrize("text, endpoints, prefix", [
    ("etcd://10.0.0.1:2379", ("10.0.0.1:2379",), "/registry"),
    ("etcd://10.0.0.1", ("10.0.0.1:2379",), "/registry"),
    ("etcd://a:1,b:2,c:3/kctl", ("a:1", "b:2", "c:3"), "/kctl"),
    ("etcd://h:2379/team/one/", ("h:2379",), "/team/one"),
    ("etcd://h:2379/", ("h:2379",), "/registry"),
    ("etcd://[::1]:2379/x", ("[::1]:2379",), "/x"),
    ("etcd://localhost:02379", ("localhost:2379",), "/registry"),
], ids=["one", "default-port", "three-prefix", "nested-prefix", "slash-only", "ipv6", "leading-zero"])
def test_parse_address(text, endpoints, prefix):
    """Valid addresses give their members and key prefix (default /registry)."""
    address = parse_address(text)
    assert address == EtcdAddress(endpoints, prefix)
    assert parse_address(str(address)) == address


@pytest.mark.parametrize("text, words", [
    ("http://h:2379", "starts with etcd://"),
    ("etcd://", "no etcd member"),
    ("etcd://h:0", "no valid port"),
    ("etcd://h:99999", "no valid port"),
    ("etcd://h:x", "no valid port"),
    ("etcd://h_bad:1", "is not host:port"),
    ("etcd://a:1,,b:2", "is not host:port"),
    ("etcd://a:1,a:1", "listed twice"),
    ("etcd://a:1/pre fix", "key prefix"),
], ids=["scheme", "empty", "port-0", "port-big", "port-text", "bad-host", "empty-member", "twice", "prefix"])
def test_parse_address_refuses_bad_input(text, words):
    """Bad addresses raise ValueError with one line that names the address and what is wrong."""
    with pytest.raises(ValueError) as info:
        parse_address(text)
    message = str(info.value)
    assert words in message and text.split("/")[0] in message and "\n" not in message


def test_is_etcd_address_and_tls():
    """etcd:// is an etcd address, a path is not; TLS is on iff a CA or a certificate is given."""
    assert is_etcd_address("etcd://h:1") and not is_etcd_address("/var/lib/kctl.db")
    assert not EtcdTLS().enabled and EtcdTLS(ca_file="ca").enabled and EtcdTLS(cert_file="c", key_file="k").enabled


@pytest.mark.parametrize("kind, namespace, name, key", [
    ("ConfigMap", "default", "a", "/registry/configmaps/default/a"),
    ("Namespace", "", "default", "/registry/namespaces/default"),
    ("Deployment.apps", "team", "web", "/registry/deployments/team/web"),
    ("Lease.coordination.k8s.io", "kube-system", "l", "/registry/leases/kube-system/l"),
    ("PodMetrics.metrics.k8s.io", "default", "p", "/registry/pods.metrics.k8s.io/default/p"),
    ("GitSource.kctl.io", "default", "g", "/registry/gitsources.kctl.io/default/g"),
    ("Widget.example.com", "default", "w", "/registry/Widget.example.com/default/w"),
], ids=["core", "cluster-scoped", "apps", "coordination", "shared-plural", "kctl-group", "custom"])
def test_key_layout_is_kubernetes(kind, namespace, name, key):
    """Objects live at <prefix>/<resource>/<namespace>/<name> (cluster-scoped: no namespace) and parse back."""
    layout = Layout("/registry")
    assert layout.object(kind, namespace, name) == key
    assert layout.parse(key) == (kind, namespace, name)
    assert kind_of(segment(kind)) == kind


def test_own_keys_are_not_objects():
    """kctl's own keys (under <prefix>/.kctl/) and other prefixes' keys parse to None."""
    layout = Layout("/registry")
    assert layout.parse(layout.head) is None and layout.parse(layout.marker("Pod")) is None
    assert layout.parse("/registry2/pods/default/a") is None
