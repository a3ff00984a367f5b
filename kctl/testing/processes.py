"""Processes that test helpers start and end: spawn to a log, wait for a port, stop by PID, read a log's tail.

Shared by kctl.testing.testbed (sshd and Podman services in network namespaces),
kctl.testing.etcdcluster (etcd members) and kctl.testing.hadaemons (`kctl daemon`s on control
hosts). Processes are tracked by PID and started in sessions of their own, so they outlive
the Python process that started them until it (or `down`) ends them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

#: between checks while waiting for a port or for processes to end
POLL = 0.05


def spawn(argv: list[str], *, log: str | os.PathLike, cwd: str | os.PathLike | None = None,
          env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start argv in a session of its own, stdin closed, stdout and stderr appended to log (OSError if it cannot)."""
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env=env, start_new_session=True)


def alive(pid: int | None) -> bool:
    """Whether process pid exists and is not a zombie."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def reap(pid: int) -> None:
    """Collect our child's exit status, so a process we started and ended leaves no zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def gone(pid: int) -> bool:
    """Whether pid has ended (reaped first if it is our child)."""
    reap(pid)
    return not alive(pid)


def wait_listening(host: str, port: int, *, pid: int, timeout: float) -> str:
    """Until something accepts on host:port: "" then; "exited" if process pid ends first, "timeout" after timeout s."""
    deadline = time.monotonic() + timeout
    while True:
        if not alive(pid):
            return "exited"
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            return ""
        if time.monotonic() > deadline:
            return "timeout"
        time.sleep(POLL)


def wait_ended(pids: list[int], timeout: float, *, ended: Callable[[int], bool] = gone) -> bool:
    """Until ended(pid) for every pid (default: reaped and not running); False after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if all(ended(pid) for pid in pids):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL)


def stop_pids(pids: list[int], *, grace: float, kill_wait: float | None = None,
              ended: Callable[[int], bool] = gone) -> bool:
    """SIGTERM the processes, SIGKILL those still running after grace seconds, then wait kill_wait seconds
    (default: grace) more; whether all ended (as wait_ended)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace if kill_wait is None else kill_wait)):
        for pid in pids:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        if wait_ended(pids, wait, ended=ended):
            return True
    return False


def log_tail(log: str | os.PathLike, *, lines: int = 1) -> str:
    """The last lines of a log, joined with " | " (for an error message)."""
    try:
        text = Path(log).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) if text else "(empty log)"
