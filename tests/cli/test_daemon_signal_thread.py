"""`kctl daemon` stops on a SIGTERM whichever of its threads the kernel hands the signal to.

Python runs signal handlers in the main thread only; a signal the kernel delivers to another
thread just sets a flag that the main thread sees when it next runs Python code. A main thread
asleep in an untimed wait never does: the daemon ignored that SIGTERM and ran on (seen under
load, where `kill` lands on a busy thread). tgkill(2) aims the signal at a non-main thread.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: tgkill's system call number per machine (asm/unistd.h)
SYS_TGKILL = {"x86_64": 234, "aarch64": 131}
#: generous for a loaded 2-core machine; a daemon with nothing to do stops in well under a second
STOP_BOUND = 30.0


def _tgkill(pid: int, tid: int, sig: int) -> None:
    number = SYS_TGKILL.get(platform.machine())
    if number is None:
        pytest.fail(f"no tgkill system call number known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def _wait_for(check, *, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_delivered_to_another_thread_stops_the_daemon(tmp_path: Path, sig: int) -> None:
    """SIGTERM/SIGINT sent to one of the daemon's worker threads (not the main one): it stops, exit 0."""
    store, log = tmp_path / "kctl.db", tmp_path / "daemon.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kctl", "daemon", "--store", str(store), "--no-agents",
                                 "--cluster-dns-port", "0", "--log-level", "info"], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=out, env={**os.environ, "KCTL_STORE": str(store)})
    try:
        _wait_for(lambda: "daemon running" in log.read_text(errors="replace") or proc.poll() is not None,
                  what="the daemon running")
        assert proc.poll() is None, log.read_text(errors="replace")
        time.sleep(0.5)  # the main thread is asleep in its wait now
        others = [int(tid) for tid in os.listdir(f"/proc/{proc.pid}/task") if int(tid) != proc.pid]
        assert others, "the daemon runs worker threads"
        _tgkill(proc.pid, others[-1], sig)
        try:
            code = proc.wait(timeout=STOP_BOUND)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the daemon ignored {signal.Signals(sig).name} for {STOP_BOUND:g} s:\n"
                        + log.read_text(errors="replace")[-2000:])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    text = log.read_text(errors="replace")
    assert code == 0, text
    assert f"received {signal.Signals(sig).name}" in text and "daemon stopped" in text
    assert "Traceback" not in text
