"""`kctl daemon --metric-resolution`: checked, handed to the settings, and from there to every node agent."""

from __future__ import annotations

import threading

import pytest


@pytest.mark.parametrize("args, expected", [
    ([], 15.0), (["--metric-resolution", "2s"], 2.0), (["--metric-resolution", "1m"], 60.0),
    (["--metric-resolution", "0"], 0.0),
], ids=["default", "seconds", "minute", "off"])
def test_metric_resolution_becomes_a_setting(kctl, monkeypatch, args, expected):
    """The flag (metrics-server's name, a duration, default 15s; 0 turns metrics off) reaches DaemonSettings."""
    from kctl.cli import daemon as daemon_cli
    from kctl.daemon import server as daemon_server

    given = []
    monkeypatch.setattr(daemon_server, "run", lambda settings, *, api: given.append(settings))
    monkeypatch.setattr(daemon_cli, "configure_logging", lambda level: None)
    result = kctl("daemon", *args)
    assert result.code == 0, result.err
    assert [s.metric_resolution for s in given] == [expected]


@pytest.mark.parametrize("value", ["-1s", "soon"], ids=["negative", "not-a-duration"])
def test_bad_metric_resolution_is_one_line_and_exit_2(kctl, value):
    """A negative or malformed resolution is refused before anything starts: one line naming the flag, exit 2."""
    result = kctl("daemon", "--metric-resolution", value)
    assert result.code == 2 and "--metric-resolution" in result.err and "Traceback" not in result.err


@pytest.mark.parametrize("resolution, expected", [(2.0, 2.0), (0.0, None)], ids=["on", "off"])
def test_run_hands_the_resolution_to_the_agents(api, monkeypatch, resolution, expected):
    """kctl.daemon.server.run gives the node agents' supervisor metric_resolution (None when 0: no scraper)."""
    from kctl.agent import supervisor
    from kctl.daemon.server import run
    from kctl.daemon.settings import DaemonSettings

    made: list[dict] = []

    class FakeSupervisor:
        agents: dict = {}

        def __init__(self, api, **options) -> None:
            made.append(options)

        def start(self) -> None:
            pass

        def stop(self, timeout: float = 0) -> None:
            pass

    monkeypatch.setattr(supervisor, "NodeAgentSupervisor", FakeSupervisor)
    stop = threading.Event()
    stop.set()
    run(DaemonSettings(agents=False, control_plane=False, metric_resolution=resolution), api=api, stop=stop)
    assert [options["metric_resolution"] for options in made] == [expected]
