"""Fencing ssh:// hosts by the leader's term: a deposed leader's calls fail on the host itself.

With leader election on, only the leading `kctl daemon` runs the agents of ssh:// Nodes
(kctl.agent.supervisor). Its term is the leader Lease's leaseTransitions
(kctl.client.leader.LeaderElector.term): every new holder has a higher one. Before the
agents of term T make a call, `fence_host` makes on each host, in one ssh command run under
an exclusive `flock` of the host's fence folder:

- the folder: `/run/kctl/fence/<key>` for root, else `/run/user/<uid>/kctl/fence/<key>` (or
  `/tmp/kctl-<uid>/fence/<key>`), owned by the login user, mode 0700, where key is 16 hex
  digits of the sha256 of the Podman socket's path: the fence guards one Podman service,
  so hosts sharing a filesystem (a test bed's network namespaces) keep apart;
- refusal: when a link of a higher term than T is there, nothing changes and
  FencedError says "fenced by a newer leader (term N)";
- `term-<T>.sock`, a symlink to the Node's Podman socket (made atomically: a new link
  renamed over it), and every `term-<lower>.sock` removed.

`FencedPodmanRuntime` (made by `fenced_runtime_for_node`, without touching the host) fences
the host at its first call, before any call of the term reaches Podman (a failed fence is
tried again by a later call, FencedError revokes the runtime), then tunnels to `term-<T>.sock`
instead of the socket itself: sshd connects to that path for every new connection, so
once a newer leader removed the link every new connection of the old term fails on the
host. Its HTTP clients keep no connection alive (`Connection: close`): every call, the
mutating ones included, opens a fresh connection through the term's link; a failed call
looks at the host's fence folder (over the tunnel's master) and, when a newer term is
there, the runtime is revoked for good with FencedError. Commands it runs on the host
(routes, nft: kctl.runtime.hostexec) run under a shared flock of the folder and only while
the term's link exists. `revoke()` (the supervisor calls it the moment leadership ends)
makes every later call fail at once. What stays outside the fence: a call already
connected when the link goes (it completes), an event stream opened before (read only),
and the heartbeat's own probe of the host (kctl.runtime.hostprobe: read only).

A refused fence carries the host's term (`FencedError.newer`) and is told to the runtime's
`on_refused(newer)` (set by kctl.agent.supervisor before the agent's first call): a higher term
on a host need not be a newer leader's. Terms start again at 0 when the Lease is deleted, go back
with `kctl restore` of an older backup, and another store's leaders may have driven the host
before; so the supervisor asks the elector whether this daemon still holds the Lease and, when
it does, raises its term past the host's (kctl.client.leader.LeaderElector.raise_term) and
fences again with the new one. A deposed leader no longer holds the Lease: it stays refused.

The remote commands are built only from integers and a socket path that passed
`check_socket_path` (and is shell-quoted besides): no other text of a Node reaches a shell.

Called by the daemon's runtime factory (kctl.daemon.localpodman.make_runtime_factory, given a
term by the supervisor); `remove_local_fence` by test beds whose hosts share this filesystem.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shlex
import threading
import time
from typing import Any, Callable

from kctl.runtime.hostprobe import HostUnreachable
from kctl.runtime.interface import ExecResult, RuntimeError_
from kctl.runtime.podman.connection import ServiceConnection
from kctl.runtime.podman.runtime import PodmanRuntime
from kctl.ssh import SSHTarget

log = logging.getLogger("kctl.runtime.fencing")

#: exit status of the fence command when a newer term holds the host, and of a host command run
#: after the term's link went
EXIT_NEWER_TERM = 3
EXIT_FENCED = 97
#: a socket path kctl puts in a remote command: absolute, plain characters, no `..`
_SAFE_PATH = re.compile(r"/[A-Za-z0-9._+@%=,:/-]*")
#: the least time between two looks at a host's fence folder after failed calls
CHECK_INTERVAL = 2.0


class FencedError(RuntimeError_):
    """A newer leader fenced this host: this daemon's term may no longer drive it.

    `newer` is the host's higher term when the host said it (a refused fence), else None."""

    def __init__(self, message: str, *, newer: int | None = None) -> None:
        super().__init__(message)
        self.newer = newer


def check_socket_path(path: str) -> str:
    """`path` when it is safe in a remote command (absolute, plain characters, no `..`); ValueError otherwise."""
    if not _SAFE_PATH.fullmatch(path or "") or ".." in path.split("/") or len(path) > 200:
        raise ValueError(f"Podman socket path {path!r} is not a plain absolute path (letters, digits, ._+@%=,:/-)")
    return path


def _check_term(term: int) -> int:
    if isinstance(term, bool) or not isinstance(term, int) or term < 0:
        raise ValueError(f"a leader term is a non-negative integer, not {term!r}")
    return term


def fence_key(socket_path: str) -> str:
    """The name of a Podman socket's fence folder: 16 hex digits of the sha256 of its path."""
    return hashlib.sha256(socket_path.encode()).hexdigest()[:16]


def remove_local_fence(socket_path: str) -> None:
    """Remove this machine's fence folders of a Podman socket (for test beds whose hosts share its filesystem)."""
    import os
    import shutil

    uid = os.getuid()
    for base in ("/run/kctl/fence", f"/run/user/{uid}/kctl/fence", f"/tmp/kctl-{uid}/fence"):
        shutil.rmtree(os.path.join(base, fence_key(socket_path)), ignore_errors=True)


def _folder(socket_path: str) -> str:
    """sh setting d to the socket's fence folder of the login user (made when missing; exit 4 when not the user's)."""
    key = fence_key(socket_path)  # hex digits only
    return ('u=$(id -u)\n'
            'if [ "$u" -eq 0 ]; then b=/run/kctl/fence\n'
            'elif [ -d "/run/user/$u" ] && [ -O "/run/user/$u" ]; then b="/run/user/$u/kctl/fence"\n'
            'else b="/tmp/kctl-$u/fence"; fi\n'
            f'd="$b/{key}"\n'
            'mkdir -p "$d" 2>/dev/null\n'
            '[ -d "$d" ] && [ -O "$d" ] || { echo "unusable $d"; exit 4; }\n')

#: the highest term linked in $d (sets high; -1 when none)
_HIGHEST = """high=-1
for f in "$d"/term-*.sock; do
  [ -L "$f" ] || continue
  n=${f##*/term-}; n=${n%.sock}
  case $n in ''|*[!0-9]*) continue;; esac
  [ "$n" -gt "$high" ] && high=$n
done
"""


def fence_script(term: int, socket_path: str) -> str:
    """The sh script that fences a host for `term` (module doc); prints `fenced DIR` or `newer N DIR`."""
    term = _check_term(term)
    target = shlex.quote(check_socket_path(socket_path))
    return ("set -u\numask 077\n" + _folder(socket_path) + 'exec 9<"$d"\n'
            'flock -x -w 10 9 || { echo "busy $d"; exit 5; }\n' + _HIGHEST
            + f'if [ "$high" -gt {term} ]; then echo "newer $high $d"; exit {EXIT_NEWER_TERM}; fi\n'
            f'[ -d {target} ] && {{ echo "directory $d"; exit 7; }}\n'
            f'ln -sfn {target} "$d/.term-{term}.new" && mv -f "$d/.term-{term}.new" "$d/term-{term}.sock"'
            ' || { echo "failed $d"; exit 6; }\n'
            'for f in "$d"/term-*.sock; do\n'
            '  [ -L "$f" ] || continue\n'
            '  n=${f##*/term-}; n=${n%.sock}\n'
            "  case $n in ''|*[!0-9]*) continue;; esac\n"
            f'  [ "$n" -lt {term} ] && rm -f "$f"\n'
            'done\n'
            'echo "fenced $d"\n')


def probe_script(socket_path: str) -> str:
    """The sh script that prints `high N DIR`: the highest term fenced for the socket on a host (-1: none)."""
    check_socket_path(socket_path)
    return "set -u\numask 077\n" + _folder(socket_path) + _HIGHEST + 'echo "high $high $d"\n'


def guarded_argv(argv: list[str], term: int, folder: str) -> list[str]:
    """argv run on the host only while term's link is there, under a shared flock of the fence folder
    (a fence, which takes it exclusively, waits for the command; the command for a fence)."""
    term = _check_term(term)
    where = shlex.quote(check_socket_path(folder))
    script = (f"exec 9<{where} && flock -s -w 10 9 || exit {EXIT_FENCED}\n"
              f"[ -L {where}/term-{term}.sock ] || exit {EXIT_FENCED}\n"
              '"$@"\n')
    return ["sh", "-c", script, "sh", *argv]


def _last_line(result: ExecResult) -> str:
    lines = [line.strip() for line in result.stdout.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _where(base_url: str) -> str:
    target = SSHTarget.parse(base_url)
    return f"{target.host}:{target.port}"


def fenced_by_message(where: str, newer: int, term: int) -> str:
    return f"{where}: fenced by a newer leader (term {newer}); this daemon's term {term} may no longer drive it"


def fence_host(base_url: str, term: int, *, identity: str | None = None, known_hosts: str | None = None,
               timeout: float = 20.0) -> str:
    """Fence the host of an ssh:// Podman URL for `term` (module doc); the path of term's link on it.

    FencedError when a newer term holds the host; RuntimeError_ (one line) when ssh or the script fails."""
    from kctl.runtime.hostexec import run_on_host

    target = SSHTarget.parse(base_url)
    where = _where(base_url)
    try:
        script = fence_script(term, target.path)
    except ValueError as error:
        raise RuntimeError_(f"fencing {where}: {error}") from None
    result = run_on_host(base_url, ["sh", "-c", script], identity=identity, known_hosts=known_hosts,
                         timeout=timeout)
    words = _last_line(result).split()
    if result.exit_code == 0 and len(words) == 2 and words[0] == "fenced":
        folder = words[1]
        try:
            check_socket_path(folder)
        except ValueError as error:
            raise RuntimeError_(f"fencing {where}: the host's fence folder {error}") from None
        return f"{folder}/term-{term}.sock"
    if result.exit_code == EXIT_NEWER_TERM and len(words) == 3 and words[0] == "newer" and words[1].isdigit():
        raise FencedError(fenced_by_message(where, int(words[1]), term), newer=int(words[1]))
    errors = result.stderr.decode(errors="replace").strip().splitlines()
    said = " ".join(words) or (errors[-1].strip() if errors else "no output")
    hint = " (is flock(1), util-linux, installed there?)" if result.exit_code == 127 else ""
    raise RuntimeError_(f"fencing {where} for term {term} failed (exit {result.exit_code}: {said[:200]}){hint}")


def highest_term(base_url: str, *, identity: str | None = None, known_hosts: str | None = None,
                 control_path: str = "", timeout: float = 10.0) -> int | None:
    """The highest term fenced on the host (None: none, or the host did not say)."""
    from kctl.runtime.hostexec import run_on_host

    try:
        script = probe_script(SSHTarget.parse(base_url).path)
    except ValueError as error:
        raise RuntimeError_(f"fencing {_where(base_url)}: {error}") from None
    result = run_on_host(base_url, ["sh", "-c", script], identity=identity, known_hosts=known_hosts,
                         control_path=control_path, timeout=timeout)
    words = _last_line(result).split()
    if result.exit_code == 0 and len(words) == 3 and words[0] == "high" and words[1].lstrip("-").isdigit():
        high = int(words[1])
        return high if high >= 0 else None
    return None


def _tunnel_url(base_url: str, link: str) -> str:
    target = SSHTarget.parse(base_url)
    host = f"[{target.host}]" if ":" in target.host else target.host
    return f"ssh://{target.user}@{host}:{target.port}{link}"


class FencedConnection:
    """ServiceConnection's interface for one term: the first call fences the host (fence_host), then every call
    goes through a ServiceConnection to the term's link that keeps no HTTP connection alive."""

    def __init__(self, base_url: str, *, term: int, identity: str | None, known_hosts: str | None,
                 timeout: float) -> None:
        self.base_url, self.term, self.timeout = base_url, _check_term(term), timeout
        self._identity, self._known_hosts = identity, known_hosts
        self.link = ""  # the term's link on the host, once fenced
        self._inner: ServiceConnection | None = None
        self._lock = threading.Lock()
        self._failure: RuntimeError_ | None = None  # the last failed fence, repeated for CHECK_INTERVAL s
        self._failed_at = 0.0
        self._suspended = ""
        self._revoked: RuntimeError_ | None = None
        #: told the host's term when the host refuses this term's fence (module doc)
        self.on_refused: Callable[[int], None] | None = None

    def ensure(self) -> ServiceConnection:
        """The connection through the term's link, fencing the host first if not yet done (FencedError when a
        newer term holds it: revoked for good; RuntimeError_ when the fence could not be made, retried later)."""
        if self._revoked is not None:
            raise type(self._revoked)(str(self._revoked))
        if self._suspended:
            raise HostUnreachable(self._suspended)
        inner = self._inner
        if inner is not None:
            return inner
        with self._lock:
            if self._inner is None:
                failure = self._failure
                if failure is not None and time.monotonic() - self._failed_at < CHECK_INTERVAL:
                    raise type(failure)(str(failure))
                try:
                    link = fence_host(self.base_url, self.term, identity=self._identity,
                                      known_hosts=self._known_hosts, timeout=min(30.0, self.timeout))
                except FencedError as error:
                    self.revoke(str(error))
                    self._tell_refused(error)
                    raise
                except RuntimeError_ as error:
                    self._failure, self._failed_at = error, time.monotonic()
                    raise
                if self._revoked is not None:  # revoked while the fence ran
                    raise type(self._revoked)(str(self._revoked))
                self.link, self._failure = link, None
                self._inner = ServiceConnection(_tunnel_url(self.base_url, link), identity=self._identity,
                                                known_hosts=self._known_hosts, timeout=self.timeout,
                                                keep_alive=False)
                if self._suspended:
                    self._inner.suspend(self._suspended)
            return self._inner

    def _tell_refused(self, error: FencedError) -> None:
        callback = self.on_refused
        if callback is None or error.newer is None:
            return
        try:
            callback(error.newer)
        except Exception as failure:  # the refusal stands; whoever listens logs its own troubles
            log.warning("%s: telling of the refused fence failed: %s", _where(self.base_url), failure)

    def socket_path(self) -> str:
        return self.ensure().socket_path()

    def client(self) -> Any:
        return self.ensure().client()

    def control_path(self) -> str:
        inner = self._inner
        return inner.control_path() if inner is not None and self._revoked is None else ""

    def suspend(self, reason: str) -> None:
        self._suspended = reason or "the host cannot be reached"
        if self._inner is not None:
            self._inner.suspend(reason)

    def resume(self) -> None:
        self._suspended = ""
        if self._inner is not None:
            self._inner.resume()

    def revoke(self, reason: str, *, error: type[RuntimeError_] = FencedError) -> None:
        self._revoked = error(reason)
        if self._inner is not None:
            self._inner.revoke(reason, error=error)

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()


class FencedPodmanRuntime(PodmanRuntime):
    """A PodmanRuntime of one leader term on an ssh:// host, through the term's link (module doc).

    Made without touching the host: its first call fences the host for the term (FencedConnection), so no
    call of the term reaches Podman before the fence, and a host that cannot be reached does not hold up
    whoever makes the runtime (its heartbeat, which probes the real socket, reports it as ever)."""

    def __init__(self, base_url: str, *, term: int, identity: str | None = None,
                 known_hosts: str | None = None, timeout: float = 30) -> None:
        super().__init__(base_url, identity=identity, known_hosts=known_hosts, timeout=timeout)
        self.term = _check_term(term)
        check_socket_path(SSHTarget.parse(base_url).path)
        # the connection PodmanRuntime made is unused (its tunnel starts lazily, so never): this one is the term's
        self._connection = FencedConnection(base_url, term=term, identity=identity,  # type: ignore[assignment]
                                            known_hosts=known_hosts, timeout=timeout)
        self._checked = 0.0
        self._check_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FencedPodmanRuntime({self.base_url!r}, term={self.term})"

    @property
    def link(self) -> str:
        """The term's link on the host ("" until the first call fenced it)."""
        return self._connection.link  # type: ignore[attr-defined]

    @property
    def on_refused(self) -> Callable[[int], None] | None:
        """Called with the host's term when the host refuses this term's fence (module doc); set it before the
        first call."""
        return self._connection.on_refused  # type: ignore[attr-defined]

    @on_refused.setter
    def on_refused(self, callback: Callable[[int], None] | None) -> None:
        self._connection.on_refused = callback  # type: ignore[attr-defined]

    def fence(self) -> str:
        """Fence the host for this term now if no call did yet (FencedConnection.ensure); the term's link."""
        self._connection.ensure()  # type: ignore[attr-defined]
        return self.link

    def revoke(self, reason: str) -> None:
        """Every later call fails at once with FencedError(reason); the tunnel is ended (kept-alive streams too)."""
        self._connection.revoke(reason, error=FencedError)  # type: ignore[call-arg]

    # -- every call, through the term's link

    def _get(self, path: str, **kwargs: Any) -> Any:
        return self._fenced(super()._get, path, **kwargs)

    def _post(self, path: str, **kwargs: Any) -> Any:
        return self._fenced(super()._post, path, **kwargs)

    def _delete(self, path: str, **kwargs: Any) -> None:
        return self._fenced(super()._delete, path, **kwargs)

    def ping(self, *, timeout: float | None = None) -> None:
        return self._fenced(super().ping, timeout=timeout)

    def run_on_host(self, argv: list[str], *, stdin: bytes | None = None, timeout: float = 30.0) -> ExecResult:
        """argv on the host, only while this term's link is there (guarded_argv)."""
        self._connection.ensure()  # type: ignore[attr-defined]  # fences the host first when not yet done
        link = self.link
        folder = link.rsplit("/", 1)[0]
        result = super().run_on_host(guarded_argv(argv, self.term, folder), stdin=stdin, timeout=timeout)
        if result.exit_code == EXIT_FENCED:
            self._check_fence(force=True)
            raise FencedError(f"{_where(self.base_url)}: this daemon's term {self.term} is no longer fenced in"
                              f" (its link {link} is gone)")
        return result

    def _fenced(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except RuntimeError_ as error:
            if not isinstance(error, FencedError) and "cannot reach the Podman service" in str(error):
                self._check_fence()
            raise
        except Exception as error:
            if getattr(error, "response", None) is None:  # no answer from the service: fenced, or down?
                self._check_fence()
            raise

    def _check_fence(self, *, force: bool = False) -> None:
        """Revoke and raise FencedError when a newer term is fenced on the host (looked at every
        CHECK_INTERVAL s at most, over the tunnel's master; unless forced, not when the tunnel is down)."""
        control = self._connection.control_path()
        with self._check_lock:
            if not force and (not control or time.monotonic() - self._checked < CHECK_INTERVAL):
                return
            self._checked = time.monotonic()
        try:
            high = highest_term(self.base_url, identity=self._identity, known_hosts=self._known_hosts,
                                control_path=control)
        except RuntimeError_:
            return
        if high is not None and high > self.term:
            message = fenced_by_message(_where(self.base_url), high, self.term)
            self.revoke(message)
            raise FencedError(message)


def fenced_runtime_for_node(node: dict[str, Any], *, term: int, timeout: float = 30) -> PodmanRuntime:
    """A FencedPodmanRuntime of `term` for the ssh:// Podman a Node names (the host is fenced at its first call)."""
    from kctl.runtime.connect import ANNOTATION_SSH_IDENTITY, ANNOTATION_SSH_KNOWN_HOSTS, podman_url

    url = podman_url(node)
    if not url.startswith("ssh://"):
        raise RuntimeError_(f"fencing: {url!r} is not an ssh:// Podman URL")
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    try:
        return FencedPodmanRuntime(url, term=term, identity=annotations.get(ANNOTATION_SSH_IDENTITY) or None,
                                   known_hosts=annotations.get(ANNOTATION_SSH_KNOWN_HOSTS) or None,
                                   timeout=timeout)
    except ValueError as error:
        raise RuntimeError_(f"node {(node.get('metadata') or {}).get('name', '?')}: {error}") from None


__all__ = ["CHECK_INTERVAL", "EXIT_FENCED", "EXIT_NEWER_TERM", "FencedConnection", "FencedError",
           "FencedPodmanRuntime",
           "check_socket_path", "fence_host", "fence_key", "fence_script", "fenced_by_message",
           "fenced_runtime_for_node", "guarded_argv", "highest_term", "probe_script", "remove_local_fence"]
