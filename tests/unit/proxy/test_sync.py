"""kube-proxy's sync loop (kctl.agent.proxy.sync): when it loads a host's rules, and what it does when it cannot."""

from __future__ import annotations

import re
import threading
import time

import pytest

from proxy_cases import ep, eps, svc

from kctl.agent.proxy.sync import (FAILED_REASON, SKIPPED_REASON, Proxier, ProxySources, node_addresses,
                                   remove_rules)
from kctl.client.clusterconfig import ClusterNetwork, write_cluster_network
from kctl.runtime.interface import ExecResult, RuntimeError_
from kctl.testing.waiting import wait_for


class FakeHost:
    """A host's `run_on_host`: keeps the table `ip kctl` as the last script loaded; can be down or rootless."""

    def __init__(self, *, uid: str = "0") -> None:
        self.uid = uid
        self.down = False
        self.reject = False
        self.scripts: list[str] = []  # every script loaded, in order
        self.commands: list[list[str]] = []
        self.table: str | None = None  # the last script loaded (None: no table)
        self.lock = threading.Lock()

    def run_on_host(self, argv: list[str], *, stdin: bytes | None = None, timeout: float = 30.0) -> ExecResult:
        with self.lock:
            self.commands.append(list(argv))
            if self.down:
                raise RuntimeError_(f"{argv[0]} on h1:22: connection refused")
            if argv == ["id", "-u"]:
                return ExecResult(0, f"{self.uid}\n".encode(), b"")
            if argv[:3] == ["nft", "list", "table"]:
                if self.table is None:
                    return ExecResult(1, b"", b"Error: No such file or directory\nlist table ip kctl\n")
                names = re.findall(r"^add (chain|set|map) ip kctl (\S+)", self.table, re.M)
                return ExecResult(0, "".join(f"\t{k} {n} {{\n\t}}\n" for k, n in names).encode(), b"")
            if argv == ["nft", "-f", "-"]:
                script = stdin.decode()
                have = set(re.findall(r"^add (chain|set|map) ip kctl (\S+)", self.table or "", re.M))
                touched = set(re.findall(r"^(?:flush|delete) (chain|set|map) ip kctl (\S+)", script, re.M))
                if self.reject or touched - have:  # as nft: a flush or delete of a missing object fails
                    return ExecResult(1, b"", b"Error: Could not process rule: No such file or directory\n")
                self.scripts.append(stdin.decode())
                self.table = stdin.decode()
                return ExecResult(0, b"", b"")
            if argv == ["nft", "delete", "table", "ip", "kctl"]:
                if self.table is None:
                    return ExecResult(1, b"", b"Error: No such file or directory\n")
                self.table = None
                return ExecResult(0, b"", b"")
        return ExecResult(127, b"", b"unknown command")

    @property
    def loads(self) -> int:
        with self.lock:
            return len(self.scripts)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sources(api):
    """Started, synced ProxySources over the test's API (stopped afterwards)."""
    made = ProxySources(api)
    made.start()
    assert made.wait_for_sync(10)
    yield made
    made.stop()


def make_node(api, name: str = "h1", address: str = "10.77.0.11") -> dict:
    return api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                       "status": {"addresses": [{"type": "InternalIP", "address": address}]}})


def seen(sources: ProxySources, kind: str, name: str, predicate=lambda obj: True, namespace: str = "demo") -> None:
    """Wait until the sources' cache holds the object as written."""
    informer = {"Service": sources.services, "EndpointSlice": sources.slices, "Node": sources.nodes}[kind]
    wait_for(lambda: (obj := informer.get(namespace if kind != "Node" else "", name)) is not None and predicate(obj),
             what=f"{kind} {name} cached")


def add_service(api, sources, name: str = "web", ips: tuple[str, ...] = ("10.244.1.2",)) -> None:
    """A ClusterIP Service in namespace demo with one slice of endpoints on h1, in the sources' cache."""
    from kctl.machinery.errors import AlreadyExists

    try:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    except AlreadyExists:
        pass
    api.create(svc(name, cluster_ip=f"10.96.0.{20 + len(sources.services.list())}"))
    api.create(eps(name, [ep(ip, "h1") for ip in ips]))
    seen(sources, "Service", name)
    seen(sources, "EndpointSlice", f"{name}-abcde")


def set_endpoints(api, sources, ips: list[str], name: str = "web") -> dict:
    rt = api.resource("endpointslices.discovery.k8s.io")
    current = api.get(rt, f"{name}-abcde", namespace="demo")
    updated = api.update({**current, "endpoints": [ep(ip, "h1") for ip in ips]})
    rv = updated["metadata"]["resourceVersion"]
    seen(sources, "EndpointSlice", f"{name}-abcde", lambda o: o["metadata"]["resourceVersion"] == rv)
    return updated


def node_events(api, reason: str) -> list[dict]:
    return [e for e in api.list(api.resource("events"), namespace="default")[0]
            if e.get("reason") == reason and e["involvedObject"].get("kind") == "Node"]


def test_loads_once_per_change_and_not_when_unchanged(api, sources):
    """The first sync loads; a sync with nothing changed loads nothing; a new endpoint loads again."""
    make_node(api)
    add_service(api, sources)
    host = FakeHost()
    proxier = Proxier(api, "h1", host, sources=sources)
    assert proxier.sync() and host.loads == 1
    assert "10.96.0.20 . tcp . 80" in host.scripts[0] and "10.77.0.11" in host.scripts[0]
    assert proxier.sync() and proxier.sync() and host.loads == 1
    set_endpoints(api, sources, ["10.244.1.2", "10.244.1.3"])
    assert proxier.sync() and host.loads == 2 and "10.244.1.3" in host.scripts[1]
    # steady state: one command per load (the table's contents are known from the script loaded)
    assert host.commands[-1] == ["nft", "-f", "-"] and host.commands[-2] != ["nft", "list", "table", "ip", "kctl"]


def test_scripts_touch_only_the_kctl_table(api, sources):
    """Every command of every script loaded names the table `ip kctl` and no other."""
    make_node(api)
    add_service(api, sources)
    host = FakeHost()
    proxier = Proxier(api, "h1", host, sources=sources)
    proxier.sync()
    set_endpoints(api, sources, [])
    proxier.sync()
    assert host.loads == 2
    for script in host.scripts:
        tables = set(re.findall(r"^(?:add|delete|flush) (?:table|chain|rule|set|map|element) (\S+ \S+)", script, re.M))
        assert tables == {"ip kctl"}


def test_failure_is_retried_with_backoff_and_then_loaded_even_if_unchanged(api, sources):
    """An unreachable host: one Warning Event per streak, back-off between tries, a forced load when back."""
    make_node(api)
    add_service(api, sources)
    host, clock = FakeHost(), Clock()
    proxier = Proxier(api, "h1", host, sources=sources, clock=clock, retry_base=1.0, retry_cap=30.0)
    assert proxier.sync() and host.loads == 1
    host.down = True
    set_endpoints(api, sources, ["10.244.1.9"])
    assert not proxier.sync()
    first_retry = proxier.due(clock.now)
    clock.now = first_retry
    assert not proxier.sync()
    assert proxier.due(clock.now) - clock.now > first_retry - 1000.0  # the back-off grew
    events = node_events(api, FAILED_REASON)
    assert len(events) == 1 and events[0]["count"] == 1 and "connection refused" in events[0]["message"]
    host.down = False
    set_endpoints(api, sources, ["10.244.1.2"])  # back to what was loaded before the failures
    clock.now = proxier.due(clock.now)
    assert proxier.sync() and host.loads == 2  # loaded again although unchanged: the host may have rebooted
    assert ["nft", "list", "table", "ip", "kctl"] in host.commands[-3:]


def test_rejected_script_is_one_event_not_a_traceback(api, sources):
    """nft refusing the script: sync returns False, one Event names nft's own message."""
    make_node(api)
    host = FakeHost()
    host.reject = True
    proxier = Proxier(api, "h1", host, sources=sources)
    assert not proxier.sync()
    (event,) = node_events(api, FAILED_REASON)
    assert "nft -f" in event["message"] and "Could not process rule" in event["message"]


def test_resync_loads_again_and_reads_the_table(api, sources):
    """After resync_period a sync reloads the unchanged rules and lists the table (a rebooted host gets them back)."""
    make_node(api)
    add_service(api, sources)
    host, clock = FakeHost(), Clock()
    proxier = Proxier(api, "h1", host, sources=sources, clock=clock, resync_period=30.0)
    proxier.sync()
    clock.now += 10
    proxier.sync()
    assert host.loads == 1
    host.table = None  # rebooted: the table is gone
    clock.now += 25
    assert proxier.sync() and host.loads == 2
    assert "delete" not in host.scripts[1].split("\n\n", 1)[0]  # made from the real (empty) listing


def test_table_changed_behind_its_back_is_read_and_loaded_without_a_failure(api, sources):
    """A table deleted by hand: the load on the remembered contents fails, the proxier reads it and loads at once."""
    make_node(api)
    add_service(api, sources)
    host = FakeHost()
    proxier = Proxier(api, "h1", host, sources=sources)
    assert proxier.sync() and host.loads == 1
    add_service(api, sources, "api", ("10.244.1.7",))  # a second Service: the next load flushes web's chains
    host.table = None  # `nft delete table ip kctl` by hand
    assert proxier.sync() and host.loads == 2 and "10.244.1.7" in host.scripts[-1]
    assert host.commands[-2] == ["nft", "list", "table", "ip", "kctl"]
    assert node_events(api, FAILED_REASON) == []


def test_rootless_host_is_skipped_with_one_event(api, sources):
    """A host where commands run as a non-root user gets no rules and one ProxyRulesSkipped Event."""
    make_node(api)
    add_service(api, sources)
    host = FakeHost(uid="1000")
    proxier = Proxier(api, "h1", host, sources=sources)
    assert proxier.sync() and proxier.sync()
    assert host.loads == 0 and host.commands == [["id", "-u"]]
    (event,) = node_events(api, SKIPPED_REASON)
    assert event["type"] == "Warning" and "rootless" in event["message"]


def test_node_address_and_cluster_cidr_changes_reload(api, sources):
    """A new InternalIP of this Node, or a new cluster CIDR in kube-system/kube-proxy, is in the next load."""
    node = make_node(api)
    add_service(api, sources)
    host = FakeHost()
    proxier = Proxier(api, "h1", host, sources=sources)
    proxier.sync()
    node["status"]["addresses"] = [{"type": "InternalIP", "address": "10.77.0.99"}]
    api.update_status(node)
    seen(sources, "Node", "h1", lambda o: node_addresses(o) == ["10.77.0.99"])
    assert proxier.sync() and host.loads == 2 and "10.77.0.99" in host.scripts[-1]
    write_cluster_network(api, ClusterNetwork(cluster_cidr="10.55.0.0/16"))
    wait_for(lambda: sources.cluster_cidr() == "10.55.0.0/16", what="ConfigMap cached")
    assert proxier.sync() and host.loads == 3 and "10.55.0.0/16" in host.scripts[-1]


def test_running_proxier_coalesces_a_burst(api, sources):
    """50 endpoint changes in a row: the running proxier loads the last state, in few loads (min-sync-period)."""
    make_node(api)
    add_service(api, sources)
    host = FakeHost()
    proxier = Proxier(api, "h1", host, sources=sources, min_sync_period=0.5)
    proxier.start()
    try:
        wait_for(lambda: host.loads >= 1, what="first load")
        before, started = host.loads, time.monotonic()
        rt = api.resource("endpointslices.discovery.k8s.io")
        for i in range(50):
            current = api.get(rt, "web-abcde", namespace="demo")
            api.update({**current, "endpoints": [ep(f"10.244.2.{i + 1}", "h1")]})
        wait_for(lambda: host.loads > before and "10.244.2.50" in host.scripts[-1], what="last change loaded")
        elapsed = time.monotonic() - started
        loads = host.loads - before
        assert loads <= elapsed / 0.5 + 2 and loads < 50
    finally:
        proxier.stop()


def test_paused_host_is_not_tried_and_loaded_when_back(api, sources):
    """While the heartbeat says the host is unreachable nothing runs there; when it answers, the rules load."""
    make_node(api)
    add_service(api, sources)
    host, paused = FakeHost(), threading.Event()
    paused.set()
    proxier = Proxier(api, "h1", host, sources=sources, min_sync_period=0.05, paused=paused.is_set)
    proxier.start()
    try:
        time.sleep(0.5)
        assert host.commands == []
        paused.clear()
        wait_for(lambda: host.loads == 1, what="loaded once the host answers")
    finally:
        proxier.stop()


def test_shared_sources_are_one_per_api_and_released(api):
    """Proxiers of one API share one ProxySources; the last release stops it."""
    first, second = ProxySources.acquire(api), ProxySources.acquire(api)
    try:
        assert first is second
    finally:
        first.release()
        assert not second.stopped
        second.release()
    assert second.stopped
    third = ProxySources.acquire(api)
    third.release()
    assert third is not first


def test_remove_rules_deletes_the_table():
    """remove_rules deletes table ip kctl; a missing table counts as removed; an unreachable host does not."""
    host = FakeHost()
    host.table = "add chain ip kctl services\n"
    assert remove_rules(host) and host.table is None
    assert remove_rules(host)
    host.down = True
    assert not remove_rules(host)


def test_node_agent_runs_the_proxier(api):
    """A NodeAgent starts its host's proxier with it (rules loaded through run_on_host) and stops it with it."""
    from kctl.agent.agent import NodeAgent
    from kctl.runtime.memory import MemoryRuntime

    make_node(api)
    runtime = MemoryRuntime()
    agent = NodeAgent(api, "h1", runtime, heartbeat_interval=None, pod_network=False, container_events=False)
    agent.start()
    try:
        wait_for(lambda: any(argv == ["nft", "-f", "-"] for argv, _ in runtime.host_commands), what="rules loaded")
        assert agent.proxier is not None and agent.proxier.applies >= 1
    finally:
        agent.stop()
    assert agent.proxier.sources is None  # the shared informers were given back
    assert NodeAgent(api, "h1", runtime, heartbeat_interval=None, pod_network=False, kube_proxy=False).proxier is None


def test_stop_removes_the_table_only_when_the_node_is_gone(api, sources):
    """Stopping leaves the rules (as kube-proxy); stopping after the Node was deleted (kctl removed the host)
    deletes the host's table."""
    make_node(api)
    add_service(api, sources)
    host = FakeHost()
    proxier = Proxier(api, "h1", host, sources=sources)
    assert proxier.sync() and host.table is not None
    proxier.stop()
    assert host.table is not None
    api.delete(api.resource("nodes"), "h1")
    proxier = Proxier(api, "h1", host, sources=sources)
    proxier.stop()
    assert host.table is None
