"""The cluster network settings in kube-system's kube-proxy and kubelet-config ConfigMaps (clusterconfig)."""

from __future__ import annotations

from kctl.client.clusterconfig import (ClusterNetwork, cluster_network_from, configmaps, read_cluster_network,
                                       write_cluster_network)


def test_a_store_without_them_reads_as_the_defaults(api) -> None:
    """No daemon ever ran: Kubernetes' defaults."""
    assert read_cluster_network(api) == ClusterNetwork()


def test_written_settings_read_back_and_a_rewrite_updates_them(api) -> None:
    """The daemon writes its flags; agents read them; a restart with other flags changes them."""
    write_cluster_network(api, ClusterNetwork(cluster_cidr="10.50.0.0/16", cluster_dns=("10.60.0.10",),
                                              cluster_domain="corp.local"))
    assert read_cluster_network(api) == ClusterNetwork("10.50.0.0/16", ("10.60.0.10",), "corp.local")
    write_cluster_network(api, ClusterNetwork(cluster_cidr="10.51.0.0/16"))
    assert read_cluster_network(api).cluster_cidr == "10.51.0.0/16"


def test_a_configmap_that_is_not_yaml_reads_as_the_defaults() -> None:
    """A hand-broken ConfigMap does not stop an agent."""
    broken = {"data": {"config.conf": "{{{not yaml"}}
    assert cluster_network_from(broken, None) == ClusterNetwork()


def test_the_configmaps_are_kubeadms_shapes() -> None:
    """kube-proxy's config.conf holds clusterCIDR; kubelet-config's kubelet holds clusterDNS and clusterDomain."""
    proxy, kubelet = configmaps(ClusterNetwork())
    assert (proxy["metadata"]["name"], kubelet["metadata"]["name"]) == ("kube-proxy", "kubelet-config")
    assert '"clusterCIDR": "10.244.0.0/16"' in proxy["data"]["config.conf"]
    assert '"clusterDomain": "cluster.local"' in kubelet["data"]["kubelet"]
