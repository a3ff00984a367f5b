"""`kctl port-forward TYPE/NAME [LOCAL_PORT:]REMOTE_PORT...`: local ports that lead to a pod's ports.

Reads the object and its pods through the API, asks kctl.ops.portforward which pod (a Pod,
or the most active one a Service's or workload's selector picks), which pod ports, which
local addresses and which way to the pod (straight, or `ssh -W` through the pod's host or
the control host), then runs kctl.ops.portrelay's Forwarder until Ctrl-C (exit 0) or until
the pod is gone (`error: lost connection to pod`, exit 1). Output and errors are kubectl's.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import TYPE_CHECKING, Annotated, Iterator, Optional

import typer

from kctl.cli import connect
from kctl.cli.durations import Duration

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.ops.portrelay import Forwarder

#: this module's commands; kctl.cli.root mounts them (COMMANDS)
app = typer.Typer()

#: seconds between looks at whether the forwarded pod still runs
POD_CHECK_INTERVAL = 2.0


def _fail(message: str, *, usage: bool = False) -> typer.Exit:
    """kubectl's `error: ...` line, exit 1; a usage error is one line (kubectl's two sentences) and exit 2, as
    kctl's other usage errors (docs/cli.md, Exit statuses)."""
    if usage:
        print(f"error: {message}. See 'kctl port-forward -h' for help and examples", file=sys.stderr)
        return typer.Exit(2)
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(1)


def _known_hosts() -> str | None:
    """kctl's known_hosts beside the local store (None with --server: the control host's are used)."""
    if connect.current().server_url:
        return None
    from kctl.ssh import known_hosts_for_store

    return known_hosts_for_store(connect.local_path())


@app.command("port-forward")
def port_forward(
    args: Annotated[Optional[list[str]], typer.Argument(
        metavar="TYPE/NAME [LOCAL_PORT:]REMOTE_PORT...",
        help="pod/NAME (or NAME), svc/NAME, deploy/NAME, rs/NAME, sts/NAME..., then ports: 8080:80, :80 "
             "(any free local port), 80, or a named port.")] = None,
    address: Annotated[Optional[list[str]], typer.Option(
        "--address", help="Local addresses to listen on, comma-separated or repeated: localhost (127.0.0.1 "
                          "and ::1), or IPs (default: localhost).")] = None,
    namespace: Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")] = None,
    pod_running_timeout: Annotated[float, typer.Option(
        "--pod-running-timeout", click_type=Duration(),
        help="How long to wait for a pod of a Service or workload to exist (like 5s, 2m), above zero.")] = 60.0,
) -> None:
    """Forward one or more local ports to a pod.

    Use resource type/name such as deployment/mydeployment to select a pod; a Service's
    named or numbered port leads to its targetPort on the pod. Each connection goes to
    the pod's IP over its host's network: straight from here to a pod on this machine,
    through `ssh -W` to a pod on a host reached over SSH. Ctrl-C ends it.
    """
    if connect.current().https:
        raise _fail("kctl port-forward does not speak the HTTPS API's pods/portforward protocol: use "
                    "`kubectl port-forward` with the same kubeconfig, or kctl with --server ssh://... or on the "
                    "control host")
    from kctl.ops import portforward as pf
    from kctl.ops.portrelay import Forwarder

    try:
        resource, specs = pf.split_ports(list(args or ()))
        if pod_running_timeout <= 0:
            raise pf.PortForwardUsageError("--pod-running-timeout must be higher than zero")
        addresses = pf.parse_addresses([a for item in address or ["localhost"] for a in item.split(",") if a])
        kind, name = pf.target_of(resource)
        api = connect.api()
        ns = connect.namespace_arg(namespace)
        rt = api.resource(kind)
        obj = api.get(rt, name, namespace=ns)  # NotFound: the CLI's edge prints kubectl's line
        chosen = pf.forwardable_pod(api, obj, rt.group_kind, namespace=ns, timeout=pod_running_timeout)
        resolved = pf.resolve_ports(specs, chosen, service=obj if rt.group_kind == "Service" else None)
        ports = pf.parse_ports(resolved)
        pod = api.get(api.resource("pods"), chosen["metadata"]["name"], namespace=ns)
        pf.require_running(pod)
        node_name = (pod.get("spec") or {}).get("nodeName")
        node = api.find(api.resource("nodes"), node_name) if node_name else None
        reach = pf.Reach(server_url=connect.current().server_url, server_identity=connect.current().identity,
                         known_hosts=_known_hosts())
        routes = {p.remote: pf.route_for(pod, node, p.remote, reach) for p in ports}
    except pf.PortForwardUsageError as exc:
        raise _fail(str(exc), usage=True) from None
    except pf.PortForwardError as exc:
        raise _fail(str(exc)) from None
    forwarder = Forwarder([(p.local, p.remote) for p in ports], addresses, routes)
    with _stop_signals() as stopped:  # before the first line: a signal right after it ends it cleanly
        try:
            forwarder.listen()
        except pf.PortForwardError as exc:
            raise _fail(str(exc)) from None
        _serve(api, forwarder, pod, stopped)


@contextlib.contextmanager
def _stop_signals() -> Iterator[threading.Event]:
    """An event SIGINT and SIGTERM set while inside; the handlers before are put back after.

    As kubectl (Go's signal.Notify), Ctrl-C ends it cleanly even when it was started with
    SIGINT ignored (`kctl port-forward ... &` in a script).
    """
    import signal

    stopped = threading.Event()
    previous = ({sig: signal.signal(sig, lambda *_: stopped.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
                if threading.current_thread() is threading.main_thread() else {})
    try:
        yield stopped
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _serve(api: API, forwarder: Forwarder, pod: dict, stopped: threading.Event) -> None:
    """Relay until `stopped` (Ctrl-C, SIGTERM: exit 0) or the pod is gone (exit 1); everything closed either way."""
    lost = False
    forwarder.start()
    try:
        while not stopped.wait(POD_CHECK_INTERVAL):
            if _pod_gone(api, pod):
                lost = True
                break
    except KeyboardInterrupt:
        pass
    finally:
        forwarder.close()
    if lost:
        raise _fail("lost connection to pod")


def _pod_gone(api: API, pod: dict) -> bool:
    """Whether the forwarded pod was deleted, replaced (another uid) or has ended; False if the API is unreachable."""
    from kctl.machinery.errors import APIError

    meta = pod["metadata"]
    try:
        now = api.find(api.resource("pods"), meta["name"], namespace=meta.get("namespace"))
    except APIError:
        return False
    if now is None or now["metadata"].get("uid") != meta.get("uid"):
        return True
    return (now.get("status") or {}).get("phase") in ("Succeeded", "Failed")


__all__ = ["app", "port_forward"]
