"""kctl.testing.processes: spawn to a log, wait for a port, stop by PID (SIGKILL for one that ignores SIGTERM)."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from kctl.testing.processes import alive, log_tail, spawn, stop_pids, wait_ended, wait_listening

IGNORES_TERM = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
                "time.sleep(60)")


@pytest.fixture
def started():
    """Processes a test spawns, SIGKILLed and reaped afterwards whatever happened."""
    made = []
    yield made
    stop_pids([p.pid for p in made], grace=0.0, kill_wait=10.0)
    for process in made:
        process.wait(timeout=10)


def test_spawn_appends_output_to_the_log_in_a_session_of_its_own(tmp_path, started):
    log = tmp_path / "out.log"
    log.write_text("before\n")
    process = spawn([sys.executable, "-c", "import os; print(os.getsid(0) == os.getpid())"], log=log, cwd=tmp_path)
    started.append(process)
    assert process.wait(timeout=30) == 0
    assert log.read_text() == "before\nTrue\n"
    assert log_tail(log) == "True" and log_tail(log, lines=2) == "before | True"
    assert log_tail(tmp_path / "none.log") == "(no log)"


def test_stop_pids_kills_a_process_that_ignores_sigterm_and_reaps_it(tmp_path, started):
    log = tmp_path / "p.log"
    process = spawn([sys.executable, "-c", IGNORES_TERM], log=log)
    started.append(process)
    assert wait_ended([0], 0) and not alive(0)
    while log_tail(log) != "up":  # its SIGTERM handler is set
        assert process.poll() is None
        time.sleep(0.01)
    assert alive(process.pid)
    assert stop_pids([process.pid], grace=0.2, kill_wait=10.0)
    assert not alive(process.pid)


def test_wait_listening_says_listening_exited_or_timeout(tmp_path, started):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        sleeper = spawn([sys.executable, "-c", "import time; time.sleep(60)"], log=tmp_path / "s.log")
        started.append(sleeper)
        assert wait_listening("127.0.0.1", port, pid=sleeper.pid, timeout=10) == ""
    assert wait_listening("127.0.0.1", port, pid=sleeper.pid, timeout=0.2) == "timeout"
    quitter = spawn([sys.executable, "-c", "pass"], log=tmp_path / "q.log")
    started.append(quitter)
    quitter.wait(timeout=30)
    assert wait_listening("127.0.0.1", port, pid=quitter.pid, timeout=10) == "exited"
