"""`kctl expose` as a user runs it: the Service kubectl's expose would make, created or printed; errors.

The expected objects follow kubectl's expose.go (generateService); test_expose_kubectl.py
compares the printed YAML with the real kubectl's. Also: `kctl describe node` shows the
PodCIDR that node-ipam-controller gave the Node.
"""

from __future__ import annotations

import json
import threading

import pytest

DEPLOY = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web, tier: fe}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: c
        image: nginx
        ports: [{containerPort: 8080, name: http}, {containerPort: 9090, protocol: UDP}]
---
apiVersion: v1
kind: Pod
metadata: {name: solo, labels: {run: solo}}
spec: {containers: [{name: c, image: nginx, ports: [{containerPort: 53, protocol: UDP},
                                                   {containerPort: 53, protocol: TCP}]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bare}
spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs-expr}
spec:
  selector: {matchExpressions: [{key: app, operator: In, values: [x]}]}
  template:
    metadata: {labels: {app: x}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
"""

WEB_80 = """apiVersion: v1
kind: Service
metadata:
  creationTimestamp: null
  labels:
    app: web
    tier: fe
  name: web
spec:
  ports:
  - port: 80
    protocol: TCP
    targetPort: 8080
  selector:
    app: web
status:
  loadBalancer: {}
"""


@pytest.fixture
def objects(kctl):
    """The workloads above, applied."""
    result = kctl("apply", "-f", "-", input=DEPLOY)
    assert result.code == 0, result.err


def test_dry_run_client_prints_kubectls_object(kctl, objects):
    """--dry-run=client -o yaml prints exactly what kubectl expose prints, and writes nothing."""
    result = kctl("expose", "deployment", "web", "--port", "80", "--target-port", "8080", "--dry-run=client",
                  "-o", "yaml")
    assert result.code == 0, result.err
    assert result.out == WEB_80
    assert kctl("get", "svc", "web").code != 0


@pytest.mark.parametrize("args, spec, metadata", [
    (["deploy/web"], {"ports": [{"name": "port-1", "port": 8080, "protocol": "TCP", "targetPort": 8080},
                                {"name": "port-2", "port": 9090, "protocol": "UDP", "targetPort": 9090}],
                      "selector": {"app": "web"}}, {"name": "web", "labels": {"app": "web", "tier": "fe"}}),
    (["deployment", "web", "--port", "80", "--type", "NodePort", "--name", "web-np", "--protocol", "TCP"],
     {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}], "selector": {"app": "web"}, "type": "NodePort"},
     {"name": "web-np", "labels": {"app": "web", "tier": "fe"}}),
    (["pod", "solo"], {"ports": [{"name": "port-1-udp", "port": 53, "protocol": "UDP", "targetPort": 53},
                                 {"name": "port-1-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}],
                       "selector": {"run": "solo"}}, {"name": "solo", "labels": {"run": "solo"}}),
    (["pod", "bare", "--port", "80", "--selector", "a=b,c=d", "-l", "team=x"],
     {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}], "selector": {"a": "b", "c": "d"}},
     {"name": "bare", "labels": {"team": "x"}}),
    (["deploy", "web", "--port", "80", "--cluster-ip", "None", "--target-port", "http"],
     {"ports": [{"port": 80, "protocol": "TCP", "targetPort": "http"}], "selector": {"app": "web"},
      "clusterIP": "None"}, {"name": "web", "labels": {"app": "web", "tier": "fe"}}),
], ids=["ports-found", "nodeport-named", "multi-protocol-pod", "selector-and-labels", "headless-named-target"])
def test_generated_service(kctl, objects, args, spec, metadata):
    """The selector, ports, protocols, labels and type are those kubectl's expose would use."""
    result = kctl("expose", *args, "--dry-run=client", "-o", "json")
    assert result.code == 0, result.err
    service = json.loads(result.out)
    assert service["spec"] == spec
    assert service["metadata"] == {"creationTimestamp": None, **metadata}
    assert service["status"] == {"loadBalancer": {}}


def test_expose_creates_service_with_addresses(kctl, objects, server):
    """Without --dry-run the Service is stored, with a ClusterIP and a node port from the API layer."""
    result = kctl("expose", "deployment", "web", "--port", "80", "--target-port", "8080", "--type", "NodePort")
    assert result.code == 0, result.err
    assert result.out == "service/web exposed\n"
    svc = server.get(server.resource("services"), "web", namespace="default")
    assert svc["spec"]["clusterIP"].startswith("10.96.")
    assert 30000 <= svc["spec"]["ports"][0]["nodePort"] <= 32767
    again = kctl("expose", "deployment", "web", "--port", "80")
    assert again.code == 4 and 'services "web" already exists' in again.err


def test_expose_of_a_service_and_output_name(kctl, objects):
    """A Service can be exposed under another name; -o name prints service/NAME."""
    assert kctl("expose", "deploy", "web", "--port", "80").code == 0
    result = kctl("expose", "svc", "web", "--name", "web2", "--port", "81", "-o", "name")
    assert result.code == 0, result.err
    assert result.out == "service/web2\n"
    got = kctl("get", "svc", "web2", "-o", "jsonpath={.spec.selector.app} {.spec.ports[0].targetPort}")
    assert got.out == "web 81"


def test_server_dry_run_shows_an_address_and_keeps_nothing(kctl, objects, server):
    """--dry-run=server goes through the API layer (an address is shown) and stores nothing."""
    result = kctl("expose", "deploy", "web", "--port", "80", "--dry-run=server", "-o", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["spec"]["clusterIP"].startswith("10.96.")
    assert server.list(server.resource("services"), namespace="default")[0] == []
    assert server.list(server.resource("ipaddresses"))[0] == []


@pytest.mark.parametrize("args, message, code", [
    (["configmap", "cfg", "--port", "80"], "error: cannot expose a ConfigMap", 1),
    (["pod", "bare", "--port", "80"],
     "error: couldn't retrieve selectors via --selector flag or introspection: the pod has no labels and cannot be "
     "exposed", 1),
    (["pod", "bare", "--selector", "a=b"], "error: couldn't find port via --port flag or introspection", 1),
    (["rs", "rs-expr", "--port", "80"], "couldn't convert expressions", 1),
    (["deploy", "web", "--port", "eighty"], 'error: --port: "eighty" is not a port number', 1),
    (["deploy", "nope"], 'Error from server (NotFound): deployments.apps "nope" not found', 3),
    (["deploy"], "error: You must provide the resource to expose", 2),
    (["deploy", "web", "--dry-run=maybe"], "Invalid dry-run value (maybe)", 2),
    (["deploy", "web", "--port", "80", "--type", "Bogus"],
     'spec.type: Unsupported value: "Bogus"', 6),
    (["deploy", "web", "--port", "80", "--cluster-ip", "10.1.2.3"],
     "provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/16", 6),
], ids=["not-exposable", "pod-without-labels", "no-port", "match-expressions", "bad-port", "not-found",
        "no-name", "bad-dry-run", "bad-type", "ip-out-of-range"])
def test_errors_are_one_line(kctl, objects, args, message, code):
    """Each refusal is one line on stderr with kubectl's (or the API's) message and a distinct exit status."""
    result = kctl("expose", *args)
    assert result.code == code, result.err
    assert message in result.err and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err


def test_describe_node_shows_pod_cidr(kctl, server):
    """`kctl describe node` shows the PodCIDR and PodCIDRs node-ipam-controller gave the Node."""
    from kctl.client.informer import InformerFactory
    from kctl.controllers.base import ControllerContext, Recorder
    from kctl.controllers.nodeipam import NodeIPAMController
    from kctl.testing.waiting import wait_for

    server.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "h1"}, "spec": {}})
    stop = threading.Event()
    informers = InformerFactory(server)
    ipam = NodeIPAMController()

    class _Queue:
        def add(self, key: str) -> None:
            pass

    ipam.register(ControllerContext(api=server, informers=informers, recorder=Recorder(server, component="t")),
                  _Queue())
    informers.start(stop)
    try:
        wait_for(lambda: ipam.nodes.get("", "h1") is not None, what="node cached")
        ipam.reconcile("h1")
    finally:
        stop.set()
    result = kctl("describe", "node", "h1")
    assert result.code == 0, result.err
    lines = [line.split() for line in result.out.splitlines()]
    assert ["PodCIDR:", "10.244.0.0/24"] in lines and ["PodCIDRs:", "10.244.0.0/24"] in lines
