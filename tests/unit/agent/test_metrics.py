"""The metrics scraper (kctl.agent.metrics) against a MemoryRuntime and a real API: what it writes, deletes, owns."""

from __future__ import annotations

import logging

import pytest

from kctl.agent.metrics import MetricsScraper, cpu_quantity, go_duration, memory_quantity
from kctl.machinery.selectors import parse_label_selector
from kctl.runtime.interface import (LABEL_CONTAINER, LABEL_MANAGED, LABEL_POD_UID, ContainerSpec, HostStats,
                                    PodSandboxSpec)
from kctl.runtime.memory import FakeClock, MemoryRuntime

NODE = "n1"
START = 1_800_000_000.0  # 2027-01-15T08:00:00Z
MI = 1024 * 1024


class CountingAPI:
    """The API with its write_all calls counted (everything else passed through)."""

    def __init__(self, api) -> None:
        self._api = api
        self.write_calls: list[list[tuple[str, dict]]] = []

    def write_all(self, ops, **kwargs):
        self.write_calls.append(list(ops))
        return self._api.write_all(ops, **kwargs)

    def __getattr__(self, name):
        return getattr(self._api, name)


class Bed:
    """A node: the API with its Node, Pods bound to it, their containers on a MemoryRuntime, and a scraper."""

    def __init__(self, api, *, synced: bool = True) -> None:
        self.api = CountingAPI(api)
        self.clock = FakeClock(start=START)
        self.runtime = MemoryRuntime(images={"img"}, clock=self.clock)
        self.node = api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
        self.pods: dict[str, dict] = {}
        self.containers: dict[tuple[str, str], str] = {}  # (pod, container) -> container id
        self.synced = synced
        self.scraper = self.new_scraper()

    def new_scraper(self) -> MetricsScraper:
        return MetricsScraper(self.api, NODE, self.runtime, pod=self.pods.get, bound_uids=lambda: list(self.pods),
                              synced=lambda: self.synced, resolution=15.0)

    def pod(self, name: str, *containers: str, labels: dict[str, str] | None = None,
            namespace: str = "default") -> dict:
        """A Pod bound here with its containers running."""
        pod = self.api.create({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
                               "spec": {"nodeName": NODE,
                                        "containers": [{"name": c, "image": "img"} for c in containers]}})
        uid = pod["metadata"]["uid"]
        self.pods[uid] = pod
        sandbox = self.runtime.create_pod(PodSandboxSpec(name=name, labels={LABEL_MANAGED: "true",
                                                                            LABEL_POD_UID: uid}))
        for c in containers:
            cid = self.runtime.create_container(sandbox.id, ContainerSpec(
                name=f"{name}-{c}", image="img",
                labels={LABEL_MANAGED: "true", LABEL_POD_UID: uid, LABEL_CONTAINER: c}))
            self.runtime.start_container(cid)
            self.containers[(name, c)] = cid
        return pod

    def use(self, pod: str, container: str, *, cpu_seconds: float, memory: int) -> None:
        self.runtime.set_usage(self.containers[(pod, container)], cpu_nanos=round(cpu_seconds * 1e9),
                               memory_bytes=memory)

    def metrics(self, selector: str | None = None) -> dict[str, dict]:
        items, _ = self.api.list(self.api.resource("pods.metrics.k8s.io"), namespace=None,
                                 label_selector=parse_label_selector(selector) if selector else None)
        return {i["metadata"]["name"]: i for i in items}

    def node_metrics(self) -> dict | None:
        return self.api.find(self.api.resource("nodes.metrics.k8s.io"), NODE)


@pytest.fixture
def bed(api) -> Bed:
    return Bed(api)


@pytest.mark.parametrize("nanocores, expected", [
    (0, "0"), (2_000_000_000, "2"), (250_000_000, "250m"), (12_345_678, "12345678n"), (5_000, "5u"),
    (1_500_000_000, "1500m"),
], ids=["zero", "cores", "millicores", "nanocores", "microcores", "cores-and-a-half"])
def test_cpu_quantity_as_apimachinery_writes_it(nanocores: int, expected: str) -> None:
    """Nanocores become the canonical quantity of resource.NewScaledQuantity(n, Nano)."""
    assert cpu_quantity(nanocores) == expected


@pytest.mark.parametrize("size, expected", [
    (0, "0"), (471040, "460Ki"), (3 * MI, "3Mi"), (2 * 1024 ** 3, "2Gi"), (1000, "1000"), (MI + 1, "1048577"),
], ids=["zero", "ki", "mi", "gi", "bytes", "odd"])
def test_memory_quantity_as_binary_si(size: int, expected: str) -> None:
    """Bytes become a BinarySI quantity: the largest suffix dividing them, else plain bytes."""
    assert memory_quantity(size) == expected


@pytest.mark.parametrize("seconds, expected", [
    (15, "15s"), (2.003, "2.003s"), (0.5, "0.5s"), (60.5, "1m0.5s"), (3725, "1h2m5s"), (0, "0s"),
], ids=["whole", "millis", "half", "minute", "hours", "zero"])
def test_window_as_go_duration(seconds: float, expected: str) -> None:
    """The window is printed as Go's time.Duration prints it (to the millisecond)."""
    assert go_duration(seconds) == expected


def test_first_round_writes_nothing_second_writes_rates(bed: Bed) -> None:
    """A container's first sample gives no rate; the second gives PodMetrics shaped as metrics-server's."""
    pod = bed.pod("web-1", "app", "side", labels={"app": "web"})
    bed.use("web-1", "app", cpu_seconds=10, memory=3 * MI)
    bed.use("web-1", "side", cpu_seconds=1, memory=471040)
    assert bed.scraper.scrape().written == []
    assert bed.metrics() == {}
    bed.clock.advance(10)
    bed.use("web-1", "app", cpu_seconds=12.5, memory=4 * MI)  # 2.5 s of CPU in 10 s: 250m
    bed.use("web-1", "side", cpu_seconds=1.0001234, memory=471040)
    bed.scraper.scrape()
    stored = bed.metrics()["web-1"]
    assert stored["apiVersion"] == "metrics.k8s.io/v1beta1" and stored["kind"] == "PodMetrics"
    assert stored["metadata"]["labels"] == {"app": "web"}
    assert stored["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "web-1",
                                                      "uid": pod["metadata"]["uid"]}]
    assert stored["timestamp"] == "2027-01-15T08:00:10Z" and stored["window"] == "10s"
    assert stored["containers"] == [{"name": "app", "usage": {"cpu": "250m", "memory": "4Mi"}},
                                    {"name": "side", "usage": {"cpu": "12340n", "memory": "460Ki"}}]


def test_one_write_per_round_for_many_pods_and_the_node(bed: Bed) -> None:
    """However many pods, a round makes one write_all: every PodMetrics and the NodeMetrics together."""
    for i in range(5):
        bed.pod(f"p{i}", "c")
    bed.scraper.scrape()
    bed.clock.advance(15)
    bed.runtime.host_usage = HostStats(cpu_nanos=3_000_000_000, memory_used_bytes=2 * 1024 ** 3, timestamp=0)
    bed.scraper.scrape()
    bed.clock.advance(15)
    bed.scraper.scrape()
    assert len(bed.api.write_calls) == 2
    assert sorted(op for op, _ in bed.api.write_calls[0]) == ["create"] * 6
    assert sorted(op for op, _ in bed.api.write_calls[1]) == ["update"] * 6
    assert len(bed.metrics()) == 5


def test_node_metrics_rate_memory_and_owner(bed: Bed) -> None:
    """NodeMetrics: the host's busy CPU over the window, its memory in use, owned by the Node."""
    bed.runtime.host_usage = HostStats(cpu_nanos=100_000_000_000, memory_used_bytes=0, timestamp=0)
    bed.scraper.scrape()
    assert bed.node_metrics() is None
    bed.clock.advance(20)
    bed.runtime.host_usage = HostStats(cpu_nanos=130_000_000_000, memory_used_bytes=2748180 * 1024, timestamp=0)
    bed.scraper.scrape()
    node = bed.node_metrics()
    assert node["usage"] == {"cpu": "1500m", "memory": "2748180Ki"} and node["window"] == "20s"
    assert node["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": NODE,
                                                    "uid": bed.node["metadata"]["uid"]}]
    assert node["timestamp"] == "2027-01-15T08:00:20Z"


def test_node_metrics_carry_the_nodes_current_labels(bed: Bed) -> None:
    """NodeMetrics carry the Node's labels, read each round (as metrics-server's: `kubectl top node -l`)."""
    bed.runtime.host_usage = HostStats(cpu_nanos=0, memory_used_bytes=MI, timestamp=0)
    bed.scraper.scrape()
    bed.api.patch(bed.api.resource("nodes"), NODE, {"metadata": {"labels": {"zone": "a"}}})
    for cpu in (1, 2):
        bed.clock.advance(15)
        bed.runtime.host_usage = HostStats(cpu_nanos=cpu * 10**9, memory_used_bytes=MI, timestamp=0)
        bed.scraper.scrape()
        if cpu == 1:
            assert bed.node_metrics()["metadata"]["labels"] == {"zone": "a"}
            bed.api.patch(bed.api.resource("nodes"), NODE, {"metadata": {"labels": {"zone": "b"}}})
    assert bed.node_metrics()["metadata"]["labels"] == {"zone": "b"}


def test_label_selector_finds_a_workloads_pods(bed: Bed) -> None:
    """PodMetrics carry the pod's labels, so the HPA's selector lists just its pods' metrics."""
    bed.pod("web-1", "c", labels={"app": "web"})
    bed.pod("db-0", "c", labels={"app": "db"})
    bed.scraper.scrape()
    bed.clock.advance(15)
    bed.scraper.scrape()
    assert set(bed.metrics("app=web")) == {"web-1"}


def test_pod_that_stopped_running_here_loses_its_metrics(bed: Bed) -> None:
    """When none of a pod's containers runs here any more, its PodMetrics is deleted in the next round."""
    bed.pod("web-1", "c")
    bed.pod("web-2", "c")
    bed.scraper.scrape()
    bed.clock.advance(15)
    bed.scraper.scrape()
    assert set(bed.metrics()) == {"web-1", "web-2"}
    bed.runtime.stop_container(bed.containers[("web-2", "c")], timeout=0)
    bed.clock.advance(15)
    done = bed.scraper.scrape()
    assert set(bed.metrics()) == {"web-1"} and done.deleted == [("default", "web-2")]


def test_restarted_container_keeps_the_last_metrics_until_it_has_a_rate(bed: Bed) -> None:
    """A pod whose container was replaced (a new id, one sample) is not written that round, and not deleted."""
    pod = bed.pod("web-1", "a", "b")
    bed.scraper.scrape()
    bed.clock.advance(15)
    bed.scraper.scrape()
    before = bed.metrics()["web-1"]["metadata"]["resourceVersion"]
    old = bed.containers[("web-1", "b")]
    sandbox = bed.runtime.list_pods({LABEL_POD_UID: pod["metadata"]["uid"]})[0]
    bed.runtime.remove_container(old)
    new = bed.runtime.create_container(sandbox.id, ContainerSpec(name="web-1-b", image="img", labels={
        LABEL_MANAGED: "true", LABEL_POD_UID: pod["metadata"]["uid"], LABEL_CONTAINER: "b"}))
    bed.runtime.start_container(new)
    bed.clock.advance(15)
    done = bed.scraper.scrape()
    assert done.deleted == [] and bed.metrics()["web-1"]["metadata"]["resourceVersion"] == before
    bed.clock.advance(15)
    bed.scraper.scrape()
    assert bed.metrics()["web-1"]["metadata"]["resourceVersion"] != before


def test_pods_not_bound_here_are_not_written(bed: Bed) -> None:
    """A kctl container whose pod is not bound to this node (an orphan being removed) gets no PodMetrics."""
    pod = bed.pod("web-1", "c")
    del bed.pods[pod["metadata"]["uid"]]
    bed.scraper.scrape()
    bed.clock.advance(15)
    bed.scraper.scrape()
    assert bed.metrics() == {}


def test_restarted_scraper_deletes_metrics_of_pods_gone_meanwhile(bed: Bed) -> None:
    """After a restart the scraper finds the PodMetrics of pods bound here and deletes those no longer running."""
    bed.pod("web-1", "c")
    bed.pod("web-2", "c")
    bed.scraper.scrape()
    bed.clock.advance(15)
    bed.scraper.scrape()
    bed.runtime.stop_container(bed.containers[("web-2", "c")], timeout=0)
    bed.synced = False
    bed.scraper = bed.new_scraper()
    bed.scraper.scrape()
    assert set(bed.metrics()) == {"web-1", "web-2"}  # not before the agent's informers listed
    bed.synced = True
    bed.clock.advance(15)
    bed.scraper.scrape()
    assert set(bed.metrics()) == {"web-1"}


def test_metrics_deleted_elsewhere_are_created_again(bed: Bed) -> None:
    """A PodMetrics removed behind the scraper's back (the garbage collector) is created again in the same round."""
    bed.pod("web-1", "c")
    bed.scraper.scrape()
    bed.clock.advance(15)
    bed.scraper.scrape()
    bed.api.delete(bed.api.resource("pods.metrics.k8s.io"), "web-1", namespace="default")
    bed.clock.advance(15)
    bed.scraper.scrape()
    assert "web-1" in bed.metrics()


def test_runtime_failures_log_one_warning_per_streak(bed: Bed, caplog: pytest.LogCaptureFixture) -> None:
    """Failing rounds write nothing and log one Warning per streak, then one Info line when sampling works again."""
    bed.pod("web-1", "c")
    bed.runtime.stats_error = "cannot reach the Podman service: connection refused"
    with caplog.at_level(logging.INFO, logger="kctl.agent.metrics"):
        for _ in range(3):
            assert bed.scraper.scrape().written == []
            bed.clock.advance(15)
        bed.runtime.stats_error = None
        bed.scraper.scrape()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "connection refused" in warnings[0].getMessage()
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [
        "node n1: metrics: sampling works again"]


def test_loop_survives_an_api_error(bed: Bed, caplog: pytest.LogCaptureFixture) -> None:
    """An exception from the API in a round is logged once and the loop keeps sampling until stopped."""
    rounds: list[int] = []

    def broken_write_all(ops, **kwargs):
        rounds.append(len(ops))
        raise OSError("database is locked")

    import time

    bed.pod("web-1", "c")
    bed.api.write_all = broken_write_all  # type: ignore[method-assign]
    bed.runtime.clock = time.time  # every round's sample is newer: each has something to write
    bed.scraper.resolution = 0.01
    with caplog.at_level(logging.WARNING, logger="kctl.agent.metrics"):
        bed.scraper.start()
        try:
            deadline = time.monotonic() + 30
            while len(rounds) < 3 and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            bed.scraper.stop()
    assert len(rounds) >= 3
    assert [r.getMessage() for r in caplog.records] == [
        "node n1: metrics: OSError: database is locked (retrying every 0.01s)"]


def test_paused_host_is_not_sampled(bed: Bed) -> None:
    """While the heartbeat says the host cannot be reached, the loop makes no runtime call."""
    bed.scraper._paused = lambda: True
    bed.scraper.resolution = 0.01
    bed.scraper.start()
    try:
        import time

        time.sleep(0.1)
    finally:
        bed.scraper.stop()
    assert bed.runtime.count("container_stats") == 0


def test_agent_runs_a_scraper_only_with_a_metric_resolution(api) -> None:
    """NodeAgent makes a MetricsScraper when given --metric-resolution, and none without."""
    from kctl.agent.agent import NodeAgent

    options = dict(heartbeat_interval=None, pod_network=False, kube_proxy=False, container_events=False)
    with_metrics = NodeAgent(api, NODE, MemoryRuntime(), metric_resolution=2.0, **options)
    assert isinstance(with_metrics.metrics, MetricsScraper) and with_metrics.metrics.resolution == 2.0
    assert NodeAgent(api, NODE, MemoryRuntime(), **options).metrics is None


def test_host_failure_still_writes_the_pods(bed: Bed, caplog: pytest.LogCaptureFixture, monkeypatch) -> None:
    """When only the host's /proc cannot be read, the PodMetrics are written; one Warning for the streak."""
    from kctl.runtime.interface import RuntimeError_

    def broken() -> HostStats:
        raise RuntimeError_("host stats: cat /proc/stat /proc/meminfo: permission denied")

    monkeypatch.setattr(bed.runtime, "host_stats", broken)
    bed.pod("web-1", "c")
    with caplog.at_level(logging.WARNING, logger="kctl.agent.metrics"):
        for _ in range(3):
            bed.scraper.scrape()
            bed.clock.advance(15)
    assert set(bed.metrics()) == {"web-1"} and bed.node_metrics() is None
    assert len(caplog.records) == 1 and "permission denied" in caplog.records[0].getMessage()
