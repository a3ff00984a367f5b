"""One heartbeat's look at a host: can it be reached, does its Podman answer, and if not, why.

The node Heartbeat (kctl.agent.node) calls PodmanRuntime.check_host, a `HostChecker`,
once per beat. The checker has a connection of its own, apart from the agent's shared
pod-work tunnel, bounded by a timeout shorter than the heartbeat interval, so a beat
never waits behind pod work; it is ended at the first failure, so after a network heal
the next beat talks over a fresh connection instead of one stuck in TCP retransmission:

- `unix://SOCKET` (the agent on its own host, node mode): the host is reached by
  construction; the socket is missing (`PodmanSocketMissing`) or the service does not
  answer (`PodmanNotAnswering`), else Podman is pinged (and asked for `info` and
  images when `details`).
- `ssh://user@host:port/SOCKET`: one `ssh` (kctl.ssh.SSHSession: kctl's options, host
  keys strictly checked), forwarding a private local socket to SOCKET, runs
  `test -S SOCKET` on the host (`check_script`) and stays open for the next beats. A
  fresh one is made after a TCP knock (`tcp_knock`); ssh's own failure names why the
  host cannot be reached (kctl.ssh.classify_ssh_failure, ssh_failure_message); a missing
  socket or a Podman that refuses is reported as reachable but not answering.
  `check_host` is the one-shot form.

SSH itself (command lines, the ssh process, naming its failures) is kctl.ssh's; this
module only decides what a host's answers mean for its node.

A check never raises. `HostUnreachable` is the error the agent's pod-work connection
raises while the heartbeat has found the host unreachable (PodmanRuntime.suspend).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import socket
import time
from dataclasses import dataclass

from kctl.runtime.interface import HostInfo, ImageInfo, RuntimeError_
from kctl.ssh import (SSH_FAILURE_REASONS, SSHError, SSHSession, SSHTarget, classify_ssh_failure,
                      ssh_failure_message)

#: the host could not be reached at all (the agent posts nothing; the node goes Unknown): why ssh failed
UNREACHABLE_REASONS = SSH_FAILURE_REASONS
#: the host answered but its Podman did not (the agent posts Ready=False with this reason)
NOT_ANSWERING_REASONS = ("PodmanSocketMissing", "PodmanNotAnswering")
#: seconds one TCP connection attempt to sshd may take before the next is tried (see tcp_knock)
KNOCK_ATTEMPT = 0.25
KNOCK_PAUSE = 0.05
#: seconds a check's ssh login may take, over as many checks as it needs, before it is given up
LOGIN_LIMIT = 10.0
_READY_WORD = "kctl-podman-socket"
_MISSING_WORD = "kctl-no-podman-socket"


class HostUnreachable(RuntimeError_):
    """The node's host cannot be reached now (its heartbeat says why); calls fail at once."""


@dataclass(frozen=True)
class HostCheck:
    """What one check found: reachable (SSH login worked; always for a local socket), answering
    (Podman answered), the cause when not (a CamelCase reason and a one-line message naming the
    host and the fix), and, when asked for and answering, the host's info and images."""

    reachable: bool
    answering: bool
    reason: str = ""
    message: str = ""
    info: HostInfo | None = None
    images: list[ImageInfo] | None = None
    #: False when the check only ran out of time (the host may merely be slow): the heartbeat
    #: then waits for a second such beat before it calls the host unreachable
    definite: bool = True


def unreachable(reason: str, message: str, *, definite: bool = True) -> HostCheck:
    return HostCheck(reachable=False, answering=False, reason=reason, message=message, definite=definite)


def not_answering(reason: str, message: str) -> HostCheck:
    return HostCheck(reachable=True, answering=False, reason=reason, message=message)


def _one_line(text: str) -> str:
    return "; ".join(part.strip() for part in str(text).strip().splitlines()
                     if part.strip() and not set(part.strip()) <= {"@"})


def _ssh_failure(reason: str, stderr: str, *, target: SSHTarget, node: str, identity: str | None) -> str:
    """`node NAME: ` and kctl.ssh's one line on why ssh failed (NAME: the node, else the host)."""
    name = node or target.host
    return f"node {name}: {ssh_failure_message(reason, stderr, target=target, node=name, identity=identity)}"


def check_host(url: str, *, timeout: float, details: bool = True, node: str = "", identity: str | None = None,
               known_hosts: str | None = None) -> HostCheck:
    """Reach the Podman at url once, over a connection made for it and closed after (see HostChecker)."""
    checker = HostChecker(url, node=node, identity=identity, known_hosts=known_hosts)
    try:
        return checker.check(timeout=timeout, details=details)
    finally:
        checker.close()


class HostChecker:
    """The heartbeat's own connection to one host, apart from the pod work's tunnel.

    For ssh:// a check first uses the ssh the previous checks left open (a ping over its
    private forward: cheap); if that fails in any way the ssh is ended and a fresh one is
    made (a TCP knock, then login and `test -S` of the socket), so a beat never waits on a
    connection stuck in TCP retransmission and ssh itself names the cause. A login that is
    slower than one check (a loaded machine) is not thrown away: the next checks wait for
    the same ssh, up to LOGIN_LIMIT seconds. Each check returns within about its timeout.
    Used from one thread (the heartbeat's); close() ends the ssh.
    """

    def __init__(self, url: str, *, node: str = "", identity: str | None = None,
                 known_hosts: str | None = None) -> None:
        self.url, self.node = url, node
        self.identity, self.known_hosts = identity, known_hosts
        self._ssh: SSHSession | None = None  # logged in, forwarding
        self._login: SSHSession | None = None  # still logging in

    def check(self, *, timeout: float, details: bool = True) -> HostCheck:
        """What the host says now, within about `timeout` seconds; never raises."""
        if self.url.startswith("unix://"):
            return check_socket(self.url[len("unix://"):], timeout=timeout, details=details,
                                where=self.node or "this host")
        try:
            target = SSHTarget.parse(self.url)
        except ValueError as error:
            return unreachable("SSHFailed", f"node {self.node}: {error}")
        deadline = time.monotonic() + timeout
        where = f"{self.node or target.host} ({target.host}:{target.port})"
        if self._ssh is not None:
            if self._ssh.alive():
                found = check_socket(self._ssh.local, timeout=max(0.05, deadline - time.monotonic()),
                                     details=details, where=where, remote=True)
                if found.answering:
                    return found
            self.close()  # anything wrong: start afresh, never over a retransmitting connection
            if deadline - time.monotonic() < 0.2:
                return self._no_answer(target)
        if self._login is None:
            knocked = tcp_knock(target.host, target.port, deadline=deadline)
            if knocked is not True:
                return unreachable("HostUnreachable", _timeout_message(target, self.node),
                                   definite=knocked == "no-route")
            # Knocking was only waiting for the network: the login gets a timeout of its own.
            deadline = max(deadline, time.monotonic() + timeout)
            try:
                self._login = SSHSession.start(target, check_script(target.path), identity=self.identity,
                                               known_hosts=self.known_hosts, connect_timeout=LOGIN_LIMIT,
                                               folder_prefix="kctl-beat-")
            except SSHError as error:
                return unreachable("SSHFailed", f"node {self.node}: cannot run ssh: {error}")
        return self._logged_in(target, self._login, deadline, details=details, where=where)

    def _logged_in(self, target: SSHTarget, ssh: SSHSession, deadline: float, *, details: bool,
                   where: str) -> HostCheck:
        """Wait (until the deadline) for the login under way to say whether the socket is there."""
        word = ssh.read_line(deadline)
        if word is None and not ssh.ended and ssh.alive() and time.monotonic() - ssh.started < LOGIN_LIMIT:
            return self._no_answer(target)  # still logging in: the next check waits for it again
        self._login = None
        if word == _MISSING_WORD:
            ssh.stop()
            return not_answering("PodmanSocketMissing",
                                 f"node {where}: no Podman socket at {target.path} on the host; start the service"
                                 f" there (systemctl enable --now podman.socket)")
        if word != _READY_WORD:
            timed_out = not ssh.ended and ssh.alive()  # still trying at its limit
            stderr = ssh.stop()
            reason = classify_ssh_failure(stderr) if stderr.strip() else "SSHFailed"
            if timed_out and reason == "SSHFailed":
                return unreachable("HostUnreachable", _timeout_message(target, self.node))
            return unreachable(reason, _ssh_failure(reason, stderr, target=target, node=self.node,
                                                    identity=self.identity))
        self._ssh = ssh
        while not os.path.exists(ssh.local) and time.monotonic() < deadline and ssh.alive():
            time.sleep(0.01)
        if deadline - time.monotonic() < 0.2:
            return self._no_answer(target)  # logged in just now: the next check pings
        found = check_socket(ssh.local, timeout=deadline - time.monotonic(), details=details, where=where,
                             remote=True)
        if not found.answering:
            self.close()
        return found

    def _no_answer(self, target: SSHTarget) -> HostCheck:
        return unreachable("HostUnreachable", _timeout_message(target, self.node), definite=False)

    def close(self) -> None:
        for ssh in (self._ssh, self._login):
            if ssh is not None:
                ssh.stop()
        self._ssh = self._login = None


def _timeout_message(target: SSHTarget, node: str) -> str:
    return _ssh_failure("HostUnreachable", "", target=target, node=node, identity=None)


def check_socket(path: str, *, timeout: float, details: bool, where: str, remote: bool = False) -> HostCheck:
    """Ping the Podman service on a local unix socket (and ask info/images when `details`)."""
    from kctl.runtime.podman import PodmanRuntime

    if not remote and not os.path.exists(path):
        return not_answering("PodmanSocketMissing",
                             f"node {where}: no Podman socket at {path}; start the service"
                             f" (systemctl enable --now podman.socket, or podman system service)")
    deadline = time.monotonic() + timeout
    runtime = PodmanRuntime(f"unix://{path}", timeout=max(0.2, timeout))
    try:
        try:
            runtime.ping(timeout=max(0.2, deadline - time.monotonic()))
        except Exception as error:  # noqa: BLE001 - any failure means "not answering"
            if remote and _timed_out(error):
                return unreachable("HostUnreachable", f"node {where}: no answer through SSH within {timeout:g} s",
                                   definite=False)
            return not_answering("PodmanNotAnswering",
                                 f"node {where}: the Podman service on {path} does not answer"
                                 f" ({_short(error)}); restart it (systemctl restart podman.socket)")
        if not details:
            return HostCheck(reachable=True, answering=True)
        info: HostInfo | None
        images: list[ImageInfo] | None
        try:
            info = runtime.info()
            images = runtime.list_images()
        except Exception:  # noqa: BLE001 - it answered a ping: keep the last capacity this beat
            info, images = None, None
        return HostCheck(reachable=True, answering=True, info=info, images=images)
    finally:
        with contextlib.suppress(Exception):
            runtime.close()


def _timed_out(error: BaseException) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, TimeoutError) or "timed out" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _short(error: BaseException) -> str:
    return _one_line(str(error) or type(error).__name__)[:200]


def check_script(socket_path: str) -> str:
    """The command the check's ssh runs on the host: say whether the Podman socket is there and, if it is,
    keep the session (and its forward) open."""
    remote = shlex.quote(socket_path)
    return f"if test -S {remote}; then echo {_READY_WORD}; exec cat; else echo {_MISSING_WORD}; fi"


def tcp_knock(host: str, port: int, *, deadline: float) -> bool | str:
    """Whether host:port takes a TCP connection (or refuses one: ssh then says so) before the deadline:
    True; else "no-route" when the last try met "No route to host" / "Network is unreachable", else False.

    Short attempts, one after the other, instead of one connect left to TCP's SYN
    retransmission (1 s, then 3 s...): a host back from a cut is seen within about
    KNOCK_ATTEMPT s, and "No route to host" right after a heal is simply tried again.
    """
    last: OSError | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            no_route = isinstance(last, OSError) and last.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH)
            return "no-route" if no_route else False
        try:
            with socket.create_connection((host, port), timeout=min(KNOCK_ATTEMPT, left)):
                return True
        except ConnectionRefusedError:
            return True
        except OSError as error:
            last = error
            time.sleep(min(KNOCK_PAUSE, max(0.0, deadline - time.monotonic())))


__all__ = ["HostCheck", "HostChecker", "HostUnreachable", "NOT_ANSWERING_REASONS", "UNREACHABLE_REASONS", "check_host",
           "check_script", "check_socket", "not_answering", "tcp_knock", "unreachable"]
