"""An in-pod client reads the API with its mounted ServiceAccount token: kubectl's in-cluster config in a real pod.

What this proves, end to end on real Podman: while the daemon serves the HTTPS API, the `kubernetes`
Service (10.96.0.1:443) and its EndpointSlice exist, `kube-root-ca.crt` is published, a new pod gets the
`kube-api-access-*` volume, the node agent writes a pod-bound token, ca.crt and namespace into it and
sets KUBERNETES_SERVICE_HOST/PORT; inside the pod, the real kubectl (copied into an image: a static
binary; busybox's wget cannot do the server's TLS) uses exactly those (in-cluster config, verifying the
serving certificate for 10.96.0.1 against ca.crt), reaches the daemon through the Service's virtual IP
(kctl's nftables proxy), and is the ServiceAccount: what its Role allows works, the rest is 403.

Pods cannot reach a daemon on 127.0.0.1, so this module runs its own daemon listening on an address of a
bridge it makes for the purpose (198.18.77.1, the benchmarking range; removed after), not the shared
`kube_daemon` (loopback).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from .conftest import KUBECTL, NODE, START_WAIT, KubeDaemon, _node_ready, free_port, remove_kctl_objects, \
    wait_for

BRIDGE = "kctlh2api"
ADDRESS = "198.18.77.1"
IMAGE = "localhost/kubectl:incluster"
WAIT = 120.0


class BridgeDaemon(KubeDaemon):
    """A KubeDaemon listening on ADDRESS instead of loopback."""

    def start(self) -> None:
        import os
        import sys

        argv = [sys.executable, "-m", "kctl", "daemon", "--store", str(self.store), "--node", NODE,
                "--podman-url", self.podman_url, "--resync", "1", "--heartbeat", "1", "--backoff-initial", "0.5",
                "--backoff-max", "2", "--cluster-dns-port", "0", "--listen", f"{ADDRESS}:{self.port}",
                "--log-level", "debug"]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                            env={**os.environ, "KCTL_STORE": str(self.store)})

    @property
    def url(self) -> str:
        return f"https://{ADDRESS}:{self.port}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def _build_image(podman_service) -> None:
    """IMAGE: the demo busybox image plus the host's static kubectl."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as context:
        shutil.copy(Path(KUBECTL).resolve(), Path(context) / "kubectl")
        (Path(context) / "Containerfile").write_text(
            'FROM localhost/busybox:demo\nCOPY kubectl /bin/kubectl\nRUN ["/bin/busybox", "mkdir", "-p", "/tmp"]\n')
        result = subprocess.run(["podman", "--url", podman_service.url, "build", "--quiet", "-t", IMAGE, context],
                                capture_output=True, text=True, timeout=300,
                                env={**os.environ, "CONTAINERS_CONF": podman_service.conf})
    if result.returncode != 0:
        pytest.fail(f"building {IMAGE} failed: {result.stderr.strip()}")


@pytest.fixture(scope="module")
def bridge_daemon(podman_service, tmp_path_factory) -> Iterator[BridgeDaemon]:
    """A daemon serving on ADDRESS (a bridge of this module's own), its node Ready, the kubectl image built."""
    if not Path(KUBECTL).exists():
        pytest.fail(f"kubectl is needed at {KUBECTL}: the real client these tests run (this machine kind has it)")
    if _ip("link", "show", BRIDGE, check=False).returncode == 0:
        pytest.fail(f"a link {BRIDGE} exists already")
    _build_image(podman_service)
    folder = tmp_path_factory.mktemp("incluster-daemon")
    daemon = BridgeDaemon(store=folder / "kctl.db", podman_url=podman_service.url, port=free_port(), folder=folder)
    try:
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{ADDRESS}/32", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        daemon.start()
        wait_for(lambda: daemon.kctl("get", "nodes").returncode == 0, what="the store", daemon=daemon,
                 timeout=START_WAIT)
        wait_for(lambda: (daemon.folder / "kctl.db.pki" / "ca.crt").exists(), what="the PKI", daemon=daemon,
                 timeout=START_WAIT)
        config = daemon.kctl("config", "kubeconfig", "--server", daemon.url)
        assert config.returncode == 0, config.stderr
        daemon.kubeconfig.write_text(config.stdout)
        daemon.kubeconfig.chmod(0o600)
        wait_for(lambda: _node_ready(daemon), what=f"node {NODE} Ready", daemon=daemon, timeout=START_WAIT)
        yield daemon
    finally:
        daemon.stop()
        remove_kctl_objects(podman_service.url)
        _ip("link", "del", BRIDGE, check=False)


RBAC = textwrap.dedent("""\
    apiVersion: rbac.authorization.k8s.io/v1
    kind: Role
    metadata: {name: pod-reader, namespace: default}
    rules:
    - apiGroups: [""]
      resources: [pods]
      verbs: [get, list]
    ---
    apiVersion: rbac.authorization.k8s.io/v1
    kind: RoleBinding
    metadata: {name: default-reads-pods, namespace: default}
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
    subjects:
    - {kind: ServiceAccount, name: default, namespace: default}
    """)

SCRIPT = ("export HOME=/tmp; "
          "echo host=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; "
          "echo ns=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace); "
          "kubectl get pods -o name; echo pods-rc=$?; "
          "kubectl get secrets 2>&1; echo secrets-rc=$?")

POD = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "incluster", "namespace": "default"},
                  "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                           "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                           "command": ["sh", "-c", SCRIPT]}]}})


def test_pod_reads_the_api_with_its_token(bridge_daemon):
    """A pod's kubectl (in-cluster config) lists pods as system:serviceaccount:default:default and is refused
    secrets with Kubernetes' 403 text."""
    daemon = bridge_daemon
    wait_for(lambda: daemon.kubectl("get", "endpointslice", "kubernetes", "-o",
                                    "jsonpath={.endpoints[0].addresses[0]}").stdout == ADDRESS,
             what="the kubernetes Service's EndpointSlice", daemon=daemon, timeout=WAIT)
    wait_for(lambda: daemon.kubectl("get", "configmap", "kube-root-ca.crt").returncode == 0,
             what="kube-root-ca.crt published", daemon=daemon, timeout=WAIT)
    wait_for(lambda: daemon.kubectl("get", "serviceaccount", "default").returncode == 0,
             what="the default ServiceAccount", daemon=daemon, timeout=WAIT)
    applied = daemon.kubectl("apply", "-f", "-", input=RBAC)
    assert applied.returncode == 0, applied.stderr
    created = daemon.kubectl("apply", "-f", "-", input=POD)
    assert created.returncode == 0, created.stderr
    volumes = daemon.kubectl("get", "pod", "incluster", "-o", "jsonpath={.spec.volumes[*].name}").stdout
    assert volumes.startswith("kube-api-access-"), volumes
    wait_for(lambda: daemon.kubectl("get", "pod", "incluster", "-o", "jsonpath={.status.phase}").stdout
             in ("Succeeded", "Failed"), what="the pod to finish", daemon=daemon, timeout=WAIT)
    logs = daemon.kctl("logs", "incluster").stdout
    assert "host=10.96.0.1:443" in logs and "ns=default" in logs, logs
    assert "pod/incluster" in logs and "pods-rc=0" in logs, logs
    assert 'User "system:serviceaccount:default:default" cannot list resource "secrets"' in logs, logs
    assert "secrets-rc=1" in logs, logs
