"""SSH as kctl uses it: one way to build `ssh` command lines, host keys always checked.

Everything kctl does over SSH (the Podman tunnel `SSHTunnel`, used by kctl.runtime.podman, the
heartbeat's own `SSHSession`, used by kctl.runtime.hostprobe, the control plane reached by
`--server ssh://...`, images copied between hosts) runs the system
`ssh` client with these options: batch mode (no prompts), a connect timeout,
keep-alives, the identity given, and host keys checked against a known_hosts file
(`StrictHostKeyChecking=yes`: an unknown or changed key is refused, never accepted).
A failed ssh is named by its own words: `ssh_verdict` (its last word), `classify_ssh_failure`
(why: one of SSH_FAILURE_REASONS) and `ssh_failure_message` (one line with the fix).

kctl keeps its own known_hosts file next to the store (`known_hosts_for_store`);
`kctl node trust` records keys there.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import selectors
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import IO


@dataclass(frozen=True)
class SSHTarget:
    """Where an ssh:// URL points: ssh://user@host:port/path."""

    user: str
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str) -> "SSHTarget":
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "ssh" or not parts.hostname:
            raise ValueError(f"not an ssh://user@host[:port]/path URL: {url!r}")
        return cls(user=parts.username or "root", host=parts.hostname, port=parts.port or 22,
                   path=parts.path)

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}"


def ssh_options(*, identity: str | None = None, known_hosts: str | None = None,
                connect_timeout: float = 10, port: int | None = None) -> list[str]:
    """The options kctl passes to every `ssh`: no prompts, host keys checked, keep-alives."""
    options = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
               "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
               "-o", f"ConnectTimeout={max(1, int(connect_timeout))}"]
    if identity:
        options += ["-i", identity, "-o", "IdentitiesOnly=yes"]
    if known_hosts:
        options += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null"]
    if port is not None:
        options += ["-p", str(port)]
    return options


def forward_command(target: SSHTarget, local_socket: str, *, identity: str | None, known_hosts: str | None,
                    connect_timeout: float, remote_command: str | None = None, gssapi: bool = True) -> list[str]:
    """argv of an ssh forwarding local_socket to the socket target.path on the host, with kctl's options.

    No remote_command: `-N`, a forward only (SSHTunnel). Else the host runs remote_command (SSHSession).
    gssapi=False: GSSAPI (Kerberos) logins are not tried, for a login that must be quick.
    """
    options = ssh_options(identity=identity, known_hosts=known_hosts, connect_timeout=connect_timeout,
                          port=target.port)
    return ["ssh", *(["-N"] if remote_command is None else []), "-T",
            "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
            *([] if gssapi else ["-o", "GSSAPIAuthentication=no"]), *options,
            "-L", f"{local_socket}:{target.path}", target.destination,
            *([] if remote_command is None else [remote_command])]


class SSHError(Exception):
    """ssh could not be started or gave up (the message ends with ssh's own last word)."""


# -- a forwarded socket kept open -------------------------------------------------------------

class SSHTunnel:
    """`ssh -N -L local.sock:remote.sock` kept alive; host keys are checked, never skipped.

    Used for a remote host's Podman service (kctl.runtime.podman.connection): podman-py's own
    SSH transport passes `StrictHostKeyChecking no` and starts one ssh per connection; this
    tunnel is one ssh process per runtime, restarted when it dies. `address.path` is the
    remote socket; `ensure()` returns the local one (in a private folder of its own).
    The tunnel is also the connection's SSH master (`ControlMaster`): commands run on the
    host (kctl.runtime.hostexec: routes, nft) go over it through `control_path`, without a
    login of their own (about 0.3 s each otherwise).
    """

    def __init__(self, address: SSHTarget, *, identity: str | None, known_hosts: str | None,
                 connect_timeout: float) -> None:
        self.address = address
        self._identity = identity
        self._known_hosts = known_hosts
        self._connect_timeout = connect_timeout
        self._folder = ""  # made at the first start, kept across restarts
        self._process: subprocess.Popen[bytes] | None = None
        self._starting: subprocess.Popen[bytes] | None = None  # an ssh being started (reset() ends it)
        self._resets = 0  # bumped by reset(): a start under way gives up
        self._lock = threading.Lock()

    @property
    def local_socket(self) -> str:
        """The forwarded socket on this machine."""
        return os.path.join(self._folder, "podman.sock")

    @property
    def control_path(self) -> str:
        """The master's control socket while the tunnel runs; "" otherwise (ssh then logs in anew)."""
        process = self._process
        if not self._folder or process is None or process.poll() is not None:
            return ""
        return os.path.join(self._folder, "control")

    def command(self) -> list[str]:
        """argv of the forwarding ssh (the connection's master, see the class doc)."""
        argv = forward_command(self.address, self.local_socket, identity=self._identity,
                               known_hosts=self._known_hosts, connect_timeout=self._connect_timeout)
        control = ["-o", "ControlMaster=yes", "-o", f"ControlPath={os.path.join(self._folder, 'control')}"]
        return [argv[0], *control, *argv[1:]]

    def ensure(self) -> str:
        """The local socket path, (re)starting ssh when it is not running; SSHError when ssh fails."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
        return self.local_socket

    def _start(self) -> None:
        if not self._folder:
            self._folder = tempfile.mkdtemp(prefix="kctl-ssh-")
        for stale in (self.local_socket, os.path.join(self._folder, "control")):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)
        log = tempfile.TemporaryFile()
        resets = self._resets
        process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=log)
        self._starting = process
        try:
            deadline = time.monotonic() + self._connect_timeout + 5
            while not os.path.exists(self.local_socket):
                if process.poll() is not None or time.monotonic() > deadline or self._resets != resets:
                    stop_process(process)
                    log.seek(0)
                    reason = ssh_verdict(log.read().decode(errors="replace")) or "no socket forwarded"
                    raise SSHError(f"ssh to {self.address.host}:{self.address.port} failed: {reason}")
                time.sleep(0.05)
        finally:
            self._starting = None
        self._process = process

    def reset(self) -> None:
        """End the ssh (also one still starting) without waiting for the lock: the calls over it fail
        now, and the next call starts a fresh ssh (not one stuck in TCP retransmission)."""
        self._resets += 1
        for process in (self._starting, self._process):
            if process is not None and process.poll() is None:
                with contextlib.suppress(OSError):
                    process.kill()

    def close(self) -> None:
        """Stop the ssh and remove the local socket's folder."""
        with self._lock:
            if self._process is not None:
                stop_process(self._process)
                self._process = None
            if self._folder:
                shutil.rmtree(self._folder, ignore_errors=True)
                self._folder = ""


# -- a session with a forward, run for what it says -----------------------------------------------

class SSHSession:
    """One ssh running `remote_command` on a host, with a private local socket forwarded to target.path.

    Used by kctl.runtime.hostprobe (the heartbeat's own connection to a host, apart from the
    pod work's SSHTunnel): the remote command says on its first line what it found and keeps
    the session, and so the forward, open. The login does not try GSSAPI. The caller reads that
    line (read_line, bounded by a deadline), asks alive(), and stop()s the session, which
    returns what ssh wrote on stderr. `local` is the forwarded socket (in a folder of its own,
    removed by stop()). Used from one thread.
    """

    def __init__(self, process: subprocess.Popen[bytes], folder: str, errors: IO[bytes]) -> None:
        self.process, self.folder, self.errors = process, folder, errors
        self.local = os.path.join(folder, "podman.sock")
        self.started = time.monotonic()
        self.ended = False  # its output ended: it exited, or is exiting
        self._buffer = b""

    @classmethod
    def start(cls, target: SSHTarget, remote_command: str, *, identity: str | None, known_hosts: str | None,
              connect_timeout: float, folder_prefix: str = "kctl-ssh-") -> "SSHSession":
        """Run the ssh (in a session of its own, not waiting for its login); SSHError when it cannot be run."""
        folder = tempfile.mkdtemp(prefix=folder_prefix)
        errors = tempfile.TemporaryFile()
        argv = forward_command(target, os.path.join(folder, "podman.sock"), identity=identity,
                               known_hosts=known_hosts, connect_timeout=connect_timeout,
                               remote_command=remote_command, gssapi=False)
        try:
            process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                       start_new_session=True)
        except OSError as error:
            shutil.rmtree(folder, ignore_errors=True)
            errors.close()
            raise SSHError(str(error)) from error
        return cls(process, folder, errors)

    def alive(self) -> bool:
        """Whether the ssh still runs."""
        return self.process.poll() is None

    def read_line(self, deadline: float) -> str | None:
        """The first line ssh prints; None when it has not come by the deadline (or ssh ended)."""
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    return None
                chunk = os.read(self.process.stdout.fileno(), 256)
                if not chunk:
                    self.ended = True
                    return None
                self._buffer += chunk
        return self._buffer.split(b"\n", 1)[0].decode(errors="replace").strip()

    def stop(self) -> str:
        """End the ssh (the remote command ends with the session); what it wrote on stderr."""
        stop_process(self.process, grace=2)
        try:
            self.errors.seek(0)
            return self.errors.read().decode(errors="replace")
        finally:
            self.errors.close()
            shutil.rmtree(self.folder, ignore_errors=True)


# -- when ssh fails ---------------------------------------------------------------------------

#: why a host could not be reached over SSH, as classify_ssh_failure names it
SSH_FAILURE_REASONS = ("HostUnreachable", "ConnectionRefused", "AuthenticationRefused", "HostKeyUnknown",
                       "HostKeyChanged", "SSHFailed")


def ssh_verdict(stderr: str) -> str:
    """ssh's last word ("Host key verification failed."), not its 1 KB banner of @ lines and advice."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not set(line.strip()) <= {"@"}]
    return lines[-1][:300] if lines else ""


def classify_ssh_failure(stderr: str) -> str:
    """The reason (one of SSH_FAILURE_REASONS) an ssh that failed with this stderr names."""
    text = stderr.lower()
    if "remote host identification has changed" in text or "host key for" in text and "has changed" in text:
        return "HostKeyChanged"
    if "host key verification failed" in text or "host key is known" in text:
        return "HostKeyUnknown"
    if "permission denied" in text or "too many authentication failures" in text:
        return "AuthenticationRefused"
    if "connection refused" in text:
        return "ConnectionRefused"
    if any(word in text for word in ("timed out", "no route to host", "network is unreachable",
                                     "could not resolve", "name or service not known", "host is down")):
        return "HostUnreachable"
    return "SSHFailed"


def ssh_failure_message(reason: str, stderr: str, *, target: SSHTarget, node: str,
                        identity: str | None = None) -> str:
    """What went wrong reaching target (a reason of classify_ssh_failure), ssh's own last word, and
    what fixes it, in one line; `node` is the name `kctl node trust` is told to take."""
    where = f"{target.host}:{target.port}"
    said = ssh_verdict(stderr)
    fixes = {
        "HostKeyChanged": (f"the SSH host key of {where} has CHANGED since it was trusted; kctl refuses to connect"
                           f" ({said}). If the host was re-installed, check its new key and run:"
                           f" kctl node trust {node}"),
        "HostKeyUnknown": (f"the SSH host key of {where} is not known ({said}); check it and run:"
                           f" kctl node trust {node}"),
        "AuthenticationRefused": (f"{where} refused the SSH login of {target.user}"
                                  f"{f' with key {identity}' if identity else ''} ({said}); put its public key in"
                                  f" ~{target.user}/.ssh/authorized_keys on the host"),
        "ConnectionRefused": f"{where} refused the connection ({said}); is sshd running on the host?",
        # ssh's words vary from try to try here ("timed out", "No route to host"): left out, so
        # the message stays the same while the cause lasts
        "HostUnreachable": f"{where} cannot be reached: the host is down, cut off or behind a firewall",
    }
    return fixes.get(reason, f"ssh to {where} failed ({said or 'no reason given'})")


def stop_process(process: subprocess.Popen[bytes], *, grace: float = 5) -> None:
    """SIGTERM, then SIGKILL after `grace` s; reaped, and the pipes kctl holds to it closed."""
    if process.poll() is None:
        with contextlib.suppress(OSError):
            process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()


def known_hosts_for_store(store_path: str | os.PathLike) -> str:
    """The known_hosts file kctl keeps for a store: beside it, named known_hosts."""
    return os.path.join(os.path.dirname(os.path.abspath(os.fspath(store_path))), "known_hosts")


# -- host keys --------------------------------------------------------------------------------

@dataclass(frozen=True)
class HostKey:
    """One public host key: its type (ssh-ed25519...) and base64 blob."""

    type: str
    blob: str

    @property
    def fingerprint(self) -> str:
        """OpenSSH's SHA256 fingerprint, as `ssh-keygen -l` prints it."""
        digest = hashlib.sha256(base64.b64decode(self.blob)).digest()
        return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def host_pattern(host: str, port: int) -> str:
    """How known_hosts names a host: `host` on port 22, `[host]:port` otherwise."""
    return host if port == 22 else f"[{host}]:{port}"


def scan_host_keys(host: str, port: int = 22, *, timeout: float = 5) -> list[HostKey]:
    """The host keys a host's sshd offers (ssh-keyscan); [] when it does not answer."""
    try:
        out = subprocess.run(["ssh-keyscan", "-T", str(max(1, int(timeout))), "-p", str(port), host],
                             capture_output=True, text=True, timeout=timeout + 5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    keys = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3 and not line.startswith("#"):
            keys.append(HostKey(fields[1], fields[2]))
    return sorted(set(keys), key=lambda k: k.type)


def recorded_host_keys(known_hosts: str, host: str, port: int = 22) -> list[HostKey]:
    """The keys a known_hosts file records for host:port (plain entries, as kctl writes them)."""
    pattern = host_pattern(host, port)
    try:
        with open(known_hosts, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    keys = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and not line.startswith(("#", "|")) and pattern in fields[0].split(","):
            keys.append(HostKey(fields[1], fields[2]))
    return keys


def record_host_keys(known_hosts: str, host: str, port: int, keys: list[HostKey]) -> None:
    """Make `keys` the only keys known_hosts records for host:port (file 0600, folder 0700)."""
    pattern = host_pattern(host, port)
    folder = os.path.dirname(os.path.abspath(known_hosts))
    os.makedirs(folder, mode=0o700, exist_ok=True)
    try:
        with open(known_hosts, encoding="utf-8") as f:
            kept = [line for line in f.read().splitlines()
                    if not (line.split() and pattern in line.split()[0].split(","))]
    except FileNotFoundError:
        kept = []
    lines = kept + [f"{pattern} {k.type} {k.blob}" for k in keys]
    tmp = f"{known_hosts}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    os.replace(tmp, known_hosts)


def trust_state(offered: list[HostKey], recorded: list[HostKey]) -> str:
    """"trusted" (an offered key is recorded), "changed" (others are recorded), or "unknown"."""
    if not recorded:
        return "unknown"
    return "trusted" if set(offered) & set(recorded) else "changed"


__all__ = ["SSH_FAILURE_REASONS", "HostKey", "SSHError", "SSHSession", "SSHTarget", "SSHTunnel", "classify_ssh_failure",
           "forward_command", "host_pattern", "known_hosts_for_store", "record_host_keys", "recorded_host_keys",
           "scan_host_keys", "ssh_failure_message", "ssh_options", "ssh_verdict", "stop_process", "trust_state"]
