"""Several control hosts (issue 17): three `kctl daemon`s on one etcd cluster, one leader, failover.

The session's test bed (h1-h3) gets control hosts c1-c3 (`TestBed.start_control(3)`: a
network namespace each on the bed's bridge, one member each of a 3-member TLS etcd
cluster). h1 and h2 are added to the etcd store with `kctl node add` + `node trust` from
this machine (an admin state folder: the store's key file and known_hosts), and every
control host runs `kctl daemon` in its namespace under its own hostname (leader identity
cN_0) on a copy of that folder (kctl.testing.hadaemons), with lease 6 s, renew deadline
4 s, retry 1 s. Then, with a Deployment of 2 replicas running on h1/h2:

- the leader's control host is cut: a daemon on another holds the Lease within the lease
  duration (+ slack for this loaded machine), a pod removed on its host (podman pod rm -f)
  gets a new container, `kctl get pods` run inside a surviving control host works;
- the host is healed: the old leader follows (it logged stepping down, it runs, the Lease
  stays with the new leader) and nothing runs twice: exactly the 2 replicas, every pod's
  container once on the hosts, for a while.

The control hosts, their etcd members and the daemons go after the module (stop_control
ends every process in their namespaces), whatever happened; the Deployment's namespace is
deleted through the store, and its containers on the hosts removed directly if that fails.
The hosts' fence folders (the leaders' terms, kctl.runtime.fencing) are removed before and
after, so other modules' daemons, on stores of their own, start from term 0 again.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from typing import TYPE_CHECKING, Iterator

import pytest

from integration.agent.conftest import wait_for
from kctl.runtime.interface import LABEL_CONTAINER, LABEL_POD_NAME, LABEL_POD_NAMESPACE, ContainerState
from kctl.runtime.podman import PodmanRuntime
from kctl.testing.hadaemons import ControlDaemons
from kctl.testing.testbed import TestBed, TestBedError

if TYPE_CHECKING:
    from kctl.apiserver.server import APIServer

pytestmark = pytest.mark.e2e

WORKERS = ("h1", "h2")
LEASE = 6              # --leader-elect-lease-duration
RENEW = 4.0            # --leader-elect-renew-deadline
RETRY = 1.0            # --leader-elect-retry-period
SLACK = 8.0            # seconds beyond the lease a takeover may take on a loaded 2-core machine
WAIT = 90.0            # seconds any other condition may take
NAMESPACE = "ha-e2e"
REPLICAS = 2
IMAGE = "localhost/busybox:demo"
SLEEP = "trap 'exit 0' TERM; sleep 3600 & wait"


@pytest.fixture(scope="module")
def ha(testbed: TestBed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlDaemons]:
    """c1-c3 with etcd and a daemon each, h1/h2 as Nodes of the etcd store, all Ready; removed after."""
    testbed.remove_fences()  # terms of earlier modules' leaders
    try:
        testbed.start_control(3)
    except TestBedError as error:
        pytest.fail(f"the control hosts did not come up: {error}")
    daemons: ControlDaemons | None = None
    try:
        daemons = ControlDaemons(testbed, tmp_path_factory.mktemp("ha"), lease_duration=LEASE,
                                 renew_deadline=RENEW, retry_period=RETRY, extra=(
                                     "--node-monitor-grace-period", "30", "--heartbeat", "1", "--resync", "2"))
        daemons.prepare()
        for name in WORKERS:
            daemons.check("node", "add", name, *testbed.node_add_args(name))
            daemons.check("node", "trust", name, "--yes")
        daemons.start()
        with daemons.api() as api:
            daemons.wait_leader(api, timeout=WAIT)
            for name in WORKERS:
                wait_for(lambda name=name: ready(api, name), what=f"node {name} Ready", timeout=WAIT,
                         detail=daemons.logs)
        yield daemons
    finally:
        if daemons is not None:
            with contextlib.suppress(Exception):
                remove_namespace(daemons, testbed)
            daemons.stop()
        testbed.stop_control()
        testbed.remove_fences()  # this module's terms would refuse the next module's first leader


def ready(api: APIServer, node: str) -> bool:
    """Whether the Node's Ready condition is True."""
    from kctl.machinery.errors import NotFound

    try:
        obj = api.get(api.resource("nodes"), node)
    except NotFound:
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


def deployment() -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [
                    {"name": "app", "image": IMAGE, "command": ["sh", "-c", SLEEP]}]}}}}


def app_containers(bed: TestBed) -> dict[str, list[ContainerState]]:
    """host -> the app containers (no infra) of the test's namespace on that host's Podman."""
    found: dict[str, list[ContainerState]] = {}
    for name in WORKERS:
        with contextlib.closing(PodmanRuntime(bed.host(name).url)) as runtime:
            found[name] = [c for c in runtime.list_containers({LABEL_POD_NAMESPACE: NAMESPACE})
                           if LABEL_CONTAINER in c.labels]
    return found


def running_pods(api: APIServer) -> list[dict]:
    """The namespace's pods that are Running and not being deleted."""
    pods = api.list(api.resource("pods"), namespace=NAMESPACE)[0]
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


def settled(api: APIServer, bed: TestBed) -> dict[str, ContainerState] | None:
    """pod name -> its one running app container, when exactly the replicas run, each on its own Node's
    host, once (None otherwise)."""
    pods = running_pods(api)
    containers = app_containers(bed)
    running = [(host, c) for host, found in containers.items() for c in found if c.state == "running"]
    if len(pods) != REPLICAS or len(running) != REPLICAS:
        return None
    by_pod = {c.labels.get(LABEL_POD_NAME): (host, c) for host, c in running}
    if len(by_pod) != REPLICAS:
        return None
    for pod in pods:
        where = by_pod.get(pod["metadata"]["name"])
        if where is None or where[0] != (pod.get("spec") or {}).get("nodeName"):
            return None
    return {name: c for name, (_, c) in by_pod.items()}


def remove_namespace(daemons: ControlDaemons, bed: TestBed) -> None:
    """Delete the test's namespace through the store; remove what is left of it on the hosts directly."""
    with contextlib.suppress(Exception):
        daemons.kctl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait", "--timeout", "60",
                     timeout=90)
    for name in WORKERS:
        socket = f"unix://{bed.host(name).socket}"
        listed = subprocess.run(["podman", "--remote", "--url", socket, "pod", "ps", "-q", "--filter",
                                 f"label={LABEL_POD_NAMESPACE}={NAMESPACE}"], capture_output=True, text=True,
                                timeout=60)
        for pod_id in listed.stdout.split():
            subprocess.run(["podman", "--remote", "--url", socket, "pod", "rm", "-f", "-t", "0", pod_id],
                           capture_output=True, timeout=120)


def test_leader_host_cut_then_healed(ha: ControlDaemons, testbed: TestBed) -> None:
    """Cut the leader's control host: another leads within the lease, a killed pod comes back, kctl works;
    heal: the old leader follows and every replica runs exactly once."""
    daemons, bed = ha, testbed
    daemons.check("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}).encode())
    daemons.check("apply", "-f", "-", input=json.dumps(deployment()).encode())
    with daemons.api() as api:
        wait_for(lambda: settled(api, bed), what=f"{REPLICAS} replicas running on h1/h2", timeout=WAIT,
                 detail=lambda: (app_containers(bed), daemons.logs()))
        old = daemons.leader(api)
    assert old is not None
    others = [name for name in daemons.names if name != old]

    bed.cut(old)
    cut_at = time.monotonic()
    with daemons.api(*others) as api:
        new, _ = daemons.wait_leader(api, timeout=LEASE + SLACK + 30, other_than=old)
        took = time.monotonic() - cut_at
        assert took <= LEASE + SLACK, f"{new} took the Lease {took:.1f} s after {old} was cut\n{daemons.logs()}"

        # a pod killed on its host comes back, driven by the new leader's agents
        before = settled(api, bed) or {}
        victim = next(iter(before.values()), None)
        assert victim is not None, f"the replicas do not run as they did before the cut: {app_containers(bed)}"
        host = next(h for h, found in app_containers(bed).items() if any(c.id == victim.id for c in found))
        removed = subprocess.run(["podman", "--remote", "--url", f"unix://{bed.host(host).socket}", "pod", "rm",
                                  "-f", "-t", "0", victim.pod_id], capture_output=True, text=True, timeout=120)
        assert removed.returncode == 0, removed.stderr
        replaced = wait_for(lambda: (now := settled(api, bed)) and victim.id not in {c.id for c in now.values()}
                            and now, what="the killed pod's container replaced", timeout=WAIT,
                            detail=lambda: (app_containers(bed), daemons.logs()))
        assert replaced

        # kctl answers through a surviving control host, its etcd address naming the cut member too
        listed = daemons.kctl("get", "pods", "-n", NAMESPACE, "-o", "name", host=others[0], timeout=90)
        assert listed.returncode == 0, listed.stderr.decode()
        assert len(listed.stdout.decode().split()) == REPLICAS

        bed.heal(old)
        # the old leader follows: it stepped down while cut, runs on, and never takes the Lease back
        wait_for(lambda: "stepping down" in daemons.daemons[old].log_text()
                 or "lost leadership" in daemons.daemons[old].log_text(),
                 what=f"{old}'s daemon stepping down", timeout=WAIT, detail=daemons.logs)
        deadline = time.monotonic() + 2 * LEASE
        while time.monotonic() < deadline:
            assert daemons.leader(api) == new, f"the Lease left {new} after {old} came back\n{daemons.logs()}"
            time.sleep(0.5)
        assert daemons.daemons[old].running, f"{old}'s daemon exited after the heal\n{daemons.logs()}"

        # nothing twice: exactly the replicas, each container once, and it stays so
        first = wait_for(lambda: settled(api, bed), what="exactly the replicas after the heal", timeout=WAIT,
                         detail=lambda: (app_containers(bed), daemons.logs()))
        time.sleep(3)
        assert settled(api, bed) == first, f"the replicas changed after the heal: {app_containers(bed)}"
    remove_namespace(daemons, bed)
