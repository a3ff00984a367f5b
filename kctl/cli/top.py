"""`kctl top pod|node`: CPU and memory usage of pods and nodes, as `kubectl top` prints it.

The usage is what the node agents' scrapers wrote (kctl.agent.metrics: PodMetrics and
NodeMetrics of metrics.k8s.io/v1beta1, every `kctl daemon --metric-resolution`); the rows,
their order and kubectl's errors come from kctl.ops.top. `pods`/`po` and `nodes`/`no` are
accepted for `pod` and `node`, as kubectl's aliases. Mounted by kctl.cli.root (COMMANDS).
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import click
import typer
from typer.core import TyperGroup

from kctl.cli import connect

#: kubectl's aliases of `top`'s sub-commands
ALIASES = {"pods": "pod", "po": "pod", "nodes": "node", "no": "node"}


class TopGroup(TyperGroup):
    """`top`'s sub-commands, answering to kubectl's aliases too (hidden from help)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, ALIASES.get(cmd_name, cmd_name))

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name, command, rest = super().resolve_command(ctx, args)
        return (command.name if command is not None else name), command, rest


#: this module's commands; kctl.cli.root mounts them (root.COMMANDS)
app = typer.Typer()

top_app = typer.Typer(
    name="top",
    cls=TopGroup,
    help="Display resource (CPU/memory) usage of pods or nodes, as the node agents last sampled it.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(top_app)

SortOpt = Annotated[Optional[str], typer.Option(
    "--sort-by", metavar="cpu|memory", help="Sort by cpu or memory usage, largest first.")]
SelectorOpt = Annotated[Optional[str], typer.Option("--selector", "-l", help="Label selector.")]
NoHeadersOpt = Annotated[bool, typer.Option("--no-headers", help="Print no header line.")]


#: kubectl's printers.GetNewTabWriter (cli-runtime): tabwriter.NewWriter(out, 6, 4, 3, ' ', RememberWidths), as the
#: real kubectl 1.32 prints `top` (tests/unit/kubeapi/test_metrics_api.py compares them)
MIN_WIDTH, PADDING = 6, 3


def format_rows(rows: list[list[str]]) -> str:
    """Go's tabwriter as kubectl's top printer uses it: every cell ends in a tab, so every column (the last
    too) is padded to max(6, widest + 3)."""
    if not rows:
        return ""
    widths = [max(MIN_WIDTH, max(len(row[i]) for row in rows if i < len(row)) + PADDING)
              for i in range(max(len(row) for row in rows))]
    return "".join("".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) + "\n" for row in rows)


def _print(rows: list[list[str]]) -> None:
    sys.stdout.write(format_rows(rows))


def _not_available() -> typer.Exit:
    from kctl.cli.wait import fail

    return fail("metrics not available yet")


@top_app.command("pod")
def pod(
    name: Annotated[Optional[str], typer.Argument(help="A pod's name (default: every pod).")] = None,
    namespace: Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")] = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Pods of every namespace.")] = False,
    selector: SelectorOpt = None,
    containers: Annotated[bool, typer.Option("--containers", help="One row per container.")] = False,
    sort_by: SortOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Show the CPU (millicores) and memory (Mi) each pod (or container) uses.

    Usage is sampled on each host every `kctl daemon --metric-resolution` (15s); a pod shows up
    after its second sample.
    """
    from kctl.ops.top import MetricsNotAvailable, pod_rows

    ns = None if all_namespaces else connect.namespace_arg(namespace)
    try:
        rows = pod_rows(connect.api(), namespace=ns, name=name, label_selector=selector, containers=containers,
                        sort_by=sort_by, headers=not no_headers)
    except MetricsNotAvailable:
        raise _not_available() from None
    if not rows:
        where = "" if all_namespaces else f" in {ns} namespace"
        print(f"No resources found{where}.", file=sys.stderr)
        return
    _print(rows)


@top_app.command("node")
def node(
    name: Annotated[Optional[str], typer.Argument(help="A node's name (default: every node).")] = None,
    selector: SelectorOpt = None,
    sort_by: SortOpt = None,
    no_headers: NoHeadersOpt = False,
    show_capacity: Annotated[bool, typer.Option(
        "--show-capacity", help="Percentages of the Node's capacity instead of its allocatable.")] = False,
) -> None:
    """Show the CPU and memory each node uses, and what share of its allocatable that is."""
    from kctl.ops.top import MetricsNotAvailable, node_rows

    try:
        rows = node_rows(connect.api(), name=name, label_selector=selector, sort_by=sort_by,
                         show_capacity=show_capacity, headers=not no_headers)
    except MetricsNotAvailable:
        raise _not_available() from None
    _print(rows)
