"""kctl.ops.portforward: kubectl's port parsing, listen addresses, pod choice, port resolution, and the route."""

from __future__ import annotations

import pytest

from kctl.ops.portforward import (ForwardedPort, PortForwardError, Reach, most_active_first, parse_addresses,
                                  parse_ports, resolve_ports, route_for, selector_for, split_ports, target_of)
from kctl.ops.portrelay import ListenAddress


@pytest.mark.parametrize("specs, expected", [
    (["8080:80"], [ForwardedPort(8080, 80)]),
    (["80"], [ForwardedPort(80, 80)]),
    ([":80"], [ForwardedPort(0, 80)]),
    (["0:80"], [ForwardedPort(0, 80)]),
    (["5000", "6000:7000"], [ForwardedPort(5000, 5000), ForwardedPort(6000, 7000)]),
], ids=["local-remote", "same", "random-local", "zero-local", "several"])
def test_parse_ports(specs, expected):
    """[LOCAL:]REMOTE as client-go's parsePorts reads it."""
    assert parse_ports(specs) == expected


@pytest.mark.parametrize("spec, message", [
    ("1:2:3", "invalid port format '1:2:3'"),
    ("x:80", "error parsing local port 'x': strconv.ParseUint: parsing \"x\": invalid syntax"),
    ("80:70000", "error parsing remote port '70000': strconv.ParseUint: parsing \"70000\": value out of range"),
    ("80:", "error parsing remote port '': strconv.ParseUint: parsing \"\": invalid syntax"),
    (":0", "remote port must be > 0"),
    ("-1", "error parsing local port '-1': strconv.ParseUint: parsing \"-1\": invalid syntax"),
], ids=["three-parts", "bad-local", "out-of-range", "empty-remote", "zero-remote", "negative"])
def test_parse_ports_errors(spec, message):
    """A bad port is client-go's message."""
    with pytest.raises(PortForwardError) as caught:
        parse_ports([spec])
    assert str(caught.value) == message


@pytest.mark.parametrize("given, expected", [
    (["localhost"], [ListenAddress("127.0.0.1", 4, required=False), ListenAddress("::1", 6, required=False)]),
    (["0.0.0.0"], [ListenAddress("0.0.0.0", 4)]),
    (["::", "localhost", "10.0.0.1"], [ListenAddress("10.0.0.1", 4), ListenAddress("127.0.0.1", 4, required=False),
                                       ListenAddress("::", 6), ListenAddress("::1", 6, required=False)]),
    (["127.0.0.1", "localhost"], [ListenAddress("127.0.0.1", 4), ListenAddress("::1", 6, required=False)]),
], ids=["localhost", "any-v4", "mixed-sorted", "ip-beats-localhost"])
def test_parse_addresses(given, expected):
    """localhost is 127.0.0.1 and ::1 (either may fail), an IP must listen; sorted by address."""
    assert parse_addresses(given) == expected


def test_parse_addresses_rejects_names():
    """A name other than localhost is kubectl's 'is not a valid IP'."""
    with pytest.raises(PortForwardError, match="^example.com is not a valid IP$"):
        parse_addresses(["example.com"])


@pytest.mark.parametrize("args, message", [
    ([], "TYPE/NAME and list of ports are required for port-forward"),
    (["pod/x"], "TYPE/NAME and list of ports are required for port-forward"),
], ids=["nothing", "no-port"])
def test_split_ports_needs_two(args, message):
    """Fewer than TYPE/NAME and one port is kubectl's usage error."""
    with pytest.raises(PortForwardError, match=message):
        split_ports(args)


@pytest.mark.parametrize("resource, expected", [
    ("web", ("pods", "web")), ("pod/web", ("pod", "web")), ("svc/web", ("svc", "web")),
    ("deploy/web", ("deploy", "web")),
], ids=["bare", "pod", "svc", "deploy"])
def test_target_of(resource, expected):
    """A bare name is a pod; TYPE/NAME otherwise."""
    assert target_of(resource) == expected


def pod(name: str, *, node: str = "n1", phase: str = "Running", ready: bool | None = True,
        ready_since: str = "2026-01-01T00:00:10Z", restarts: int = 0,
        created: str = "2026-01-01T00:00:00Z") -> dict:
    conditions = [] if ready is None else [{"type": "Ready", "status": "True" if ready else "False",
                                            "lastTransitionTime": ready_since}]
    return {"metadata": {"name": name, "creationTimestamp": created},
            "spec": {"nodeName": node, "containers": [{"name": "c"}]},
            "status": {"phase": phase, "conditions": conditions,
                       "containerStatuses": [{"name": "c", "restartCount": restarts}]}}


@pytest.mark.parametrize("pods, first", [
    ([pod("unassigned", node=""), pod("assigned", phase="Pending", ready=False)], "assigned"),
    ([pod("pending", phase="Pending", ready=False), pod("running", ready=False)], "running"),
    ([pod("unknown", phase="Unknown", ready=False), pod("pending", phase="Pending", ready=False)], "unknown"),
    ([pod("unready", ready=False), pod("ready")], "ready"),
    ([pod("recent", ready_since="2026-01-01T00:05:00Z"), pod("long", ready_since="2026-01-01T00:01:00Z")], "long"),
    ([pod("crashy", restarts=3), pod("steady", restarts=0)], "steady"),
    ([pod("young", created="2026-01-02T00:00:00Z"), pod("old", created="2026-01-01T00:00:00Z")], "old"),
    ([pod("failed", phase="Failed", ready=False), pod("unknown", phase="Unknown", ready=False)], "unknown"),
], ids=["assigned-first", "running-first", "unknown-before-pending", "ready-first", "longest-ready-first",
        "fewest-restarts-first", "oldest-first", "failed-ranks-below-unknown"])
def test_most_active_first(pods, first):
    """The pod kubectl picks for a Service or workload: sort.Reverse(podutils.ActivePods)."""
    assert most_active_first(pods)[0]["metadata"]["name"] == first
    assert most_active_first(list(reversed(pods)))[0]["metadata"]["name"] == first


@pytest.mark.parametrize("obj, message", [
    ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {}},
     "cannot attach to *v1.Service: invalid service 'x': Service is defined without a selector"),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
     "cannot attach to *v1.ConfigMap: selector for *v1.ConfigMap not implemented"),
], ids=["service-without-selector", "configmap"])
def test_selector_errors(obj, message):
    """Objects without a pod selector are kubectl's 'cannot attach to' errors."""
    with pytest.raises(PortForwardError) as caught:
        selector_for(obj, obj["kind"])
    assert str(caught.value) == message


@pytest.mark.parametrize("obj, kind, labels, selected", [
    ({"spec": {"selector": {"app": "web"}}}, "Service", {"app": "web", "x": "y"}, True),
    ({"spec": {"selector": {"matchLabels": {"app": "web"}}}}, "Deployment.apps", {"app": "db"}, False),
    ({"spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}}},
     "StatefulSet.apps", {"app": "b"}, True),
    ({"spec": {"selector": {"app": "web"}}}, "ReplicationController", {"app": "web"}, True),
], ids=["service", "deployment", "statefulset-expressions", "replicationcontroller"])
def test_selector_for(obj, kind, labels, selected):
    """The selectors of Services and workloads (matchExpressions too)."""
    assert selector_for(obj, kind).matches(labels) is selected


POD = {"metadata": {"name": "web-1"},
       "spec": {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080},
                                                        {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]},
       "status": {"podIP": "10.244.1.5"}}
SERVICE = {"metadata": {"name": "web"},
           "spec": {"clusterIP": "10.96.0.9", "ports": [
               {"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"},
               {"name": "alt", "port": 81, "targetPort": 9000, "protocol": "TCP"},
               {"name": "same", "port": 82, "protocol": "TCP"},
               {"name": "dns", "port": 53, "targetPort": 53, "protocol": "UDP"}]}}


@pytest.mark.parametrize("specs, service, expected", [
    (["8080"], None, ["8080"]),
    (["9000:http"], None, ["9000:8080"]),
    (["http"], None, ["8080"]),
    ([":http"], None, [":8080"]),
    (["80"], SERVICE, ["80:8080"]),
    (["web"], SERVICE, ["80:8080"]),
    (["7000:web"], SERVICE, ["7000:8080"]),
    ([":81"], SERVICE, [":9000"]),
    (["82"], SERVICE, ["82"]),
], ids=["pod-number", "pod-named", "pod-named-same", "pod-named-random", "svc-port-to-named-target",
        "svc-named-port", "svc-named-with-local", "svc-number-target", "svc-no-target"])
def test_resolve_ports(specs, service, expected):
    """Named container ports and Service ports become the pod's port numbers, as kubectl translates them."""
    assert resolve_ports(specs, POD, service=service) == expected


def test_resolve_ports_headless_keeps_the_port():
    """A headless Service's port is forwarded as the same port on the pod."""
    headless = {"metadata": {"name": "h"}, "spec": {"clusterIP": "None", "ports": [{"port": 80, "targetPort": 1}]}}
    assert resolve_ports(["80"], POD, service=headless) == ["80"]


@pytest.mark.parametrize("specs, service, message", [
    (["nope"], None, "Pod 'web-1' does not have a named port 'nope'"),
    (["nope"], SERVICE, "Service 'web' does not have a named port 'nope'"),
    (["99"], SERVICE, "Service web does not have a service port 99"),
    (["53"], None, "UDP protocol is not supported for 53"),
    (["dns"], SERVICE, "UDP protocol is not supported for dns"),
], ids=["pod-unknown-name", "svc-unknown-name", "svc-unknown-number", "pod-udp", "svc-udp"])
def test_resolve_ports_errors(specs, service, message):
    """Unknown names, ports a Service lacks, and UDP-only ports are kubectl's errors."""
    with pytest.raises(PortForwardError) as caught:
        resolve_ports(specs, POD, service=service)
    assert str(caught.value) == message


def node(url: str, **annotations: str) -> dict:
    return {"metadata": {"name": "n1", "annotations": {"kctl.io/podman-url": url, **annotations}}}


def _value(argv: tuple[str, ...], flag: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


def test_route_local_pod_is_direct():
    """A pod on a unix:// (local) Podman is dialed straight at its IP."""
    route = route_for(POD, node("unix:///run/podman/podman.sock"), 8080, Reach())
    assert (route.host, route.port, route.ssh) == ("10.244.1.5", 8080, None)


def test_route_host_network_pod_on_local_host_dials_loopback():
    """A hostNetwork pod on this host is reached on 127.0.0.1, as kubelet dials localhost in its namespace."""
    host_pod = {**POD, "spec": {**POD["spec"], "hostNetwork": True}, "status": {"podIP": "192.0.2.7"}}
    assert route_for(host_pod, node("unix:///run/podman/podman.sock"), 80, Reach()).host == "127.0.0.1"


def test_route_node_mode_pod_is_direct_to_pod_ip():
    """A node-mode host's pod (unix:// on that host) is dialed at its IP over the pod network."""
    from kctl.agent.node import AGENT_NODE_MODE, ANNOTATION_AGENT

    route = route_for(POD, node("unix:///run/podman/podman.sock", **{ANNOTATION_AGENT: AGENT_NODE_MODE}), 8080,
                      Reach())
    assert (route.host, route.ssh) == ("10.244.1.5", None)


def test_route_node_mode_host_network_pod_is_its_hosts_address():
    """A hostNetwork pod on a node-mode host (not this machine) is dialed at its host's address, not loopback."""
    from kctl.agent.node import AGENT_NODE_MODE, ANNOTATION_AGENT

    host_pod = {**POD, "spec": {**POD["spec"], "hostNetwork": True}, "status": {"podIP": "192.0.2.7"}}
    route = route_for(host_pod, node("unix:///run/podman/podman.sock", **{ANNOTATION_AGENT: AGENT_NODE_MODE}), 80,
                      Reach())
    assert (route.host, route.ssh) == ("192.0.2.7", None)


def test_route_ssh_host_uses_ssh_w_with_the_nodes_key():
    """A pod on an ssh:// host: `ssh -W podIP:port` there with the Node's key and known_hosts, keys checked."""
    route = route_for(POD, node("ssh://core@h1.example:2222/run/podman.sock", **{
        "kctl.io/ssh-identity": "/keys/id", "kctl.io/ssh-known-hosts": "/kctl/known_hosts"}), 8080,
        Reach(known_hosts="/store/known_hosts"))
    argv = route.ssh
    assert argv is not None and argv[0] == "ssh" and argv[-1] == "core@h1.example"
    assert _value(argv, "-W") == ["10.244.1.5:8080"] and _value(argv, "-p") == ["2222"]
    assert _value(argv, "-i") == ["/keys/id"]
    assert "StrictHostKeyChecking=yes" in argv and "UserKnownHostsFile=/kctl/known_hosts" in argv
    assert route.via == "h1.example:2222"


def test_route_ssh_host_falls_back_to_the_stores_known_hosts():
    """A Node without its own known_hosts annotation uses the one beside the store."""
    route = route_for(POD, node("ssh://root@h1/run/podman.sock"), 80, Reach(known_hosts="/store/known_hosts"))
    assert "UserKnownHostsFile=/store/known_hosts" in route.ssh


def test_route_ssh_host_network_pod_is_the_hosts_loopback():
    """A hostNetwork pod on an ssh:// host: `ssh -W 127.0.0.1:port`, the host's own loopback."""
    host_pod = {**POD, "spec": {**POD["spec"], "hostNetwork": True}, "status": {"podIP": "192.0.2.7"}}
    route = route_for(host_pod, node("ssh://root@h1/run/podman.sock"), 80, Reach())
    assert _value(route.ssh, "-W") == ["127.0.0.1:80"]


def test_route_ipv6_pod_ip_is_bracketed():
    """ssh -W takes an IPv6 address in brackets."""
    v6 = {**POD, "status": {"podIP": "fd00::5"}}
    assert _value(route_for(v6, node("ssh://root@h1/s.sock"), 80, Reach()).ssh, "-W") == ["[fd00::5]:80"]


def test_route_with_server_local_pod_goes_through_the_control_host():
    """With --server, a pod on the control host's own Podman: `ssh -W` to the control host, the client's key."""
    route = route_for(POD, node("unix:///run/podman/podman.sock"), 8080,
                      Reach(server_url="ssh://admin@control:2200/var/lib/kctl/kctl.db", server_identity="/me/id"))
    assert route.ssh[-1] == "admin@control" and _value(route.ssh, "-W") == ["10.244.1.5:8080"]
    assert _value(route.ssh, "-i") == ["/me/id"] and _value(route.ssh, "-p") == ["2200"]


def test_route_with_server_ssh_pod_runs_the_nodes_ssh_on_the_control_host():
    """With --server, a pod on an ssh:// host: the control host runs `ssh -W` with the Node's key there."""
    import shlex

    route = route_for(POD, node("ssh://root@h1:22/run/podman.sock", **{"kctl.io/ssh-identity": "/srv/key"}), 8080,
                      Reach(server_url="ssh://admin@control/var/lib/kctl/kctl.db"))
    assert route.ssh[-2] == "admin@control" and "-W" not in route.ssh
    inner = shlex.split(route.ssh[-1])
    assert inner[0] == "ssh" and inner[-1] == "root@h1" and _value(tuple(inner), "-W") == ["10.244.1.5:8080"]
    assert _value(tuple(inner), "-i") == ["/srv/key"]
    assert "UserKnownHostsFile=/var/lib/kctl/known_hosts" in inner


def test_route_needs_a_pod_ip():
    """A pod without an IP yet cannot be reached."""
    with pytest.raises(PortForwardError, match="has no IP address yet"):
        route_for({**POD, "status": {}}, node("unix:///x.sock"), 80, Reach())
