"""The supervisor every admission hook runs under: no hook process outlives its hook.

kctl.admission.hooks starts this file as its own small Python process (by path, with
`python -I -S`, so it imports nothing of kctl and no site packages), in a new session:

    python -I -S hook_supervisor.py STATUS_FD PARENT_PID -- /path/to/hook ARG...

It makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every orphaned
descendant of the hook -- a daemonised grandchild that called setsid(), a double fork --
is re-parented to it rather than to init, then spawns the hook (no shell; stdin, stdout and
stderr are the ones kctl gave the supervisor, which then lets go of its own copies). When the
hook exits, or when kctl asks it to stop (SIGTERM on a timeout), or when kctl itself dies
(PR_SET_PDEATHSIG), it SIGKILLs every descendant it can find (walking /proc for processes
whose parent chain leads to it) and reaps them, until it has no children left. Then it
writes one line on STATUS_FD -- `exit N`, `signal N`, `stopped`, or `spawn-error ERRNO` when
the hook could not be started -- and exits.

A cgroup per hook would also catch processes that escape by other means (a descendant that
makes itself a subreaper and is then killed leaves its orphans to us anyway), but needs a
writable cgroup hierarchy, which kctl cannot count on (hybrid v1/v2 hosts, rootless runs);
the subreaper works for any user on Linux >= 3.4.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: how long the supervisor keeps killing and reaping before it gives up (processes in D state).
KILL_DEADLINE_SECONDS = 10.0
_RESET_SIGNALS = (signal.SIGPIPE, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXFSZ)


class _Stop(Exception):
    """kctl asked the supervisor to stop the hook (SIGTERM), or kctl died."""


def _on_stop(signum: int, frame: object) -> None:
    raise _Stop


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def descendants(root: int) -> list[int]:
    """Pids of every live process whose parent chain leads to root (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:  # gone meanwhile
            continue
        if len(fields) > 1 and fields[0] != b"Z":
            parents[int(entry)] = int(fields[1])
    found: list[int] = []
    for pid in parents:
        ancestor, hops = parents.get(pid), 0
        while ancestor is not None and ancestor > 1 and hops < 4096:
            if ancestor == root:
                found.append(pid)
                break
            ancestor, hops = parents.get(ancestor), hops + 1
    return found


def kill_descendants(root: int, *, deadline: float = KILL_DEADLINE_SECONDS) -> None:
    """SIGKILL and reap every descendant of root (this process), until none is left."""
    until = time.monotonic() + deadline
    while True:
        for pid in descendants(root):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reaped_all = False
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                reaped_all = True
                break
            if pid == 0:
                break
        if reaped_all and not descendants(root):
            return
        if time.monotonic() > until:
            return
        time.sleep(0.005)


def _report(status_fd: int, line: str) -> None:
    try:
        os.write(status_fd, line.encode() + b"\n")
    except OSError:
        pass


def main(argv: list[str]) -> int:
    """Run the hook in argv (after `--`) and report how it ended on the status fd."""
    status_fd, parent = int(argv[1]), int(argv[2])
    command = argv[argv.index("--") + 1:]
    me = os.getpid()
    os.set_inheritable(status_fd, False)  # the hook and its children never see it
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError as error:
        _report(status_fd, f"spawn-error {error.errno or errno.EINVAL}")
        return 127
    if os.getppid() != parent:  # kctl died before PDEATHSIG was armed
        _report(status_fd, "stopped")
        return 1
    outcome = "stopped"
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _on_stop)  # (before this, their default action ends us: no child yet)
    try:
        try:
            child = os.posix_spawn(command[0], command, dict(os.environ),
                                   setsigdef=_RESET_SIGNALS, setsigmask=())
        except OSError as error:
            outcome = f"spawn-error {error.errno or errno.ENOEXEC}"
            raise _Stop from None
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # only the hook (and its children) hold kctl's pipes now
            os.dup2(devnull, fd)
        os.close(devnull)
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == child:
                if os.WIFSIGNALED(status):
                    outcome = f"signal {os.WTERMSIG(status)}"
                else:
                    outcome = f"exit {os.waitstatus_to_exitcode(status)}"
                break
    except (_Stop, ChildProcessError):
        pass
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)  # finish the clean-up whatever happens
    kill_descendants(me)
    _report(status_fd, outcome)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
