"""`kctl logs` and `kctl exec`: reach a pod's container on whichever host runs it.

Both find the Pod, its Node, the Node's runtime (kctl.runtime.connect.runtime_for_node)
and the container by the labels the node agent puts on everything it creates (pod uid
+ container name), then stream logs or run a command through the runtime interface.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated, Optional

import typer

from kctl.machinery.times import parse_duration
from kctl.cli import connect

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")]
ContainerOpt = Annotated[Optional[str], typer.Option("--container", "-c", help="Container name.")]


def _runtime_for(node: dict):
    from kctl.runtime.connect import runtime_for_node

    return runtime_for_node(node)


def _pod_and_runtime(name: str, namespace: str | None) -> tuple[dict, object]:
    """The Pod and the runtime of the node it is bound to (kctl.ops.podstreams)."""
    from kctl.ops.podstreams import pod_and_runtime

    api = connect.api()
    return pod_and_runtime(api, name, connect.namespace_arg(namespace), runtime_for=lambda node: _runtime_for(node))


def _write(stream, data: bytes) -> None:
    from kctl.cli.httpspods import write_bytes

    write_bytes(stream, data)


def _on_server(args: list[str]) -> None:
    """With --server: run this command on the control host, where the nodes' keys are; exit with its status."""
    import subprocess

    from kctl.apiserver.remote import ssh_kctl_command

    argv = ssh_kctl_command(connect.current().server_url, args, identity=connect.current().identity)
    raise typer.Exit(subprocess.run(argv).returncode)


def _fail(exc: Exception) -> typer.Exit:
    print(f"error: {exc}", file=sys.stderr)
    return typer.Exit(1)


@app.command()
def logs(
    pod: Annotated[str, typer.Argument(help="The pod's name.")],
    container: ContainerOpt = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Stream the logs as they are written.")] = False,
    tail: Annotated[int, typer.Option("--tail", help="Lines from the end to show (-1: all).")] = -1,
    since: Annotated[Optional[str],
                     typer.Option("--since", help="Only logs newer than a duration: 10s, 5m, 1h.")] = None,
    previous: Annotated[bool,
                        typer.Option("--previous", "-p", help="The logs of the previous, exited instance.")] = False,
    timestamps: Annotated[bool, typer.Option("--timestamps", help="Prefix each line with its time.")] = False,
    namespace: NamespaceOpt = None,
) -> None:
    """Print the logs of a container in a pod."""
    if connect.current().https:  # the API server reads the log (kctl.cli.httpspods)
        from kctl.cli import httpspods

        try:
            since_seconds = parse_duration(since) if since is not None else None
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="'--since'") from None
        return httpspods.logs(pod, namespace=namespace, container=container, follow=follow, tail=tail,
                              since_seconds=since_seconds, previous=previous, timestamps=timestamps)
    if connect.current().server_url:
        _on_server(["logs", pod, "-n", connect.namespace_arg(namespace), f"--tail={tail}",
                    *(["-c", container] if container else []), *(["--since", since] if since else []),
                    *(["-f"] if follow else []), *(["-p"] if previous else []),
                    *(["--timestamps"] if timestamps else [])])
    since_ts = None
    if since is not None:
        try:
            since_ts = time.time() - parse_duration(since)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="'--since'") from None
    from kctl.ops.podstreams import LogOptions, PodStreamError, close_runtime, log_chunks, log_instance
    from kctl.runtime.interface import RuntimeError_

    runtime = None
    options = LogOptions(container=container, follow=follow, tail=tail if tail >= 0 else None, since=since_ts,
                         previous=previous, timestamps=timestamps)
    try:
        target, runtime = _pod_and_runtime(pod, namespace)
        chosen = log_instance(runtime, target, options)
        for chunk in log_chunks(runtime, chosen.id, options):
            _write(sys.stdout, chunk)
    except (PodStreamError, RuntimeError_) as exc:
        raise _fail(exc) from None
    finally:
        close_runtime(runtime)


@app.command("exec")
def exec_(
    pod: Annotated[str, typer.Argument(help="The pod's name.")],
    command: Annotated[list[str], typer.Argument(help="The command and its arguments, after --.")],
    container: ContainerOpt = None,
    stdin: Annotated[bool, typer.Option("--stdin", "-i", help="Pass stdin (read to its end) to the command.")] = False,
    tty: Annotated[bool, typer.Option("--tty", "-t",
                                      help="Accepted for kubectl compatibility; no TTY is allocated.")] = False,
    namespace: NamespaceOpt = None,
) -> None:
    """Run a command in a container of a pod; exits with the command's exit status.

    Usage: kctl exec POD [-c CONTAINER] [-i] -- COMMAND [ARGS...]
    """
    if connect.current().https:  # the API server runs it (pods/exec over a WebSocket, kctl.cli.httpspods)
        from kctl.cli import httpspods

        code = httpspods.exec_(pod, list(command), namespace=namespace, container=container, stdin=stdin)
        if code:
            raise typer.Exit(code)
        return
    if connect.current().server_url:
        _on_server(["exec", pod, "-n", connect.namespace_arg(namespace), *(["-c", container] if container else []),
                    *(["-i"] if stdin else []), "--", *command])
    from kctl.ops.podstreams import (ContainerNotRunning, PodStreamError, close_runtime, default_exec_container,
                                     running_instance)
    from kctl.runtime.interface import RuntimeError_

    runtime = None
    try:
        target, runtime = _pod_and_runtime(pod, namespace)
        if not container:
            container, note = default_exec_container(target)
            if note:
                print(note, file=sys.stderr)
        instance = running_instance(runtime, target, container)
        data = sys.stdin.buffer.read() if stdin else None
        result = runtime.exec(instance.id, list(command), stdin=data)
    except ContainerNotRunning as exc:
        raise _fail(Exception(f"unable to upgrade connection: {exc}")) from None
    except (PodStreamError, RuntimeError_) as exc:
        raise _fail(exc) from None
    finally:
        close_runtime(runtime)
    _write(sys.stdout, result.stdout or b"")
    _write(sys.stderr, result.stderr or b"")
    if result.exit_code:
        raise typer.Exit(result.exit_code)

