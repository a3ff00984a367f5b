"""The test bed's control hosts without root: state file, commands run inside a host, the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kctl.testing import testbed as bedmodule
from kctl.testing.testbed import ControlHost, EtcdInfo, Host, TestBed, TestBedError, _State


def control(index: int, bed_id: int = 7) -> ControlHost:
    return ControlHost(name=f"c{index}", index=index, address=f"10.77.{bed_id}.{240 + index}",
                       netns=f"kctl-{bed_id}-c{index}", veth=f"kv{bed_id}c{index}", folder=f"/bed/c{index}",
                       etcd_pid=100 + index)


def bed_with(tmp_path: Path, state: _State) -> TestBed:
    bed = TestBed(tmp_path)
    bed.state_file.write_text(state.to_json())
    return bed


def three_controls() -> _State:
    state = _State(id=7, bridge="kb7", gateway="10.77.7.1")
    state.controls = {f"c{i}": control(i) for i in (1, 2, 3)}
    state.etcd = EtcdInfo(address="etcd://10.77.7.241:2379,10.77.7.242:2379,10.77.7.243:2379",
                          ca_file="/bed/etcd/pki/ca.crt", cert_file="/bed/etcd/pki/client.crt",
                          key_file="/bed/etcd/pki/client.key")
    return state


def test_state_round_trips_control_hosts_and_etcd() -> None:
    """Control hosts and the etcd files survive the state file."""
    state = three_controls()
    state.hosts = {"h1": Host(name="h1", index=1, address="10.77.7.11", netns="kctl-7-h1", veth="kv7h1",
                              folder="/bed/h1")}
    again = _State.from_json(state.to_json())
    assert again == state


def test_state_file_of_an_older_bed_loads() -> None:
    """A state file written before control hosts existed (no controls, no etcd) still loads."""
    old = {"id": 3, "bridge": "kb3", "gateway": "10.77.3.1", "hosts": {}, "control_pid": None}
    state = _State.from_json(json.dumps(old))
    assert state.controls == {} and state.etcd is None


def test_command_runs_inside_the_hosts_namespaces_under_its_name() -> None:
    """argv runs in the control host's netns, in a UTS namespace whose hostname is the host's name."""
    argv = control(2).command(["kctl", "daemon", "--log-level", "info"])
    assert argv[:2] == ["nsenter", "--net=/run/netns/kctl-7-c2"]
    assert argv[2:5] == ["unshare", "--uts", "--"]
    assert argv[-5:] == ["c2", "kctl", "daemon", "--log-level", "info"]


@pytest.mark.parametrize(("names", "expected"), [
    ((), "etcd://10.77.7.241:2379,10.77.7.242:2379,10.77.7.243:2379"),
    (("c2", "c3"), "etcd://10.77.7.242:2379,10.77.7.243:2379"),
    (("c3",), "etcd://10.77.7.243:2379"),
])
def test_etcd_store_args_name_the_chosen_members(tmp_path: Path, names: tuple[str, ...], expected: str) -> None:
    """--store lists every member, or only the named ones; the TLS files come along."""
    bed = bed_with(tmp_path, three_controls())
    assert bed.etcd_store_args(*names) == ["--store", expected, "--etcd-cafile", "/bed/etcd/pki/ca.crt",
                                           "--etcd-certfile", "/bed/etcd/pki/client.crt",
                                           "--etcd-keyfile", "/bed/etcd/pki/client.key"]


def test_a_bed_without_control_hosts_says_so(tmp_path: Path) -> None:
    """Asking for etcd or an unknown control host is one clear TestBedError."""
    bed = bed_with(tmp_path, _State(id=7, bridge="kb7", gateway="10.77.7.1"))
    with pytest.raises(TestBedError, match="has no control hosts"):
        bed.etcd_store_args()
    with pytest.raises(TestBedError, match=r"no control host 'c1' in the bed \(control hosts: none\)"):
        bed.control_command("c1", ["true"])


def test_usage_prints_the_store_and_a_daemon_per_control_host(tmp_path: Path) -> None:
    """`up --control` prints the etcd environment and how to run a daemon in each control host."""
    bed = bed_with(tmp_path, three_controls())
    text = bed.usage()
    assert "export KCTL_STORE=etcd://10.77.7.241:2379,10.77.7.242:2379,10.77.7.243:2379" in text
    assert "KCTL_ETCD_CAFILE=/bed/etcd/pki/ca.crt" in text
    assert ("--store etcd://10.77.7.241:2379,10.77.7.242:2379,10.77.7.243:2379 --etcd-cafile /bed/etcd/pki/ca.crt "
            "--etcd-certfile /bed/etcd/pki/client.crt --etcd-keyfile /bed/etcd/pki/client.key") in text
    daemons = [line for line in text.splitlines() if " kctl daemon " in line or "/kctl daemon " in line]
    assert len(daemons) == 3
    assert "KCTL_STORE=etcd://10.77.7.242:2379,10.77.7.241:2379,10.77.7.243:2379" in daemons[1]  # its own first
    assert " exec c2 " in daemons[1] and "--leader-elect-lease-duration 6" in daemons[1]


@pytest.mark.parametrize(("argv", "message"), [
    (["exec"], "exec needs a host name"),
    (["cut", "c1", "--", "true"], "cut takes no command"),
    (["status", "c1"], "status takes no host name"),
])
def test_command_line_mistakes(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Misused subcommands exit 2 with one line naming the mistake."""
    with pytest.raises(SystemExit) as exit_info:
        bedmodule.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_exec_without_a_command_fails_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`exec cN` with nothing after -- is one error line and exit 1, nothing run."""
    bed_with(tmp_path, three_controls())
    assert bedmodule.main(["exec", "c1", "--dir", str(tmp_path)]) == 1
    assert "exec c1: give the command to run after --" in capsys.readouterr().err


def test_up_refuses_bad_counts_before_touching_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-n 0 needs control hosts; --control is bounded; nothing is made on the way."""
    monkeypatch.setattr(bedmodule, "missing_prerequisites", lambda **_: [])
    bed = TestBed(tmp_path / "bed")
    with pytest.raises(TestBedError, match="0 only with control hosts"):
        bed.up(0)
    with pytest.raises(TestBedError, match="--control 10: expected 0 to 9"):
        bed.up(1, control=10)
    assert not (tmp_path / "bed").exists()
