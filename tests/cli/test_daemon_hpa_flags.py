"""`kctl daemon`'s --horizontal-pod-autoscaler-* flags reach the HPA controller's settings (kube's names)."""

from __future__ import annotations

import pytest


def _settings(kctl, monkeypatch, *args):
    from kctl.cli import daemon as daemon_cli
    from kctl.daemon import server

    given = []
    monkeypatch.setattr(server, "run", lambda settings, *, api: given.append(settings))
    monkeypatch.setattr(daemon_cli, "configure_logging", lambda level: None)
    result = kctl("daemon", *args)
    return result, given


@pytest.mark.parametrize("args,expected", [
    ([], (15.0, 300.0, 0.1, 300.0, 30.0)),
    (["--horizontal-pod-autoscaler-sync-period", "2", "--horizontal-pod-autoscaler-downscale-stabilization", "10s",
      "--horizontal-pod-autoscaler-tolerance", "0.2", "--horizontal-pod-autoscaler-cpu-initialization-period", "1m",
      "--horizontal-pod-autoscaler-initial-readiness-delay", "5"], (2.0, 10.0, 0.2, 60.0, 5.0)),
], ids=["defaults", "given"])
def test_hpa_flags_become_controller_settings(kctl, monkeypatch, args, expected):
    """The flags land in DaemonSettings and the controller table builds the HPA controller with them."""
    from kctl.daemon.controllers import CONTROLLERS

    result, given = _settings(kctl, monkeypatch, *args)
    assert result.code == 0, result.err
    [settings] = given
    assert "horizontal-pod-autoscaler" in settings.controllers
    ctl = CONTROLLERS["horizontal-pod-autoscaler"](settings)
    got = ctl.settings
    assert (got.sync_period, got.downscale_stabilization, got.tolerance, got.cpu_initialization_period,
            got.initial_readiness_delay) == expected
    assert ctl.name == "horizontal-pod-autoscaler"


@pytest.mark.parametrize("args", [
    ["--horizontal-pod-autoscaler-sync-period", "0"],
    ["--horizontal-pod-autoscaler-tolerance", "-1"],
    ["--horizontal-pod-autoscaler-downscale-stabilization", "soon"],
], ids=["zero-sync", "negative-tolerance", "not-a-duration"])
def test_bad_hpa_flags_are_usage_errors(kctl, monkeypatch, args):
    """A bad value is one usage line and exit 2, and no daemon runs."""
    result, given = _settings(kctl, monkeypatch, *args)
    assert result.code == 2 and not given
    assert "Traceback" not in result.err and args[0] in result.err
