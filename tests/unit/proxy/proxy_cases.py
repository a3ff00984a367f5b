"""The Service/EndpointSlice cases the nftables renderer's golden files are made from.

Each case is (services, slices, node, node addresses); tests/unit/proxy/golden/<name>.nft
holds what `render` makes of it (KCTL_UPDATE_GOLDEN=1 rewrites them). A case named in
`CURRENT` is rendered with that `nft list table` listing as the table's current state.
"""

from __future__ import annotations

CLUSTER_CIDR = "10.244.0.0/16"
ADDRESSES = ["10.77.0.11"]


def svc(name: str, *, ns: str = "demo", cluster_ip: str | None = "10.96.0.20", type_: str = "ClusterIP",
        ports: list | None = None, **spec) -> dict:
    """A Service as the API layer stores it (ClusterIP allocated, nodePorts set)."""
    body = {"type": type_, "ports": ports if ports is not None else
            [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}], **spec}
    if cluster_ip is not None:
        body["clusterIP"] = cluster_ip
        body["clusterIPs"] = [cluster_ip]
    status = body.pop("status", None)
    out = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": body}
    if status:
        out["status"] = status
    return out


def ep(ip: str, node: str, *, ready: bool = True, serving: bool | None = None, terminating: bool = False) -> dict:
    """One EndpointSlice endpoint with the conditions the EndpointSlice controller writes."""
    return {"addresses": [ip], "nodeName": node,
            "conditions": {"ready": ready, "serving": ready if serving is None else serving,
                           "terminating": terminating}}


def eps(service: str, endpoints: list[dict], *, ns: str = "demo", ports: list | None = None,
        name: str | None = None) -> dict:
    """An EndpointSlice of a Service."""
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": name or f"{service}-abcde", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": service}},
            "endpoints": endpoints,
            "ports": ports if ports is not None else [{"name": "http", "port": 8080, "protocol": "TCP"}]}


THREE = [ep("10.244.1.2", "h1"), ep("10.244.2.2", "h2"), ep("10.244.3.2", "h3")]

#: name -> (services, slices, node, node addresses)
CASES: dict[str, tuple[list[dict], list[dict], str, list[str]]] = {
    # a ClusterIP Service over three replicas on three hosts: random pick among all three
    "clusterip": ([svc("web")], [eps("web", THREE)], "h1", ADDRESSES),
    # no ready endpoint (only the placeholder slice): ClusterIP and NodePort are rejected, not dropped
    "no-endpoints-reject": ([svc("web", type_="NodePort", ports=[
        {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}])],
        [eps("web", [], ports=[])], "h1", ADDRESSES),
    # NodePort on every node address, masqueraded (externalTrafficPolicy Cluster)
    "nodeport": ([svc("web", type_="NodePort", ports=[
        {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}])],
        [eps("web", THREE)], "h2", ["10.77.0.12", "192.168.50.2"]),
    # LoadBalancer as ServiceLB: the port on every host, its NodePort, the ingress IPs the status lists
    "loadbalancer": ([svc("web", type_="LoadBalancer", ports=[
        {"name": "http", "port": 8000, "targetPort": 8080, "protocol": "TCP", "nodePort": 31000}],
        status={"loadBalancer": {"ingress": [{"ip": "10.77.0.11"}, {"ip": "10.77.0.12"}]}})],
        [eps("web", THREE)], "h1", ADDRESSES),
    # sessionAffinity ClientIP: a dynamic set per endpoint with the Service's timeout
    "session-affinity": ([svc("web", sessionAffinity="ClientIP",
                              sessionAffinityConfig={"clientIP": {"timeoutSeconds": 600}})],
                         [eps("web", THREE[:2])], "h1", ADDRESSES),
    # externalTrafficPolicy Local with an endpoint on this node: external traffic only to it, not masqueraded
    "external-local-here": ([svc("web", type_="NodePort", externalTrafficPolicy="Local", ports=[
        {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}])],
        [eps("web", THREE[:2])], "h2", ["10.77.0.12"]),
    # externalTrafficPolicy Local with no endpoint on this node: external traffic dropped here
    "external-local-elsewhere": ([svc("web", type_="NodePort", externalTrafficPolicy="Local", ports=[
        {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}])],
        [eps("web", THREE[:2])], "h3", ["10.77.0.13"]),
    # internalTrafficPolicy Local: ClusterIP traffic to this node's endpoint; another Service with none here drops
    "internal-local": ([svc("web", internalTrafficPolicy="Local"),
                        svc("api", cluster_ip="10.96.0.21", internalTrafficPolicy="Local")],
                       [eps("web", THREE), eps("api", [ep("10.244.2.7", "h2")])], "h1", ADDRESSES),
    # a terminating endpoint gets no new connections while another is ready ...
    "terminating": ([svc("web")], [eps("web", [ep("10.244.1.2", "h1"),
                                               ep("10.244.2.2", "h2", ready=False, serving=True, terminating=True),
                                               ep("10.244.3.2", "h3", ready=False)])], "h1", ADDRESSES),
    # ... and only when none is ready do serving terminating endpoints take them (kube-proxy's fallback)
    "terminating-only": ([svc("web")], [eps("web", [
        ep("10.244.1.2", "h1", ready=False, serving=True, terminating=True),
        ep("10.244.2.2", "h2", ready=False, serving=False, terminating=True)])], "h1", ADDRESSES),
    # several ports: named ports resolved per pod (two slices), a UDP port, a port only some pods have
    "multi-port": ([svc("dns", cluster_ip="10.96.0.10", ports=[
        {"name": "dns", "port": 53, "targetPort": "dns", "protocol": "UDP"},
        {"name": "dns-tcp", "port": 53, "targetPort": "dns-tcp", "protocol": "TCP"},
        {"name": "metrics", "port": 9153, "protocol": "TCP"}])],
        [eps("dns", [ep("10.244.1.5", "h1")], name="dns-aaaaa", ports=[
            {"name": "dns", "port": 5353, "protocol": "UDP"}, {"name": "dns-tcp", "port": 5353, "protocol": "TCP"},
            {"name": "metrics", "port": 9153, "protocol": "TCP"}]),
         eps("dns", [ep("10.244.2.5", "h2")], name="dns-bbbbb", ports=[
             {"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}])],
        "h1", ADDRESSES),
    # what gets no rules: headless and ExternalName Services; a Service with no ClusterIP yet keeps its NodePort
    "no-rules": ([svc("headless", cluster_ip="None"), svc("ext", cluster_ip=None, type_="ExternalName",
                                                           externalName="example.com"),
                  svc("pending", cluster_ip=None, type_="NodePort", ports=[
                      {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30090}])],
                 [eps("headless", THREE), eps("pending", THREE[:1])], "h1", ADDRESSES),
    # two LoadBalancer Services want one port on the hosts: the first (by namespace/name) keeps it
    "port-conflict": ([svc("a", type_="LoadBalancer", ports=[
        {"name": "http", "port": 8000, "protocol": "TCP", "nodePort": 31001}]),
        svc("b", cluster_ip="10.96.0.21", type_="LoadBalancer", ports=[
            {"name": "http", "port": 8000, "protocol": "TCP", "nodePort": 31002}])],
        [eps("a", THREE[:1], ports=[{"name": "http", "port": 8000, "protocol": "TCP"}]),
         eps("b", THREE[1:2], ports=[{"name": "http", "port": 8000, "protocol": "TCP"}])], "h1", ADDRESSES),
    # externalIPs lead to the Service like its ClusterIP (masqueraded like node ports)
    "external-ips": ([svc("web", externalIPs=["192.0.2.10"])], [eps("web", THREE[:1])], "h1", ADDRESSES),
}

#: what `nft list table ip kctl` printed before an in-place sync (a Service since removed)
LISTING = """table ip kctl {
	comment "kctl: Service rules (kube-proxy); replaced as a whole by kctl, do not edit"
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.99 . tcp . 80 : goto service-OLDOLDOL-demo/old/tcp/http }
	}
	set node-addresses {
		type ipv4_addr
		elements = { 10.77.0.11 }
	}
	set affinity-STALESET {
		type ipv4_addr
		size 65535
		flags dynamic,timeout
		timeout 3h
	}
	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
	}
	chain service-OLDOLDOL-demo/old/tcp/http {
		meta l4proto tcp dnat to 10.244.9.9:8080
	}
}
"""

CASES["in-place"] = CASES["session-affinity"]
#: case name -> the listing it is rendered against (render's `current`)
CURRENT = {"in-place": LISTING}
