"""Container deaths reach the agent from the runtime's event stream, not at the next resync.

A NodeAgent (real pod sync, store and work queue) runs on a MemoryRuntime whose
containers a test kills behind its back; the resync interval is 60 s, so anything seen
within seconds came through the event stream (kctl.agent.runtime_events). The back-off
runs on a FakeClock: the first restart comes at once, the second waits 10 s.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterator

import pytest

from kctl.agent.agent import NodeAgent
from kctl.agent.runtime_events import RuntimeEventWatcher
from kctl.runtime.interface import ContainerEvent, RuntimeError_
from kctl.runtime.memory import FakeClock, MemoryRuntime

NODE = "n1"
IMAGE = "localhost/busybox:demo"
WAIT = 10.0  # seconds: generous on a loaded machine, far below the 60 s resync


def wait_for(predicate: Callable[[], object], what: str, timeout: float = WAIT) -> object:
    """Poll until predicate() is truthy; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def runtime(clock: FakeClock) -> MemoryRuntime:
    return MemoryRuntime(images={IMAGE}, clock=clock)


@pytest.fixture
def make_agent(api, runtime: MemoryRuntime, clock: FakeClock) -> Iterator[Callable[..., NodeAgent]]:
    """make_agent(**options) -> a started NodeAgent (resync 60 s, no heartbeat), stopped after the test."""
    agents: list[NodeAgent] = []

    def make(*, quick_reconnect: bool = False, **options: object) -> NodeAgent:
        agent = NodeAgent(api, NODE, runtime, **{"workers": 2, "resync": 60.0, "heartbeat_interval": None,
                                                 "clock": clock, **options})
        if quick_reconnect and agent.container_events is not None:
            agent.container_events.initial_delay, agent.container_events.max_delay = 0.05, 0.2
        agents.append(agent)
        agent.start()
        assert agent.wait_synced(WAIT)
        return agent

    yield make
    for agent in agents:
        agent.stop(5)


def create_pod(api, name: str = "web") -> str:
    pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                      "spec": {"nodeName": NODE, "containers": [
                          {"name": "app", "image": IMAGE, "imagePullPolicy": "IfNotPresent"}]}})
    return pod["metadata"]["uid"]


def app_status(api, name: str = "web") -> dict:
    pod = api.get(api.resource("pods"), name, namespace="default")
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return statuses[0]


def running(api, restarts: int) -> bool:
    status = app_status(api)
    return "running" in (status.get("state") or {}) and status.get("restartCount") == restarts


def the_running_container(runtime: MemoryRuntime) -> str:
    (container_id,) = [c.id for c in runtime.list_containers({"io.kctl.container.name": "app"})
                       if c.state == "running"]
    return container_id


@pytest.mark.parametrize(("exit_code", "oom", "reason"), [
    (137, False, "Error"),
    (137, True, "OOMKilled"),
    (0, False, "Completed"),
])
def test_death_shows_and_restarts_at_once(api, make_agent, runtime, exit_code, oom, reason) -> None:
    """A container killed, OOM-killed or exiting behind the agent's back is restarted and shown within seconds."""
    make_agent()
    create_pod(api)
    wait_for(lambda: running(api, 0), "the pod running")
    runtime.crash(the_running_container(runtime), exit_code, oom=oom)
    wait_for(lambda: running(api, 1), "the first restart (the resync is 60 s away)")
    last = app_status(api)["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (exit_code, reason)
    assert runtime.count("start_container") == 2


def test_first_restart_at_once_back_off_from_the_second(api, make_agent, runtime, clock) -> None:
    """As the kubelet: restart 1 at once, restart 2 only after the 10 s back-off (on the fake clock)."""
    agent = make_agent()
    uid = create_pod(api)
    wait_for(lambda: running(api, 0), "the pod running")
    runtime.crash(the_running_container(runtime), 1)
    wait_for(lambda: running(api, 1), "the first restart")
    runtime.crash(the_running_container(runtime), 1)
    waiting = wait_for(lambda: (app_status(api).get("state") or {}).get("waiting"), "CrashLoopBackOff")
    assert waiting["reason"] == "CrashLoopBackOff" and "back-off 10s" in waiting["message"]
    assert app_status(api)["restartCount"] == 1
    clock.advance(9)
    agent.queue.add(uid)  # a sync before the back-off is over restarts nothing
    time.sleep(0.3)
    assert runtime.count("start_container") == 2
    clock.advance(1.5)
    agent.queue.add(uid)  # the back-off's timer fires (it runs on the real clock)
    wait_for(lambda: running(api, 2), "the second restart after the back-off")
    assert runtime.count("start_container") == 3


def test_stream_drop_reconnects_and_relists(api, make_agent, runtime, caplog) -> None:
    """A death while the stream is down is found by the relist that follows the reconnect; said once."""
    agent = make_agent(quick_reconnect=True)
    create_pod(api)
    wait_for(lambda: running(api, 0), "the pod running")
    watcher = agent.container_events
    assert watcher is not None and watcher.subscribed.wait(WAIT)
    with caplog.at_level(logging.DEBUG, logger="kctl.agent"):
        runtime.events_error = "connection refused"
        runtime.drop_event_streams("connection reset by peer")
        wait_for(lambda: runtime.count("container_events") >= 4, "three refused reconnects")
        runtime.crash(the_running_container(runtime), 137)  # no stream: nobody is told
        time.sleep(0.3)
        assert app_status(api)["restartCount"] == 0
        runtime.events_error = None
        wait_for(lambda: running(api, 1), "the restart after the reconnect's relist")
    assert runtime.event_streams == 1 and watcher.subscriptions == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [
        "node n1: the container event stream broke: connection reset by peer; re-syncing its pods when it is back",
        "node n1: cannot follow the container event stream: container events: connection refused; "
        "re-syncing its pods when it is back"], warnings
    assert any("following the container event stream again" in r.getMessage() for r in caplog.records)


def test_stop_closes_the_stream_at_once(api, make_agent, runtime) -> None:
    """Stopping the agent closes its event stream and ends the watcher thread without waiting for an event."""
    agent = make_agent()
    watcher = agent.container_events
    assert watcher is not None and watcher.subscribed.wait(WAIT)
    started = time.monotonic()
    agent.stop(5)
    assert time.monotonic() - started < 4 and not watcher.alive
    assert runtime.event_streams == 0


def test_only_pods_bound_here_are_queued(api, runtime, clock) -> None:
    """An event of a container of an unknown pod (another host's, shared event log), or with no pod, queues nothing."""
    here = create_pod(api)
    agent = NodeAgent(api, NODE, runtime, heartbeat_interval=None, clock=clock)
    agent.start_informers()  # the pod informer only: no workers take the queue
    try:
        assert agent.pods.informer.wait_for_sync(WAIT)
        assert agent.queue.get(timeout=1) == here  # the informer's add
        agent.queue.done(here)
        for uid in ("", "uid-elsewhere", here, here):
            agent._container_died(ContainerEvent(container_id="c1", event="died", pod_uid=uid, exit_code=1))
        assert len(agent.queue) == 1 and agent.queue.get(timeout=1) == here
    finally:
        agent.stop(5)


def test_runtime_without_events_has_no_watcher(api) -> None:
    """A runtime with no event stream leaves the agent on the periodic resync alone."""
    class Plain:
        pass

    assert NodeAgent(api, NODE, Plain(), heartbeat_interval=None).container_events is None
    assert NodeAgent(api, NODE, MemoryRuntime(), heartbeat_interval=None,
                     container_events=False).container_events is None


class FlakyRuntime:
    """container_events that fails `refusals` times, then gives streams a test feeds by hand."""

    def __init__(self, refusals: int = 0) -> None:
        self.refusals = refusals
        self.runtime = MemoryRuntime()

    def container_events(self, labels: dict[str, str], *, events: tuple[str, ...] = ()):
        if self.refusals > 0:
            self.refusals -= 1
            raise RuntimeError_("ssh to 10.77.0.11:22 failed: no route to host")
        return self.runtime.container_events(labels, events=events)


def test_watcher_survives_a_failing_handler_and_is_quiet_while_the_host_is_known_down(caplog) -> None:
    """A handler that raises does not end the thread; while quiet() the failures are logged at debug only."""
    flaky = FlakyRuntime(refusals=3)
    seen: list[str] = []
    reconnects = threading.Event()

    def on_death(event: ContainerEvent) -> None:
        seen.append(event.pod_uid)
        if event.pod_uid == "bad":
            raise ValueError("boom")

    watcher = RuntimeEventWatcher(flaky, node_name=NODE, on_death=on_death, on_reconnect=reconnects.set,
                                  quiet=lambda: True, initial_delay=0.01, max_delay=0.05)
    with caplog.at_level(logging.DEBUG, logger="kctl.agent"):
        watcher.start()
        try:
            assert watcher.subscribed.wait(WAIT) and not reconnects.is_set()
            assert caplog.records and all(r.levelno == logging.DEBUG for r in caplog.records)
            from kctl.runtime.interface import LABEL_MANAGED, LABEL_POD_UID, ContainerSpec, PodSandboxSpec

            memory = flaky.runtime
            memory.images.add(IMAGE)
            pod = memory.create_pod(PodSandboxSpec(name="p", labels={}))
            for uid in ("bad", "good"):
                cid = memory.create_container(pod.id, ContainerSpec(name=uid, image=IMAGE, labels={
                    LABEL_MANAGED: "true", LABEL_POD_UID: uid}))
                memory.start_container(cid)
                memory.crash(cid, 1)
            wait_for(lambda: seen == ["bad", "good"], "both deaths handed on")
            memory.drop_event_streams()
            assert reconnects.wait(WAIT)
        finally:
            watcher.stop(5)
    assert not watcher.alive
    assert any("handling a died event failed: boom" in r.getMessage() and r.levelno == logging.ERROR
               for r in caplog.records)
