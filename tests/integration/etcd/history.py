"""The Jepsen-style history of tests/integration/etcd/test_linearizability.py: its records, checker and processes.

A module of its own (no pytest import) so that the 32 writer processes, forked from a
multiprocessing forkserver that preloads it, start in milliseconds on a loaded machine.
`writer` runs in each process, `watcher` in a thread of the test, `check_history` judges.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kctl.store.contract import StoreUnavailable

if TYPE_CHECKING:
    from kctl.apiserver.server import APIServer
    from kctl.store.etcd.store import EtcdStore

SHARED = 4                 # shared-0..3: every writer updates them (conflicts on purpose)
REQUEST_TIMEOUT = 5.0      # each store's wait for a member (a write during the election may take it)
START_DEADLINE = 60.0      # 32 processes starting on a loaded 2-core machine
DEFINITE_FAILURES = {"Conflict", "AlreadyExists", "CommitConflict"}   # nothing was written
UNKNOWN_OUTCOME = {"StoreUnavailable"}                                # it may have been written


@dataclass(frozen=True)
class Op:
    """One write attempt as its writer logged it; rv only when acknowledged; start/end: time.monotonic()."""

    key: str
    value: str
    outcome: str               # "ok" | "fail" | "unknown"
    rv: int = 0
    start: float = 0.0
    end: float = 0.0
    error: str = ""


@dataclass(frozen=True)
class Event:
    """One change a watcher saw: its revision, type, ConfigMap name and data.v."""

    rv: int
    type: str
    key: str
    value: str | None


# -- the checker ---------------------------------------------------------------------------------

def check_history(ops: list[Op], watched: list[list[Event]], final: dict[str, tuple[int, str]]) -> list[str]:
    """Every violation of the rules in the module docstring (empty: the history is fine)."""
    problems: list[str] = []
    acked = [op for op in ops if op.outcome == "ok"]

    for op in acked:   # every acknowledged write is present (or overwritten later)
        rv, value = final.get(op.key, (0, None))
        if rv < op.rv or (rv == op.rv and value != op.value):
            problems.append(f"lost: acknowledged {op.key}={op.value} at rv {op.rv}, final state {value} at rv {rv}")

    seen: dict[tuple[str, int], Op] = {}
    for op in acked:   # unique (key, rv)
        if (op.key, op.rv) in seen:
            problems.append(f"duplicate rv: {op.key} acknowledged twice at rv {op.rv} "
                            f"({seen[op.key, op.rv].value}, {op.value})")
        seen[op.key, op.rv] = op

    by_end = sorted(acked, key=lambda op: op.end)   # real-time order: ended before started -> lower rv
    highest, done = None, 0
    for op in sorted(acked, key=lambda op: op.start):
        while done < len(by_end) and by_end[done].end < op.start:
            if highest is None or by_end[done].rv > highest.rv:
                highest = by_end[done]
            done += 1
        if highest is not None and highest.rv >= op.rv:
            problems.append(f"order: {highest.key}={highest.value} (rv {highest.rv}) was acknowledged before "
                            f"{op.key}={op.value} began, yet the latter has rv {op.rv}")

    failed = {op.value for op in ops if op.outcome == "fail"}
    attempted = {op.value for op in ops}
    for number, events in enumerate(watched):
        name = f"watcher {number}"
        keys_rv: set[tuple[str, int]] = set()
        last_rv, last = 0, {}
        for event in events:
            if event.rv < last_rv:
                problems.append(f"{name}: out of order: {event.key} at rv {event.rv} after rv {last_rv}")
            if (event.key, event.rv) in keys_rv:
                problems.append(f"{name}: saw {event.key} at rv {event.rv} twice")
            if event.value in failed:
                problems.append(f"{name}: saw {event.key}={event.value}, a write that failed")
            elif event.value not in attempted and event.type != "DELETED":
                problems.append(f"{name}: saw {event.key}={event.value}, which nobody wrote")
            keys_rv.add((event.key, event.rv))
            last_rv, last[event.key] = max(last_rv, event.rv), event
        values = {(event.key, event.rv): event.value for event in events}
        for op in acked:
            if values.get((op.key, op.rv), "\0") != op.value:
                problems.append(f"{name}: missed acknowledged {op.key}={op.value} at rv {op.rv}")
        for key, event in last.items():
            if final.get(key) != (event.rv, event.value):
                problems.append(f"{name}: last saw {key}={event.value} at rv {event.rv}, "
                                f"final state {final.get(key)}")
        if number and events != watched[0]:
            problems.append(f"{name} saw {len(events)} changes, watcher 0 saw {len(watched[0])}: they differ")
    return problems


# -- the processes ---------------------------------------------------------------------------------

def open_api(config: dict) -> tuple[EtcdStore, APIServer]:
    """An EtcdStore on config's address/state/tls and an APIServer over it (no audit log)."""
    from kctl.apiserver.server import APIServer
    from kctl.store.etcd.address import EtcdTLS, parse_address
    from kctl.store.etcd.store import EtcdStore

    store = EtcdStore(parse_address(config["address"]), state_path=config["state"], tls=EtcdTLS(*config["tls"]),
                      request_timeout=REQUEST_TIMEOUT)
    return store, APIServer(store, user=config.get("user", "checker"), audit_log=None)


def configmap(name: str, value: str) -> dict:
    """A ConfigMap in default whose data.v is value (the history's write token)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"v": value}}


def writer(index: int, config: dict, ready: Any, go: Any, stop: Any) -> None:
    """One writer process: creates/updates until stop is set, one JSON line per attempt in w<index>.jsonl."""
    store, api = open_api({**config, "user": f"writer-{index}"})
    rt = api.resource("configmaps")
    rng = random.Random(index)
    own: list[str] = []
    with open(Path(config["folder"]) / f"w{index}.jsonl", "w") as log:
        ready.put(index)
        go.wait(START_DEADLINE)
        seq = 0
        while not stop.is_set():
            seq += 1
            value = f"w{index}-{seq}"
            roll = rng.random()
            if roll < 0.3 or (roll >= 0.6 and not own):
                key, obj = f"own-{index}-{len(own)}", None
                own.append(key)
            else:
                key = f"shared-{rng.randrange(SHARED)}" if roll < 0.6 else rng.choice(own)
                try:
                    obj = api.get(rt, key, namespace="default")
                except Exception:  # noqa: BLE001 - a read during the election; not a write attempt
                    time.sleep(0.05)
                    continue
                obj["data"] = {"v": value}
            start = time.monotonic()
            try:
                written = api.create(configmap(key, value)) if obj is None else api.update(obj)
                op = Op(key, value, "ok", int(written["metadata"]["resourceVersion"]), start, time.monotonic())
            except Exception as error:  # noqa: BLE001 - every outcome is logged and judged by the test
                kind = type(error).__name__
                outcome = "fail" if kind in DEFINITE_FAILURES else "unknown"
                op = Op(key, value, outcome, 0, start, time.monotonic(), f"{kind}: {str(error)[:200]}")
            log.write(json.dumps(asdict(op)) + "\n")
            log.flush()
    store.close()


def watcher(config: dict, since: int, events: list[Event], stop: threading.Event, reconnects: list[int]) -> None:
    """Record every ConfigMap change after `since` until stop; re-watch from the last one seen if the watch fails."""
    store, _ = open_api(config)
    try:
        while not stop.is_set():
            try:
                for change in store.watch(since, stop=stop, kind="ConfigMap"):
                    events.append(Event(change.revision, change.type, change.name,
                                        (change.obj.get("data") or {}).get("v")))
                    since = change.revision
            except StoreUnavailable:
                reconnects.append(since)
                time.sleep(0.2)
    finally:
        store.close()
