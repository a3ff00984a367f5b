"""`kctl cordon`, `uncordon` and `drain`: taking a Node out of service and back.

cordon and uncordon set spec.unschedulable (the scheduler's NodeUnschedulable plugin
honours it). drain cordons, then decides pod by pod as kubectl's drain filters do
(DaemonSet pods, mirror pods, pods with emptyDir data, pods no controller owns), evicts
the pods it may through the Eviction subresource (a PodDisruptionBudget may refuse: the pod
is tried again every 5 s, as kubectl does) or, with --disable-eviction, deletes them, and
watches until they are gone. Messages are kubectl's. The decisions and the evicting are
library code (kctl.ops.drain); this module parses the flags and prints.
"""

from __future__ import annotations

import sys
from typing import Annotated, Callable, Optional

import typer

from kctl.machinery.resources import ResourceType
from kctl.cli import connect
from kctl.ops import drain as drain_ops
from kctl.ops.drain import (  # noqa: F401  (PodVerdict, DrainOptions and the filters: kctl.cli.node, tests)
    DrainFailed,
    DrainOptions,
    DrainTimeout,
    EvictionFailed,
    PodVerdict,
    drain_errors,
    drain_warnings,
    pods_for_deletion,
)

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

NodesArg = Annotated[list[str], typer.Argument(help="Node names.")]


def _fail(message: str, *, code: int = 1) -> typer.Exit:
    from kctl.cli.wait import fail

    return fail(message, code=code)


def _node_rt() -> ResourceType:
    return connect.api().resource("nodes")


def set_unschedulable(name: str, unschedulable: bool, *, dry_run: bool = False) -> bool:
    """Cordon (True) or uncordon (False) a Node of this command's API; False when it already was."""
    return drain_ops.set_unschedulable(connect.api(), name, unschedulable, dry_run=dry_run)


def _cordon_all(names: list[str], unschedulable: bool, dry_run: Optional[str]) -> None:
    word = "cordoned" if unschedulable else "uncordoned"
    suffix = " (dry run)" if dry_run else ""
    for name in names:
        changed = set_unschedulable(name, unschedulable, dry_run=bool(dry_run))
        print(f"node/{name} {'' if changed else 'already '}{word}{suffix}")


@app.command()
def cordon(
    nodes: NodesArg,
    dry_run: Annotated[Optional[str], typer.Option("--dry-run", help="'client' or 'server': change nothing.")] = None,
) -> None:
    """Mark nodes unschedulable: no new pods are placed there."""
    _cordon_all(nodes, True, dry_run)


@app.command()
def uncordon(
    nodes: NodesArg,
    dry_run: Annotated[Optional[str], typer.Option("--dry-run", help="'client' or 'server': change nothing.")] = None,
) -> None:
    """Mark nodes schedulable again."""
    _cordon_all(nodes, False, dry_run)


def _format_duration(seconds: float) -> str:
    """Go's Duration.String: 300ms, 5s, 1.5s, 1m30s, 1h0m0s."""
    return drain_ops.go_duration(seconds)


@app.command()
def drain(
    nodes: NodesArg,
    ignore_daemonsets: Annotated[bool, typer.Option(
        help="Leave DaemonSet-managed pods alone instead of refusing.")] = False,
    delete_emptydir_data: Annotated[bool, typer.Option(
        help="Evict pods with emptyDir volumes even though their data is lost.")] = False,
    force: Annotated[bool, typer.Option(
        help="Also evict pods that no controller owns (they are not recreated).")] = False,
    grace_period: Annotated[int, typer.Option(
        help="Seconds each pod gets to stop (-1: the pod's own terminationGracePeriodSeconds).")] = -1,
    timeout: Annotated[str, typer.Option(help="Give up after this long (Go duration; 0: never).")] = "0s",
    disable_eviction: Annotated[bool, typer.Option(
        help="Delete the pods instead of evicting them: PodDisruptionBudgets are not consulted.")] = False,
) -> None:
    """Cordon nodes, then evict their pods (honouring PodDisruptionBudgets) and wait until the pods are gone."""
    from kctl.cli.durations import parse_timeout
    from kctl.cli.wait import timeout_exit_code

    seconds = parse_timeout(timeout) or None
    opts = DrainOptions(ignore_daemonsets=ignore_daemonsets, delete_emptydir_data=delete_emptydir_data, force=force)
    server = connect.api()
    for name in nodes:
        server.get(_node_rt(), name)  # NotFound before anything changes
    _cordon_all(nodes, True, None)  # kubectl cordons every node before draining the first
    for i, name in enumerate(nodes):
        try:
            _drain_one(name, opts, grace_period=None if grace_period < 0 else grace_period,
                       timeout=seconds, timeout_code=timeout_exit_code(), disable_eviction=disable_eviction)
        except DrainFailed as failure:
            _report_failure(nodes[i:], name, failure)
            raise typer.Exit(failure.code) from None
        print(f"node/{name} drained")
        sys.stdout.flush()


def _report_failure(pending_nodes: list[str], name: str, failure: DrainFailed) -> None:
    """kubectl's lines on stderr when a node's drain stops (the pending nodes, then the error)."""
    print(f'error: unable to drain node "{name}" due to error: {failure.error}, continuing command...',
          file=sys.stderr)
    print("There are pending nodes to be drained:", file=sys.stderr)
    for pending in pending_nodes:
        print(f" {pending}", file=sys.stderr)
    for line in failure.final_lines:
        print(line, file=sys.stderr)


def _drain_one(name: str, opts: DrainOptions, *, grace_period: Optional[int], timeout: float | None,
               timeout_code: int, disable_eviction: bool = False) -> None:
    """Drain one cordoned node: evict (or delete) what the filters allow and wait; DrainFailed when it cannot."""
    server = connect.api()
    verdicts = pods_for_deletion(drain_ops.pods_on_node(server, name), opts, drain_ops.daemonset_lookup(server))
    errors = drain_errors(verdicts)
    if errors:
        raise DrainFailed(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]", errors, 1)
    warnings = drain_warnings(verdicts)
    if warnings:
        print(f"Warning: {warnings}", file=sys.stderr)
    if disable_eviction:
        try:
            _delete_and_wait(verdicts, grace_period=grace_period, timeout=timeout, word="deleted", announce=False)
        except DrainTimeout as exc:
            error = f"drain did not complete within {_format_duration(timeout or 0)}"
            print(f'There are pending pods in node "{name}" when an error occurred: {error}', file=sys.stderr)
            for pod_name in exc.pending:
                print(f"pod/{pod_name}", file=sys.stderr)
            raise DrainFailed(error, [f"error: {error}"], timeout_code) from None
        return
    try:
        _evict_and_wait(verdicts, grace_period=grace_period, timeout=timeout)
    except EvictionFailed as exc:
        error = str(exc)
        pending = [v.pod["metadata"]["name"] for v in pods_for_deletion(
            drain_ops.pods_on_node(server, name), opts, drain_ops.daemonset_lookup(server)) if v.delete]
        if pending:
            print(f'There are pending pods in node "{name}" when an error occurred: {error}', file=sys.stderr)
            for pod_name in pending:
                print(f"pod/{pod_name}", file=sys.stderr)
        final = [f"error: {error}"] if len(exc.errors) == 1 else list(exc.errors)
        raise DrainFailed(error, final, timeout_code if exc.timed_out else 1) from None


def _evicted(word: str) -> "Callable[[str], None]":
    def report(name: str) -> None:
        print(f"pod/{name} {word}")
        sys.stdout.flush()

    return report


def _evicting(key: str) -> None:
    print(f"evicting pod {key}", file=sys.stderr)
    sys.stderr.flush()


def _refused(key: str, message: str) -> None:
    """kubectl's line for an eviction a PodDisruptionBudget refused (TooManyRequests)."""
    namespace, _, name = key.partition("/")
    print(f'error when evicting pods/"{name}" -n "{namespace}" (will retry after 5s): {message}', file=sys.stderr)
    sys.stderr.flush()


def _evict_and_wait(verdicts: list[PodVerdict], *, grace_period: Optional[int], timeout: float | None) -> None:
    """kctl.ops.drain.evict_and_wait (the Eviction subresource) on this command's API, printing kubectl's lines."""
    drain_ops.evict_and_wait(connect.api(), verdicts, grace_period=grace_period, timeout=timeout,
                             on_evicting=_evicting, on_evicted=_evicted("evicted"), on_refused=_refused)


def _delete_and_wait(verdicts: list[PodVerdict], *, grace_period: Optional[int], timeout: float | None,
                     word: str, announce: bool) -> None:
    """kctl.ops.drain.delete_and_wait on this command's API: `pod/NAME <word>` as each goes."""
    drain_ops.delete_and_wait(connect.api(), verdicts, grace_period=grace_period, timeout=timeout,
                              on_evicting=_evicting if announce else (lambda _key: None),
                              on_evicted=_evicted(word))


def evict_and_wait(verdicts: list[PodVerdict], *, grace_period: Optional[int], timeout: float | None) -> None:
    """Delete the pods directly (no budget consulted) and wait, printing drain's lines: `kctl node remove`,
    which must empty a host it forgets whatever the budgets say. DrainTimeout names the pods left."""
    _delete_and_wait(verdicts, grace_period=grace_period, timeout=timeout, word="evicted", announce=True)
