"""The cluster's network settings, where kubeadm keeps them: two ConfigMaps in kube-system.

`kctl daemon` knows the cluster CIDR (`--cluster-cidr`) and the cluster DNS address and domain
(`--cluster-dns`, `--cluster-domain`); node agents, also those in node mode on other hosts, need
them (the network plugin and kube-proxy: which traffic stays in the cluster; the pods'
resolv.conf). The daemon writes them, as kubeadm does, into

- `kube-system/kube-proxy`, key `config.conf`: a KubeProxyConfiguration with `clusterCIDR`
  (and `mode: nftables`);
- `kube-system/kubelet-config`, key `kubelet`: a KubeletConfiguration with `clusterDNS` and
  `clusterDomain`;

and agents read them (`read_cluster_network`, or `cluster_network_from` on cached ConfigMaps).
A store without them (no daemon ever ran) reads as the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from kctl.machinery.errors import AlreadyExists, Conflict, NotFound

NAMESPACE = "kube-system"
KUBE_PROXY_CONFIGMAP = "kube-proxy"
KUBELET_CONFIGMAP = "kubelet-config"

DEFAULT_CLUSTER_CIDR = "10.244.0.0/16"
DEFAULT_CLUSTER_DNS = "10.96.0.10"
DEFAULT_CLUSTER_DOMAIN = "cluster.local"


@dataclass(frozen=True)
class ClusterNetwork:
    """What every host must agree on: the pod range, the DNS Service's address, the DNS domain."""

    cluster_cidr: str = DEFAULT_CLUSTER_CIDR
    cluster_dns: tuple[str, ...] = (DEFAULT_CLUSTER_DNS,)
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN


def _load(text: str) -> dict:
    from kctl.manifests.yamlio import load_documents

    try:
        docs = load_documents(text, source="ConfigMap") if text.strip() else []
    except Exception:  # a hand-edited ConfigMap that is not YAML: the defaults
        return {}
    doc = docs[0][2] if docs else {}
    return doc if isinstance(doc, dict) else {}


def _dump(doc: dict) -> str:
    import json

    return json.dumps(doc, indent=2) + "\n"  # JSON is YAML; no writer import on this path


def configmaps(network: ClusterNetwork) -> list[dict]:
    """The two ConfigMaps that record `network`."""
    proxy = {"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
             "mode": "nftables", "clusterCIDR": network.cluster_cidr}
    kubelet = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
               "clusterDNS": list(network.cluster_dns), "clusterDomain": network.cluster_domain}
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "kctl"}},
             "data": {key: _dump(doc)}}
            for name, key, doc in ((KUBE_PROXY_CONFIGMAP, "config.conf", proxy),
                                   (KUBELET_CONFIGMAP, "kubelet", kubelet))]


def cluster_network_from(kube_proxy: dict | None, kubelet_config: dict | None) -> ClusterNetwork:
    """The settings in the two ConfigMaps (None: missing); defaults for what they lack."""
    proxy = _load(((kube_proxy or {}).get("data") or {}).get("config.conf", ""))
    kubelet = _load(((kubelet_config or {}).get("data") or {}).get("kubelet", ""))
    dns = kubelet.get("clusterDNS")
    return ClusterNetwork(
        cluster_cidr=str(proxy.get("clusterCIDR") or DEFAULT_CLUSTER_CIDR),
        cluster_dns=tuple(str(a) for a in dns) if isinstance(dns, list) and dns else (DEFAULT_CLUSTER_DNS,),
        cluster_domain=str(kubelet.get("clusterDomain") or DEFAULT_CLUSTER_DOMAIN))


def read_cluster_network(api) -> ClusterNetwork:
    """The settings as stored now."""
    rt = api.resource("configmaps")
    found = []
    for name in (KUBE_PROXY_CONFIGMAP, KUBELET_CONFIGMAP):
        try:
            found.append(api.get(rt, name, namespace=NAMESPACE))
        except NotFound:
            found.append(None)
    return cluster_network_from(*found)


def write_cluster_network(api, network: ClusterNetwork) -> None:
    """Record `network` (the daemon, when it starts): create the ConfigMaps or update their data."""
    rt = api.resource("configmaps")
    try:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    except AlreadyExists:
        pass
    for wanted in configmaps(network):
        name = wanted["metadata"]["name"]
        for _ in range(5):
            try:
                current = api.get(rt, name, namespace=NAMESPACE)
            except NotFound:
                try:
                    api.create(wanted, namespace=NAMESPACE)
                    break
                except AlreadyExists:
                    continue
            if current.get("data") == wanted["data"]:
                break
            try:
                api.update({**current, "data": wanted["data"]}, namespace=NAMESPACE)
                break
            except Conflict:
                continue


__all__ = ["ClusterNetwork", "cluster_network_from", "configmaps", "read_cluster_network", "write_cluster_network",
           "NAMESPACE", "KUBE_PROXY_CONFIGMAP", "KUBELET_CONFIGMAP", "DEFAULT_CLUSTER_CIDR", "DEFAULT_CLUSTER_DNS",
           "DEFAULT_CLUSTER_DOMAIN"]
