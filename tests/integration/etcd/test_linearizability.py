"""A Jepsen-style check of kctl on etcd: 32 writer processes while a member is killed and restarted (issue 17).

Each writer process opens its own EtcdStore on the 3-member cluster (one prefix for all) and an
APIServer over it, then creates and updates ConfigMaps of its own and four shared ones (update
with the resourceVersion it read: Conflict when another writer came first) for a few seconds,
logging every attempt with its outcome: acknowledged (with the resourceVersion), failed
(Conflict/AlreadyExists: nothing written) or unknown (StoreUnavailable: it may have applied).
Meanwhile the test kills the etcd leader and restarts it, and two watcher threads (each its own
EtcdStore) record every change. `check_history` then asks of the history what a linearizable
store owes:

- every acknowledged write is present: the final state holds it or a later write of the key;
- resourceVersions follow real time: a write acknowledged before another began has a lower one
  (so they strictly increase per key), and no two acknowledged writes share a (key, rv);
- each watcher saw every acknowledged write, each change once, in revision order, nothing that
  was never written or whose write definitely failed, and both watchers saw the same history
  ending in the final state.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import secrets
import threading
import time
from collections import Counter

import pytest

from .history import (DEFINITE_FAILURES, SHARED, START_DEADLINE, UNKNOWN_OUTCOME, Event, Op, check_history, configmap,
                      open_api, watcher, writer)

WRITERS = 32
RUN_SECONDS = 10.0             # how long the writers write
KILL_AT, DOWN_FOR = 3.0, 3.0   # the leader is killed this many seconds in, restarted DOWN_FOR later
SETTLE_DEADLINE = 60.0         # until the cluster is healthy again and the watchers have caught up
MIN_ACKED = 10                 # fewer acknowledged writes judge nothing (a quiet machine does thousands)


def _leader(cluster) -> int:
    """The index of the member that leads now (0 when no member answers)."""
    ids: dict[str, int] = {}
    leader = None
    with cluster.session() as session:
        for index, url in enumerate(cluster.client_urls):
            with contextlib.suppress(Exception):
                status = session.post(url + "/v3/maintenance/status", json={}, timeout=3).json()
                ids[status["header"]["member_id"]] = index
                leader = status.get("leader") or leader
    return ids.get(leader, 0)


def test_writers_during_member_crash_keep_every_acknowledged_write_in_order(etcd_cluster3, tmp_path):
    """32 writer processes + a leader crash/restart: the history passes check_history; prints a summary."""
    cluster = etcd_cluster3
    tls = cluster.tls
    config = {"address": f"{cluster.address}/lin-{secrets.token_hex(4)}", "state": str(tmp_path / "state" / "kctl"),
              "tls": [tls.ca_file, tls.cert_file, tls.key_file], "folder": str(tmp_path)}
    store, api = open_api(config)
    for number in range(SHARED):
        api.create(configmap(f"shared-{number}", f"init-{number}"))
    since = store.revision()

    ctx = multiprocessing.get_context("forkserver")   # a fresh process (as spawn) that forks the writers quickly
    ctx.set_forkserver_preload([writer.__module__, "kctl.apiserver.server", "kctl.store.etcd.store"])
    ready, go, stop = ctx.Queue(), ctx.Event(), ctx.Event()
    processes = [ctx.Process(target=writer, args=(i, config, ready, go, stop), daemon=True) for i in range(WRITERS)]
    watch_stop = threading.Event()
    watched: list[list[Event]] = [[], []]
    reconnects: list[int] = []
    watchers = [threading.Thread(target=watcher, args=(config, since, events, watch_stop, reconnects), daemon=True)
                for events in watched]
    killed = 0
    try:
        for process in processes:
            process.start()
        for thread in watchers:
            thread.start()
        for _ in processes:
            ready.get(timeout=START_DEADLINE)
        go.set()
        time.sleep(KILL_AT)
        killed = _leader(cluster)
        cluster.kill(killed)
        time.sleep(DOWN_FOR)
        cluster.restart(killed)
        time.sleep(max(0.0, RUN_SECONDS - KILL_AT - DOWN_FOR))
        stop.set()
        for process in processes:
            process.join(timeout=START_DEADLINE)
        cluster.wait_healthy(timeout=SETTLE_DEADLINE)

        ops = [Op(**json.loads(line)) for path in sorted(tmp_path.glob("w*.jsonl"))
               for line in path.read_text().splitlines()]
        items, head = api.list(api.resource("configmaps"), namespace="default")
        final = {item["metadata"]["name"]: (int(item["metadata"]["resourceVersion"]), item["data"]["v"])
                 for item in items}
        deadline = time.monotonic() + SETTLE_DEADLINE
        while time.monotonic() < deadline and not all(events and events[-1].rv >= max(rv for rv, _ in final.values())
                                                      for events in watched):
            time.sleep(0.1)
    finally:
        stop.set()
        go.set()
        watch_stop.set()
        for process in processes:
            if process.is_alive():
                process.kill()
            if process.pid is not None:
                process.join()
        for thread in watchers:
            thread.join(timeout=30)
        store.close()
        if cluster.members[killed].pid is None:
            cluster.restart(killed)

    outcomes = Counter(op.outcome for op in ops)
    errors = Counter(op.error.split(":")[0] for op in ops if op.error)
    print(f"\nlinearizability: {len(ops)} write attempts by {WRITERS} processes, {dict(outcomes)}, errors "
          f"{dict(errors)}; member m{killed} killed and restarted; watchers saw {[len(e) for e in watched]} "
          f"changes ({len(reconnects)} re-watches); {len(final)} objects at rv {head}")
    assert all(process.exitcode == 0 for process in processes), [process.exitcode for process in processes]
    assert set(errors) <= DEFINITE_FAILURES | UNKNOWN_OUTCOME, errors
    assert outcomes["ok"] >= MIN_ACKED, f"only {outcomes['ok']} acknowledged writes: too few to judge anything"
    problems = check_history(ops, watched, final)
    assert not problems, "\n".join(problems[:20])


# -- the checker's own test ------------------------------------------------------------------------

def _good_history() -> tuple[list[Op], list[list[Event]], dict[str, tuple[int, str]]]:
    ops = [Op("a", "a1", "ok", 10, 0.0, 1.0), Op("b", "b1", "ok", 11, 0.5, 1.5), Op("a", "a2", "ok", 12, 2.0, 3.0),
           Op("a", "ax", "fail", 0, 2.1, 2.9, "Conflict: stale"), Op("b", "b?", "unknown", 0, 3.0, 8.0)]
    events = [Event(10, "ADDED", "a", "a1"), Event(11, "ADDED", "b", "b1"), Event(12, "MODIFIED", "a", "a2"),
              Event(13, "MODIFIED", "b", "b?")]
    return ops, [events, list(events)], {"a": (12, "a2"), "b": (13, "b?")}


def _break(rule: str):
    ops, watched, final = _good_history()
    if rule == "lost":
        final["a"] = (10, "a1")
        watched = [[e for e in w if e.rv != 12] for w in watched]
    elif rule == "duplicate rv":
        ops.append(Op("a", "a3", "ok", 12, 3.5, 4.0))
    elif rule == "order":
        ops[2] = Op("a", "a2", "ok", 9, 2.0, 3.0)
    elif rule == "missed":
        watched[1] = [e for e in watched[1] if e.rv != 11]
    elif rule == "twice":
        watched[0].insert(2, watched[0][1])
    elif rule == "out of order":
        watched[0][0], watched[0][1] = watched[0][1], watched[0][0]
    elif rule == "a write that failed":
        watched[0].append(Event(14, "MODIFIED", "a", "ax"))
    elif rule == "which nobody wrote":
        watched[0].append(Event(14, "MODIFIED", "a", "zz"))
    elif rule == "final state":
        final["b"] = (11, "b1")
    return ops, watched, final


@pytest.mark.parametrize("rule", ["lost", "duplicate rv", "order", "missed", "twice", "out of order",
                                  "a write that failed", "which nobody wrote", "final state"])
def test_checker_finds_each_violation(rule):
    """check_history accepts a good hand-made history and names the rule a broken one violates."""
    assert check_history(*_good_history()) == []
    problems = check_history(*_break(rule))
    assert problems and any(rule in problem for problem in problems), problems
