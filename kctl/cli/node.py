"""`kctl node add|remove|trust`: bringing Podman hosts reached over SSH into the fleet.

A host is a Node object whose annotations name its Podman (kctl.runtime.connect):
`node add` writes one (labels, taints, the SSH key, kctl's own known_hosts file), the
daemon then runs an agent for it. Host keys are never accepted silently: `node add`
says when a host's key is unknown or changed, and `node trust` shows the fingerprints
and records them in the known_hosts file kctl keeps beside the store. `node remove`
drains the node (DaemonSet pods too) and deletes it.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Annotated, Optional

import typer

from kctl.cli import connect

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

node_app = typer.Typer(name="node", help="Add, remove and trust Podman hosts reached over SSH.",
                       no_args_is_help=True)
app.add_typer(node_app)

ROOTFUL_SOCKET = "/run/podman/podman.sock"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_SSH_RE = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>[A-Za-z0-9._-]+)(?::(?P<port>\d+))?$")


def _fail(message: str, *, code: int = 1) -> typer.Exit:
    from kctl.cli.wait import fail

    return fail(message, code=code)


def parse_ssh(text: str) -> tuple[str, str, int]:
    """`[user@]host[:port]` -> (user, host, port); user root and port 22 by default."""
    match = _SSH_RE.match(text.strip())
    if not match or not 0 < int(match["port"] or 22) < 65536:
        raise ValueError(f"--ssh {text!r}: expected [user@]host[:port]")
    return match["user"] or "root", match["host"], int(match["port"] or 22)


def parse_label(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key:
        raise ValueError(f"--label {text!r}: expected key=value")
    return key, value


def parse_taint(text: str) -> dict:
    """kubectl taint's `key[=value]:Effect` as a Node taint."""
    spec, colon, effect = text.rpartition(":")
    key, _, value = spec.partition("=")
    if not colon or not key or effect not in TAINT_EFFECTS:
        raise ValueError(f"--taint {text!r}: expected key[=value]:Effect with Effect one of {', '.join(TAINT_EFFECTS)}")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def known_hosts_path() -> str:
    """kctl's known_hosts file: beside the store in use."""
    from kctl.ssh import known_hosts_for_store

    return known_hosts_for_store(connect.local_path())


def _ssh_address(node: dict) -> tuple[str, int]:
    from kctl.runtime.connect import podman_url
    from kctl.ssh import SSHTarget

    url = podman_url(node)
    if not url.startswith("ssh://"):
        raise _fail(f'node "{node["metadata"]["name"]}" is reached through {url}, not SSH: it has no host key')
    target = SSHTarget.parse(url)
    return target.host, target.port


def _host_key_warning(name: str, host: str, port: int, known_hosts: str) -> str | None:
    """None when the host's key is recorded; else the line that says what to do."""
    from kctl.ssh import recorded_host_keys, scan_host_keys, trust_state

    offered = scan_host_keys(host, port)
    if not offered:
        return f"cannot read the host key of {host}:{port} (no answer); check it with: kctl node trust {name}"
    state = trust_state(offered, recorded_host_keys(known_hosts, host, port))
    if state == "trusted":
        return None
    if state == "changed":
        return (f"the host key of {host}:{port} has CHANGED since it was trusted; kctl refuses to connect. "
                f"If the change is expected: kctl node trust {name}")
    return f"the host key of {host}:{port} is not known; kctl will not connect until you run: kctl node trust {name}"


@node_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="Node name.")],
    ssh: Annotated[str, typer.Option("--ssh", help="[user@]host[:port] of the host's sshd.")],
    identity: Annotated[Optional[str], typer.Option(help="Private key file for SSH.")] = None,
    socket: Annotated[Optional[str], typer.Option(
        help=f"Podman socket on the host (default {ROOTFUL_SOCKET} for root; required for other users).")] = None,
    label: Annotated[Optional[list[str]], typer.Option("--label", "-l", help="A label key=value (repeatable).")] = None,
    taint: Annotated[Optional[list[str]], typer.Option(help="A taint key[=value]:Effect (repeatable).")] = None,
) -> None:
    """Add a host reached over SSH as a Node; the daemon starts its agent."""
    from kctl.agent.node import node_object
    from kctl.runtime.connect import ANNOTATION_SSH_KNOWN_HOSTS

    try:
        user, host, port = parse_ssh(ssh)
        labels = dict(parse_label(item) for item in label or ())
        taints = [parse_taint(item) for item in taint or ()]
    except ValueError as exc:
        raise _fail(str(exc)) from None
    if socket is None:
        if user != "root":
            raise _fail(f"--socket is required for the rootless user {user} "
                        "(usually /run/user/UID/podman/podman.sock; see docs/multi-host.md)")
        socket = ROOTFUL_SOCKET
    if not socket.startswith("/"):
        raise _fail(f"--socket {socket!r}: expected an absolute path")
    if identity is not None:
        identity = os.path.abspath(identity)
        if not os.access(identity, os.R_OK):
            raise _fail(f"--identity {identity}: no such readable file")
    known_hosts = known_hosts_path()
    obj = node_object(name, podman_url=f"ssh://{user}@{host}:{port}{socket}", identity=identity, labels=labels)
    obj["metadata"]["annotations"][ANNOTATION_SSH_KNOWN_HOSTS] = known_hosts
    if taints:
        obj["spec"]["taints"] = taints
    connect.api().create(obj)
    print(f"node/{name} added")
    warning = _host_key_warning(name, host, port, known_hosts)
    if warning:
        connect.warn(warning)


@node_app.command("trust")
def trust(
    name: Annotated[str, typer.Argument(help="Node name.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Record the keys without asking.")] = False,
) -> None:
    """Show a node's SSH host key fingerprints and, on request, record them as trusted."""
    from kctl.ssh import record_host_keys, recorded_host_keys, scan_host_keys, trust_state

    node = connect.api().get(connect.api().resource("nodes"), name)
    host, port = _ssh_address(node)
    known_hosts = known_hosts_path()
    offered = scan_host_keys(host, port)
    if not offered:
        raise _fail(f"cannot read the host key of {host}:{port}: the host does not answer")
    recorded = recorded_host_keys(known_hosts, host, port)
    state = trust_state(offered, recorded)
    print(f"Host keys of node {name} ({host}:{port}):")
    for key in offered:
        print(f"  {key.type:<20} {key.fingerprint}")
    if state == "trusted":
        print("These keys are trusted already.")
        return
    if state == "changed":
        print("WARNING: the host key has CHANGED. It was:")
        for key in recorded:
            print(f"  {key.type:<20} {key.fingerprint}")
        print("Someone may be intercepting the connection; check the new fingerprint on the host itself"
              " (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub).")
    if not yes:
        if not sys.stdin.isatty():
            raise _fail("not recorded: confirm with --yes (stdin is not a terminal)")
        if input("Trust these keys? [y/N] ").strip().lower() not in ("y", "yes"):
            raise _fail("not recorded")
    record_host_keys(known_hosts, host, port, offered)
    print(f"recorded in {known_hosts}")


@node_app.command("remove")
def remove(
    name: Annotated[str, typer.Argument(help="Node name.")],
    force: Annotated[bool, typer.Option(
        help="Do not wait for the host: delete its pods' objects at once (containers there are left behind).")] = False,
    timeout: Annotated[str, typer.Option(help="How long to wait for the drain (Go duration).")] = "5m",
) -> None:
    """Drain a node (its DaemonSet pods too), then delete it."""
    from kctl.machinery.errors import NotFound
    from kctl.machinery.selectors import parse_field_selector
    from kctl.cli import nodes
    from kctl.cli.durations import parse_timeout
    from kctl.cli.wait import timeout_exit_code

    server = connect.api()
    node_rt, pods_rt = server.resource("nodes"), server.resource("pods")
    server.get(node_rt, name)
    nodes.set_unschedulable(name, True)

    def bound_pods() -> list[dict]:
        pods, _ = server.list(pods_rt, field_selector=parse_field_selector(f"spec.nodeName={name}", kind="Pod"))
        return pods

    if force:
        for pod in bound_pods():
            try:
                server.delete(pods_rt, pod["metadata"]["name"], namespace=pod["metadata"].get("namespace"),
                              grace_period=0)
            except NotFound:
                pass
    else:
        # Everything goes, DaemonSet pods included: nothing may keep running on a host kctl forgets.
        verdicts = [nodes.PodVerdict(pod, True) for pod in bound_pods()]
        try:
            nodes.evict_and_wait(verdicts, grace_period=None, timeout=parse_timeout(timeout) or None)
        except nodes.DrainTimeout as exc:
            raise _fail(f"node/{name} not removed: {len(exc.pending)} pod(s) still on it after {timeout} "
                        f"({', '.join(exc.pending[:5])}); is the host reachable? --force removes it anyway",
                        code=timeout_exit_code()) from None
    try:
        server.delete(node_rt, name)
    except NotFound:
        pass
    print(f"node/{name} removed")


__all__ = ["parse_label", "parse_ssh", "parse_taint"]
