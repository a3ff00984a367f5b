"""`kctl daemon --leader-elect-*` (kube-controller-manager's leader-election timings): checked in one line before
anything runs, and carried into DaemonSettings, whose own check says the same."""

from __future__ import annotations

import pytest

from kctl.daemon.settings import DaemonSettings


@pytest.mark.parametrize("args, message", [
    (["--leader-elect-lease-duration", "10s", "--leader-elect-renew-deadline", "10s"],
     "the renew deadline (10s) must be positive and shorter than the lease duration (10s)"),
    (["--leader-elect-lease-duration", "2.5s"], "whole number of seconds"),
    (["--leader-elect-retry-period", "12s"], "retry period (12s) must be positive and shorter than the renew"),
], ids=["deadline-equals-lease", "fractional-lease", "retry-longer-than-deadline"])
def test_bad_leader_election_timings_are_one_line_and_exit_2(kctl, args, message):
    """A bad timing combination stops `kctl daemon` at once with one clear line, exit 2."""
    result = kctl("daemon", *args)
    assert result.code == 2
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --leader-elect-*: ") and message in lines[0]
    assert "Traceback" not in result.err


@pytest.mark.parametrize("fields, ok", [
    ({}, True),
    ({"leader_elect_lease_duration": 30.0, "leader_elect_renew_deadline": 20.0, "leader_elect_retry_period": 5.0},
     True),
    ({"leader_elect_renew_deadline": 15.0}, False),
    ({"leader_elect_retry_period": 0.0}, False),
], ids=["defaults", "longer", "deadline-equals-lease", "zero-retry"])
def test_daemon_settings_check_their_leader_election_timings(fields, ok):
    """DaemonSettings refuses timings kube-controller-manager would, and gives the Lease settings otherwise."""
    if not ok:
        with pytest.raises(ValueError, match="^leader election: "):
            DaemonSettings(**fields)
        return
    election = DaemonSettings(**fields).leader_election()
    assert election.lease_duration == int(fields.get("leader_elect_lease_duration", 15.0))
    assert election.renew_deadline == fields.get("leader_elect_renew_deadline", 10.0)
    assert election.renew_interval == election.retry_interval == fields.get("leader_elect_retry_period", 2.0)
