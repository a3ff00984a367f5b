"""Failover of the control plane (issue 17): the leader's control host cut -> controllers acting again.

Run as root: `.venv/bin/python benchmarks/failover.py [--runs 5] [--lease 6]`.
It brings up a test bed of control hosts only (kctl/testing/testbed.py `up(0, control=3)`:
c1-c3, network namespaces on one bridge, each with a member of one 3-member TLS etcd
cluster) and runs `kctl daemon --no-agents` in each (kctl/testing/hadaemons.py: its own
hostname, so its own leader identity; --leader-elect-lease-duration LEASE, renew deadline
2/3 of it, retry period 1 s). A Deployment (no Nodes: its pods stay Pending, which does not
matter here) is scaled once the daemons settle. Each run:

1. the leading daemon's control host is cut (its link down: its daemon and its etcd member
   are partitioned off, as when the host dies), and at once the Deployment's replicas are
   changed through the two other members;
2. measured: cut -> another daemon holds the Lease, and cut -> the Deployment's ReplicaSet
   has the new replicas (the deployment controller of the new leader acted);
3. the host is healed and the next run waits until its etcd member answers and every daemon
   runs; the next run cuts the new leader.

Prints a Markdown table of medians (target: cut -> controllers acting <= lease + 2 s);
docs/benchmarks.md ("Control-plane failover") records a run. Everything it made (the bed,
the daemons, the etcd cluster) is removed at the end, whatever happened.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kctl.testing.hadaemons import ControlDaemons  # noqa: E402
from kctl.testing.testbed import TestBed, missing_prerequisites  # noqa: E402

if TYPE_CHECKING:
    from kctl.apiserver.server import APIServer

T = TypeVar("T")

NAMESPACE = "bench-failover"
TIMEOUT = 120.0   # seconds one step may take before the benchmark gives up


def deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "containers": [{"name": "app", "image": "localhost/busybox:demo"}]}}}}


def replica_set_replicas(api: APIServer) -> int | None:
    """spec.replicas of the Deployment's newest ReplicaSet (None before there is one)."""
    sets = [rs for rs in api.list(api.resource("replicasets"), namespace=NAMESPACE)[0]
            if any(ref.get("kind") == "Deployment" and ref.get("name") == "web"
                   for ref in rs["metadata"].get("ownerReferences") or ())]
    if not sets:
        return None
    newest = max(sets, key=lambda rs: int((rs["metadata"].get("annotations") or {}).get(
        "deployment.kubernetes.io/revision", "0")))
    return (newest.get("spec") or {}).get("replicas")


def until(check: Callable[[], T | None], *, what: str, daemons: ControlDaemons, timeout: float = TIMEOUT,
          poll: float = 0.05) -> T:
    """Poll check until truthy; RuntimeError naming what (with the daemons' logs) on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except Exception:  # noqa: BLE001 - the store may fail for a moment while a member is cut
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}\n{daemons.logs()}")
        time.sleep(poll)


def member_healthy(bed: TestBed, name: str) -> bool:
    """Whether control host name's etcd member answers /health with true."""
    import requests

    info, host = bed.etcd, bed.control_host(name)
    session = requests.Session()
    session.trust_env = False
    try:
        response = session.get(host.client_url + "/health", verify=info.ca_file, cert=(info.cert_file, info.key_file),
                               timeout=2)
        return response.ok and response.json().get("health") == "true"
    except Exception:  # noqa: BLE001 - not answering is "not healthy"
        return False
    finally:
        session.close()


def steps_down(daemons: ControlDaemons, name: str) -> int:
    """How often control host name's daemon logged the end of its leadership."""
    text = daemons.daemons[name].log_text()
    return text.count("stepping down") + text.count("lost leadership")


def scale(api: APIServer, replicas: int) -> bool:
    """Set the Deployment's replicas (True once written)."""
    current = api.get(api.resource("deployments"), "web", namespace=NAMESPACE)
    current["spec"]["replicas"] = replicas
    api.update(current)
    return True


def one_run(bed: TestBed, daemons: ControlDaemons, replicas: int) -> tuple[float, float]:
    """Cut the leader's host, change the replicas: (seconds to a new Lease holder, seconds to the RS change)."""
    with daemons.api() as api:
        leader = until(lambda: daemons.leader(api), what="a leader", daemons=daemons)
    others = [name for name in daemons.names if name != leader]
    stepped_down = steps_down(daemons, leader)
    with daemons.api(*others) as api:
        bed.cut(leader)
        cut_at = time.monotonic()
        until(lambda: scale(api, replicas), what="the scale change written",  # etcd may elect a leader first
              daemons=daemons)
        daemons.wait_leader(api, timeout=TIMEOUT, other_than=leader, poll=0.05)
        took_lease = time.monotonic() - cut_at
        until(lambda: replica_set_replicas(api) == replicas, what=f"the ReplicaSet at {replicas} replicas",
              daemons=daemons)
        took_controllers = time.monotonic() - cut_at
    bed.heal(leader)
    until(lambda: member_healthy(bed, leader), what=f"{leader}'s etcd member back", daemons=daemons)
    until(lambda: steps_down(daemons, leader) > stepped_down, what=f"{leader} following", daemons=daemons)
    if not all(daemon.running for daemon in daemons.daemons.values()):
        raise RuntimeError(f"a daemon exited during the run\n{daemons.logs()}")
    time.sleep(2 * daemons.retry_period)  # the healed daemon retries the Lease as a follower again
    return took_lease, took_controllers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lease", type=int, default=6, help="--leader-elect-lease-duration (whole seconds)")
    args = parser.parse_args()
    problems = missing_prerequisites(hosts=False, control=True)
    if problems:
        sys.exit("benchmarks/failover.py: " + "; ".join(problems))
    folder = Path(tempfile.mkdtemp(prefix="kctl-bench-failover-"))
    bed = TestBed(folder / "bed")
    renew = round(args.lease * 2 / 3, 1)
    daemons: ControlDaemons | None = None
    results: list[tuple[float, float]] = []
    try:
        bed.up(0, control=3)
        daemons = ControlDaemons(bed, folder / "daemons", lease_duration=args.lease, renew_deadline=renew,
                                 retry_period=1.0, extra=("--no-agents",))
        daemons.prepare()
        daemons.check("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}).encode())
        daemons.check("apply", "-f", "-", input=json.dumps(deployment(1)).encode())
        daemons.start()
        with daemons.api() as api:
            until(lambda: replica_set_replicas(api) == 1, what="the first ReplicaSet", daemons=daemons)
        for run in range(args.runs):
            results.append(one_run(bed, daemons, replicas=2 + run % 2))
    finally:
        if daemons is not None:
            daemons.stop()
        bed.down()
        shutil.rmtree(folder, ignore_errors=True)
    lease = [lease for lease, _ in results]
    acting = [acting for _, acting in results]
    print(f"nproc {os.cpu_count()}, {args.runs} runs, 3 control hosts (3-member etcd, TLS), lease {args.lease} s, "
          f"renew deadline {renew:g} s, retry 1 s; medians (all runs in brackets)\n")
    print("| measurement | median | runs | target |")
    print("|---|---|---|---|")
    print(f"| leader host cut -> another daemon holds the Lease | {statistics.median(lease):.2f} s | "
          f"{', '.join(f'{t:.2f}' for t in lease)} | <= lease ({args.lease} s) |")
    print(f"| leader host cut -> controllers acting (scale reaches the ReplicaSet) | "
          f"{statistics.median(acting):.2f} s | {', '.join(f'{t:.2f}' for t in acting)} | "
          f"<= lease + 2 s ({args.lease + 2} s) |")


if __name__ == "__main__":
    main()
