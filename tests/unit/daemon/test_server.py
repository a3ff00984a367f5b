"""kctl.daemon.server.run: the settings' controllers run until `stop`, then everything stops cleanly."""

from __future__ import annotations

import threading
import time

from kctl.daemon.server import run
from kctl.daemon.settings import DaemonSettings

#: how long a wait may take before the test fails as hung (asserts no timing)
WAIT_SECONDS = 30.0


def wait_for(predicate, *, what: str):
    """Poll predicate until it returns something true; AssertionError naming `what` if it never does."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)
    return value


def test_run_without_agents_runs_the_chosen_controllers_and_stops(api):
    """--no-agents --controllers replicaset: no Node registered, the ReplicaSet acted on, the Lease released."""
    api.create({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "default"},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "rs"}},
                         "template": {"metadata": {"labels": {"app": "rs"}},
                                      "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    stop = threading.Event()
    errors: list[BaseException] = []

    def daemon() -> None:
        try:
            run(DaemonSettings(agents=False, controllers=("replicaset",)), api=api, stop=stop)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=daemon, name="test-daemon", daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(api.list(api.resource("pods"), namespace="default")[0]) == 2,
                 what="the ReplicaSet controller makes 2 pods")
    finally:
        stop.set()
        thread.join(WAIT_SECONDS)
    assert not thread.is_alive() and errors == []
    assert api.list(api.resource("nodes"))[0] == [], "no agents: this host is not registered"
    lease = api.get(api.resource("leases"), "kctl-controller-manager", namespace="kube-system")
    assert lease["spec"]["holderIdentity"] == "", "a clean stop releases the leader Lease"
