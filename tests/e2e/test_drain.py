"""`kctl drain` honours a PodDisruptionBudget on the test bed (tests/e2e/conftest.py): issue 15's drain test.

A 3-replica Deployment with a PodDisruptionBudget of minAvailable 2 runs wholly on h1 (h2 and
h3 are cordoned while it starts, then uncordoned); `kctl drain h1` evicts through the Eviction
subresource: one pod at a time, each next eviction refused (kubectl's 429 line) until the
replacement of the last one is Ready on h2/h3 and the disruption controller allows another.
A watch of the namespace's pods, in revision order, checks that never fewer than 2 pods were
Ready (and not being deleted) once the three were up, and that evictions and replacements
alternate. Cleans up: every host uncordoned, the namespace deleted.
"""

from __future__ import annotations

import threading

import pytest

from kctl.apiserver.eviction import VIOLATION

from .conftest import HOSTS, Cluster

pytestmark = pytest.mark.e2e

IMAGE = "localhost/busybox:demo"
SLEEP = "trap 'exit 0' TERM; sleep 3600 & wait"  # stops at once on SIGTERM
WAIT = 30.0  # seconds the watcher thread may take to stop


def _deployment(namespace: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": namespace},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
                                         "command": ["sh", "-c", SLEEP]}]}}}}


def _budget(namespace: str) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}


def _ready(pod: dict) -> bool:
    """Ready and not being deleted (an evicted pod is terminating from the eviction's own revision)."""
    if pod["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


class ReadyCounter:
    """Follows the namespace's pods change by change: the Ready count after each, and evictions/readiness in order."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.api, self.namespace = cluster.api, namespace
        self.stop = threading.Event()
        self.pods: dict[str, dict] = {}
        self.counts: list[int] = []
        self.sequence: list[tuple[str, str]] = []  # ("evicted" | "ready", pod name)
        self.error: BaseException | None = None
        rt = self.api.resource("pods")
        items, rev = self.api.list(rt, namespace=namespace)
        self.pods = {p["metadata"]["name"]: p for p in items}
        self.thread = threading.Thread(target=self._run, args=(rt, rev), daemon=True)
        self.thread.start()

    def _run(self, rt, rev: int) -> None:
        try:
            for type_, obj in self.api.watch(rt, namespace=self.namespace, since=rev, stop=self.stop):
                name = obj["metadata"]["name"]
                before = self.pods.get(name)
                if type_ == "DELETED":
                    self.pods.pop(name, None)
                else:
                    self.pods[name] = obj
                    if before is not None and not before["metadata"].get("deletionTimestamp") \
                            and obj["metadata"].get("deletionTimestamp"):
                        self.sequence.append(("evicted", name))
                    if _ready(obj) and (before is None or not _ready(before)):
                        self.sequence.append(("ready", name))
                self.counts.append(sum(1 for p in self.pods.values() if _ready(p)))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def close(self) -> None:
        self.stop.set()
        self.thread.join(WAIT)


def test_drain_evicts_one_pod_at_a_time_under_a_budget(cluster: Cluster, namespace: str) -> None:
    """minAvailable 2 of 3 on h1: drain evicts one, waits for its replacement Ready, then the next; never < 2 Ready."""
    others = [h for h in HOSTS if h != "h1"]
    try:
        cordoned = cluster.kctl("cordon", *others)
        assert cordoned.returncode == 0, cordoned.stderr.decode()
        cluster.apply(_deployment(namespace), _budget(namespace))
        cluster.wait(lambda: sum(1 for p in cluster.pods(namespace) if _ready(p)) == 3, what="3 pods Ready on h1",
                     detail=lambda: [(p["metadata"]["name"], p["spec"].get("nodeName"))
                                     for p in cluster.pods(namespace)])
        originals = sorted(p["metadata"]["name"] for p in cluster.pods(namespace))
        assert {p["spec"]["nodeName"] for p in cluster.pods(namespace)} == {"h1"}
        uncordoned = cluster.kctl("uncordon", *others)
        assert uncordoned.returncode == 0, uncordoned.stderr.decode()

        def budget_status() -> dict:
            return cluster.api.get(cluster.api.resource("pdb"), "web", namespace=namespace).get("status") or {}

        cluster.wait(lambda: budget_status().get("disruptionsAllowed") == 1, what="the budget allows 1 disruption",
                     detail=budget_status)
        counter = ReadyCounter(cluster, namespace)
        try:
            drained = cluster.kctl("drain", "h1", "--ignore-daemonsets", "--timeout", "150s", timeout=200)
        finally:
            counter.close()
        out, err = drained.stdout.decode(), drained.stderr.decode()
        assert drained.returncode == 0, err + "\n" + cluster.daemon.log_text()[-3000:]
        assert counter.error is None, counter.error

        lines = out.splitlines()
        assert lines[0] == "node/h1 cordoned" and lines[-1] == "node/h1 drained"
        assert sorted(lines[1:-1]) == [f"pod/{name} evicted" for name in originals]
        refusals = [line for line in err.splitlines() if line.startswith("error when evicting pods/")]
        assert refusals and all(line.endswith(f'-n "{namespace}" (will retry after 5s): {VIOLATION}')
                                for line in refusals), err

        assert counter.counts and min(counter.counts) >= 2, counter.counts
        evictions = [name for kind, name in counter.sequence if kind == "evicted"]
        assert sorted(evictions) == originals, counter.sequence
        kinds = [kind for kind, _name in counter.sequence]
        # evicted, (its replacement) ready, evicted, ready, evicted[, ready]: never two evictions in a row
        assert all(not (a == b == "evicted") for a, b in zip(kinds, kinds[1:])), counter.sequence
        cluster.wait(lambda: sum(1 for p in cluster.pods(namespace) if _ready(p)) == 3,
                     what="3 pods Ready on h2/h3 after the drain")
        assert {p["spec"]["nodeName"] for p in cluster.pods(namespace) if _ready(p)} <= set(others)
    finally:
        cluster.kctl("uncordon", *HOSTS)
