"""A rootless Podman host on this machine: a throw-away user with its own Podman service, reached over SSH.

`RootlessHost(folder, ssh_port=PORT).up()` (as root) does what docs/multi-host.md asks of
an administrator who runs Podman rootless, on this one machine, for one test:

    user        kctlrl-<6 hex>, made with useradd (its /etc/subuid and /etc/subgid range
                too; added by hand when useradd does not), password '*' so that sshd
                without PAM lets its key in
    runtime dir /run/user/UID (0700, the user's): XDG_RUNTIME_DIR, where the socket lives
    Podman      `podman system service` run as the user (no systemd here, so no
                `loginctl enable-linger` + podman.socket), on
                /run/user/UID/podman/podman.sock, with kctl's containers.conf as the
                user's ~/.config/containers/containers.conf; the demo image built into
                the user's storage through that socket
    /dev/net/tun made usable by others (0666, as on ordinary hosts) when it is not, for
                slirp4netns and rootlessport
    sshd        on 127.0.0.1:PORT with a host key of its own, letting the user in with
                `identity` (its key in ~/.ssh/authorized_keys)

kctl then adds it as it would a real machine: `kctl node add NAME --ssh USER@127.0.0.1:PORT
--identity KEY --socket SOCKET` and `kctl node trust NAME`. `down()` undoes all of it, also
after a partial `up()`: it stops sshd and the service by PID, runs `podman system reset`
as the user, kills (by PID) every process left running under the user's uid or its
subordinate uids, deletes the user, its home and runtime dir, and restores /dev/net/tun.

Used by tests/integration/agent/test_daemon_rootless.py. Needs root, useradd/userdel,
sshd, podman, uidmap (newuidmap) and slirp4netns (`make system`).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from kctl.runtime.service import containers_conf_text, ping, service_command
from kctl.testing.testbed import (BUILD_DEMO_IMAGE, PODMAN_TIMEOUT, SSHD, START_TIMEOUT, TestBedError, alive, log_tail,
                                  make_key, run_command, sshd_config, stop_pids, unmount_under, wait_for_port)

TUN = "/dev/net/tun"
SUBID_FILES = ("/etc/subuid", "/etc/subgid")
SUBID_COUNT = 65536
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class RootlessHost:
    """One throw-away user running rootless Podman, reachable over SSH on 127.0.0.1:ssh_port."""

    folder: Path                      # root's, 0700: client key, sshd's config, host key and logs
    ssh_port: int
    user: str = field(default_factory=lambda: f"kctlrl-{secrets.token_hex(3)}")
    uid: int = -1
    gid: int = -1
    home: str = ""
    service_pid: int | None = None
    sshd_pid: int | None = None
    _tun_mode: int | None = None      # /dev/net/tun's mode before we changed it
    _made_run_user: bool = False      # /run/user did not exist before

    @property
    def runtime_dir(self) -> str:
        return f"/run/user/{self.uid}"

    @property
    def socket(self) -> str:
        return f"{self.runtime_dir}/podman/podman.sock"

    @property
    def identity(self) -> str:
        return str(self.folder / "id_ed25519")

    @property
    def ssh(self) -> str:
        """`--ssh` of `kctl node add`."""
        return f"{self.user}@127.0.0.1:{self.ssh_port}"

    def podman(self, *args: str, timeout: float = PODMAN_TIMEOUT) -> subprocess.CompletedProcess:
        """`podman ARGS...` run as the user, in its environment (check the result yourself)."""
        return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, **self._as_user())

    # -- up ---------------------------------------------------------------------------------------

    def up(self) -> "RootlessHost":
        """Make the user, its Podman service (with the demo image) and the sshd; down() when a step fails."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            self._make_user()
            self._make_tun_usable()
            self._start_podman()
            run_command([str(BUILD_DEMO_IMAGE), "--url", f"unix://{self.socket}"], timeout=PODMAN_TIMEOUT)
            self._start_sshd()
        except BaseException:
            self.down()
            raise
        return self

    def _make_user(self) -> None:
        run_command(["useradd", "--create-home", "--shell", "/bin/sh", "--password", "*", self.user])
        entry = pwd.getpwnam(self.user)
        self.uid, self.gid, self.home = entry.pw_uid, entry.pw_gid, entry.pw_dir
        if self._subids() is None:
            start = max([end for _, end in _subid_ranges()] + [100000])
            run_command(["usermod", "--add-subuids", f"{start}-{start + SUBID_COUNT - 1}",
                  "--add-subgids", f"{start}-{start + SUBID_COUNT - 1}", self.user])
        self._made_run_user = not os.path.exists("/run/user")
        os.makedirs(self.runtime_dir, mode=0o700)
        os.chown(self.runtime_dir, self.uid, self.gid)
        self._write_own(".config/containers/containers.conf", containers_conf_text(), 0o644)
        make_key(self.identity, comment=self.user)
        self._write_own(".ssh/authorized_keys", Path(f"{self.identity}.pub").read_text(), 0o600)

    def _write_own(self, relative: str, text: str, mode: int) -> None:
        """Write a file under the user's home, it and its new folders owned by the user."""
        path = Path(self.home, relative)
        folder = Path(self.home)
        for part in path.parent.relative_to(self.home).parts:
            folder = folder / part
            if not folder.exists():
                folder.mkdir(mode=0o700)
                os.chown(folder, self.uid, self.gid)
        path.write_text(text)
        os.chown(path, self.uid, self.gid)
        os.chmod(path, mode)

    def _make_tun_usable(self) -> None:
        """slirp4netns opens /dev/net/tun as the user: 0666 as on ordinary hosts (some containers have 0600)."""
        mode = os.stat(TUN).st_mode & 0o777
        if mode & 0o066 != 0o066:
            self._tun_mode = mode
            os.chmod(TUN, 0o666)

    def _start_podman(self) -> None:
        folder = os.path.dirname(self.socket)
        os.makedirs(folder, mode=0o700)
        os.chown(folder, self.uid, self.gid)
        with open(self.folder / "podman.log", "ab") as log:
            process = subprocess.Popen(service_command(self.socket), stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True, **self._as_user(cwd=folder))
        self.service_pid = process.pid
        deadline = time.monotonic() + START_TIMEOUT
        while not ping(self.socket):
            if process.poll() is not None or time.monotonic() > deadline:
                why = "exited" if process.poll() is not None else f"did not answer within {START_TIMEOUT:g} s"
                tail = log_tail(self.folder / "podman.log")
                raise TestBedError(f"rootless podman service of {self.user} {why}: {tail}")
            time.sleep(0.1)

    def _start_sshd(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
        make_key(self.folder / "host_key", comment="rootless-host")
        config = self.folder / "sshd_config"
        config.write_text(sshd_config(listen="127.0.0.1", port=self.ssh_port, host_key=str(self.folder / "host_key"),
                                      pid_file=str(self.folder / "sshd.pid"),
                                      authorized_keys=f"{self.home}/.ssh/authorized_keys"))
        with open(self.folder / "sshd.log", "ab") as log:
            process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.sshd_pid = process.pid
        wait_for_port("127.0.0.1", self.ssh_port, pid=process.pid, log=str(self.folder / "sshd.log"))

    def _as_user(self, *, cwd: str | None = None) -> dict:
        """Popen arguments that run a command as the user, in a login-like environment of its own."""
        env = {"HOME": self.home, "USER": self.user, "LOGNAME": self.user, "PATH": PATH, "LANG": "C.UTF-8",
               "XDG_RUNTIME_DIR": self.runtime_dir}
        return {"user": self.uid, "group": self.gid, "extra_groups": [], "env": env, "cwd": cwd or self.home}

    def _subids(self) -> tuple[int, int] | None:
        """The user's subordinate uid range (start, end), None when it has none."""
        try:
            lines = Path(SUBID_FILES[0]).read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            name, _, rest = line.partition(":")
            if name in (self.user, str(self.uid)) and rest.count(":") == 1:
                start, count = (int(part) for part in rest.split(":"))
                return start, start + count
        return None

    # -- down -------------------------------------------------------------------------------------

    def down(self) -> None:
        """Undo up(), whatever part of it ran: processes, containers, storage, the user, /dev/net/tun."""
        stop_pids([pid for pid in (self.sshd_pid, self.service_pid) if pid])
        self.sshd_pid = self.service_pid = None
        if self.uid >= 0:
            if self.home and os.path.isdir(self.home):
                with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                    self.podman("system", "reset", "--force")
            self._kill_user_processes()
            for folder in (self.home, self.runtime_dir):
                if folder:
                    unmount_under(folder)
        if _exists(self.user):
            run_command(["userdel", "--remove", self.user], check=False)
        for path in SUBID_FILES:  # userdel drops the user's ranges; older shadow-utils do not
            _drop_lines(path, f"{self.user}:")
        if self.uid >= 0:
            shutil.rmtree(self.runtime_dir, ignore_errors=True)
            if self.home:
                shutil.rmtree(self.home, ignore_errors=True)
        if self._made_run_user:
            with contextlib.suppress(OSError):
                os.rmdir("/run/user")
        if self._tun_mode is not None:
            os.chmod(TUN, self._tun_mode)
            self._tun_mode = None

    def _kill_user_processes(self) -> None:
        """SIGKILL, by PID, what still runs as the user or one of its subordinate uids (conmon,
        slirp4netns, rootlessport, the pause process, containers), until nothing does."""
        subids = self._subids()

        def owned(uid: int) -> bool:
            return uid == self.uid or (subids is not None and subids[0] <= uid < subids[1])

        for _ in range(50):
            pids = [pid for pid, uid in _process_uids() if owned(uid) and alive(pid)]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        raise TestBedError(f"processes of {self.user} survive SIGKILL: {pids}")


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True


def _subid_ranges() -> list[tuple[int, int]]:
    """(start, end) of every range in /etc/subuid and /etc/subgid."""
    ranges = []
    for path in SUBID_FILES:
        with contextlib.suppress(OSError):
            for line in Path(path).read_text().splitlines():
                parts = line.split(":")
                if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                    ranges.append((int(parts[1]), int(parts[1]) + int(parts[2])))
    return ranges


def _drop_lines(path: str, prefix: str) -> None:
    with contextlib.suppress(OSError):
        lines = Path(path).read_text().splitlines(keepends=True)
        kept = [line for line in lines if not line.startswith(prefix)]
        if kept != lines:
            Path(path).write_text("".join(kept))


def _process_uids() -> list[tuple[int, int]]:
    """(pid, uid) of every process (the owner of /proc/PID: its effective uid)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                found.append((int(entry.name), entry.stat().st_uid))
    return found
