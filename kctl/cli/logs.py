"""`kctl logs` and `kctl exec`: reach a pod's container on whichever host runs it.

Both find the Pod, its Node, the Node's runtime (kctl.runtime.connect.runtime_for_node)
and the container by the labels the node agent puts on everything it creates (pod uid
+ container name), then stream logs or run a command through the runtime interface.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from kctl.machinery.times import parse_duration
from kctl.cli import connect
if TYPE_CHECKING:  # the runtime is imported by the commands only, to keep start-up quick
    from kctl.runtime.interface import ContainerState

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")]
ContainerOpt = Annotated[Optional[str], typer.Option("--container", "-c", help="Container name.")]

DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"
class CommandError(Exception):
    """A problem worth one `error: ...` line (exit 1), as kubectl prints them."""


def _runtime_for(node: dict):
    from kctl.runtime.connect import runtime_for_node

    return runtime_for_node(node)


def _pod_and_runtime(name: str, namespace: str | None) -> tuple[dict, object]:
    """The Pod and the runtime of the node it is bound to."""
    from kctl.machinery.errors import BadRequest

    api = connect.api()
    pod = api.get(api.resource("pods"), name, namespace=connect.namespace_arg(namespace))
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        raise BadRequest(f'pod "{name}" is not scheduled to a node yet')
    node = api.get(api.resource("nodes"), node_name)
    return pod, _runtime_for(node)


def _names(pod: dict, key: str) -> list[str]:
    return [c.get("name", "") for c in (pod.get("spec") or {}).get(key) or ()]


def choose_container(pod: dict, container: str | None) -> str:
    """The container -c names, the only one, or an error listing the choices, as kubectl."""
    name = pod["metadata"]["name"]
    apps, inits = _names(pod, "containers"), _names(pod, "initContainers")
    if container:
        if container not in apps + inits:
            raise CommandError(f"container {container} is not valid for pod {name}")
        return container
    default = (pod["metadata"].get("annotations") or {}).get(DEFAULT_CONTAINER_ANNOTATION)
    if default in apps:
        return default
    if len(apps) == 1:
        return apps[0]
    message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(apps)}]"
    if inits:
        message += f" or one of the init containers: [{' '.join(inits)}]"
    raise CommandError(message)


def _restart(state: ContainerState) -> int:
    from kctl.runtime.interface import LABEL_RESTART

    try:
        return int(state.labels.get(LABEL_RESTART, "0"))
    except ValueError:
        return 0


def instances(runtime, pod: dict, container: str) -> list[ContainerState]:
    """The Podman containers made for one container of the pod, oldest first."""
    from kctl.runtime.interface import LABEL_CONTAINER, LABEL_POD_UID

    found = runtime.list_containers({LABEL_POD_UID: pod["metadata"]["uid"], LABEL_CONTAINER: container})
    return sorted(found, key=lambda s: (_restart(s), s.started_at or "", s.finished_at or ""))


def _close(runtime) -> None:
    """Close the runtime's connection (an SSH tunnel) if it has one to close."""
    close = getattr(runtime, "close", None)
    if callable(close):
        close()


def _write(stream, data: bytes) -> None:
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        stream.flush()
        buffer.write(data)
        buffer.flush()
    else:
        stream.write(data.decode("utf-8", "replace"))
        stream.flush()


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
    from kctl.runtime.interface import RuntimeError_

    runtime = None
    try:
        target, runtime = _pod_and_runtime(pod, namespace)
        name = choose_container(target, container)
        found = instances(runtime, target, name)
        if previous:
            if len(found) < 2:
                raise CommandError(f'previous terminated container "{name}" in pod "{pod}" not found')
            chosen = found[-2]
        elif not found:
            raise CommandError(f'container "{name}" in pod "{pod}" is waiting to start: ContainerCreating')
        else:
            chosen = found[-1]
        for chunk in runtime.logs(chosen.id, follow=follow, tail=tail if tail >= 0 else None, since=since_ts,
                                  timestamps=timestamps):
            _write(sys.stdout, chunk)
    except (CommandError, RuntimeError_) as exc:
        raise _fail(exc) from None
    finally:
        _close(runtime)


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
    if connect.current().server_url:
        _on_server(["exec", pod, "-n", connect.namespace_arg(namespace), *(["-c", container] if container else []),
                    *(["-i"] if stdin else []), "--", *command])
    from kctl.runtime.interface import RuntimeError_

    runtime = None
    try:
        target, runtime = _pod_and_runtime(pod, namespace)
        name = container or _default_container(target)
        choose_container(target, name)
        phase = (target.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            raise CommandError(f"cannot exec into a container in a completed pod; current phase is {phase}")
        running = [s for s in instances(runtime, target, name) if s.state == "running"]
        if not running:
            raise CommandError(f'unable to upgrade connection: container not found ("{name}")')
        data = sys.stdin.buffer.read() if stdin else None
        result = runtime.exec(running[-1].id, list(command), stdin=data)
    except (CommandError, RuntimeError_) as exc:
        raise _fail(exc) from None
    finally:
        _close(runtime)
    _write(sys.stdout, result.stdout or b"")
    _write(sys.stderr, result.stderr or b"")
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _default_container(pod: dict) -> str:
    """kubectl exec's default: the first container, saying so when there are several."""
    apps = _names(pod, "containers")
    default = (pod["metadata"].get("annotations") or {}).get(DEFAULT_CONTAINER_ANNOTATION)
    if default in apps:
        return default
    if not apps:
        raise CommandError(f'pod {pod["metadata"]["name"]} has no containers')
    if len(apps) > 1:
        print(f'Defaulted container "{apps[0]}" out of: {", ".join(apps)}', file=sys.stderr)
    return apps[0]
