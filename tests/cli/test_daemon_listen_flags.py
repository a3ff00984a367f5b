"""`kctl daemon --listen ADDR:PORT --tls-san NAME`: the HTTPS API's flags, checked and handed to the settings."""

from __future__ import annotations

import pytest


@pytest.fixture
def settings_of(monkeypatch):
    """The DaemonSettings `kctl daemon` would run with (run is replaced; logging left alone)."""
    from kctl.cli import daemon as daemon_cli
    from kctl.daemon import server as daemon_server

    given = []
    monkeypatch.setattr(daemon_server, "run", lambda settings, *, api: given.append(settings))
    monkeypatch.setattr(daemon_cli, "configure_logging", lambda level: None)
    return given


@pytest.mark.parametrize("args, message", [
    (["--listen", "6443"], "--listen '6443' is not ADDR:PORT"),
    (["--listen", "127.0.0.1:http"], "--listen '127.0.0.1:http' is not ADDR:PORT"),
    (["--listen", "127.0.0.1:70000"], "is not ADDR:PORT"),
    (["--tls-san", "api.example.com"], "--tls-san needs --listen"),
], ids=["no-host", "port-not-a-number", "port-too-big", "san-without-listen"])
def test_bad_listen_flags_are_one_line_and_exit_2(kctl, args, message):
    """A bad --listen or a lone --tls-san is refused before anything starts: one line, exit 2."""
    result = kctl("daemon", *args)
    assert result.code == 2
    assert message in result.err, result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize("listen, expected", [
    ("127.0.0.1:6443", ("127.0.0.1", 6443)), (":6443", ("0.0.0.0", 6443)), ("[::1]:8443", ("::1", 8443))],
    ids=["ipv4", "every-address", "ipv6"])
def test_listen_becomes_settings(kctl, settings_of, listen, expected):
    """--listen and --tls-san reach DaemonSettings; without them nothing is served."""
    result = kctl("daemon", "--listen", listen, "--tls-san", "api.example.com", "--tls-san", "192.0.2.7")
    assert result.code == 0, result.err
    assert (settings_of[0].listen, settings_of[0].tls_sans) == (expected, ("api.example.com", "192.0.2.7"))


def test_no_listen_serves_nothing(kctl, settings_of):
    """Without --listen the HTTPS API is off."""
    assert kctl("daemon").code == 0
    assert (settings_of[0].listen, settings_of[0].tls_sans) == (None, ())


def test_address_in_use_is_one_line_exit_1(kctl, monkeypatch):
    """When the HTTPS API cannot start (the address is taken), the daemon says so in one line and exits 1."""
    from kctl.cli import daemon as daemon_cli
    from kctl.daemon import server as daemon_server

    def run(settings, *, api):
        raise daemon_server.APIListenError("cannot listen on 127.0.0.1:6443: Address already in use")

    monkeypatch.setattr(daemon_server, "run", run)
    monkeypatch.setattr(daemon_cli, "configure_logging", lambda level: None)
    result = kctl("daemon", "--listen", "127.0.0.1:6443")
    assert result.code == 1
    assert result.err.strip() == ("error: --listen 127.0.0.1:6443: cannot listen on 127.0.0.1:6443: "
                                  "Address already in use")
