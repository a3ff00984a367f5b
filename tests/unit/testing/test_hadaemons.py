"""kctl.testing.hadaemons without root: what each control host's daemon is given, and leader names."""

from __future__ import annotations

from pathlib import Path

import pytest

from kctl.testing.hadaemons import ControlDaemons
from kctl.testing.testbed import ControlHost, EtcdInfo, TestBed, TestBedError, _State


def bed_with_controls(folder: Path, count: int) -> TestBed:
    state = _State(id=9, bridge="kb9", gateway="10.77.9.1")
    state.controls = {f"c{i}": ControlHost(name=f"c{i}", index=i, address=f"10.77.9.{240 + i}",
                                           netns=f"kctl-9-c{i}", veth=f"kv9c{i}", folder=str(folder / f"c{i}"))
                      for i in range(1, count + 1)}
    if count:
        state.etcd = EtcdInfo(address="etcd://" + ",".join(f"10.77.9.{240 + i}:2379" for i in range(1, count + 1)),
                              ca_file="/pki/ca.crt", cert_file="/pki/client.crt", key_file="/pki/client.key")
    bed = TestBed(folder / "bed")
    bed.folder.mkdir()
    bed.state_file.write_text(state.to_json())
    return bed


class FakeAPI:
    """Just enough of the API for ControlDaemons.leader: one Lease (or none)."""

    def __init__(self, holder: str | None) -> None:
        self.holder = holder

    def resource(self, name: str) -> str:
        return name

    def get(self, resource: str, name: str, *, namespace: str) -> dict:
        from kctl.machinery.errors import NotFound

        if self.holder is None:
            raise NotFound(resource, name, namespace)
        return {"spec": {"holderIdentity": self.holder}}


def test_each_daemon_lists_its_own_member_first(tmp_path: Path) -> None:
    """A daemon's --store starts with its own host's member, then the others in order."""
    daemons = ControlDaemons(bed_with_controls(tmp_path, 3), tmp_path / "ha")
    assert daemons.own_member_first("c2") == ["c2", "c1", "c3"]
    env = daemons.env(state_dir=tmp_path / "s", members=daemons.own_member_first("c3"))
    assert env["KCTL_STORE"] == "etcd://10.77.9.243:2379,10.77.9.241:2379,10.77.9.242:2379"
    assert env["KCTL_ETCD_STATE_DIR"] == str(tmp_path / "s")
    assert (env["KCTL_ETCD_CAFILE"], env["KCTL_ETCD_CERTFILE"], env["KCTL_ETCD_KEYFILE"]) == (
        "/pki/ca.crt", "/pki/client.crt", "/pki/client.key")


def test_daemon_argv_carries_the_election_timings(tmp_path: Path) -> None:
    """The leader-election flags and extra flags reach `kctl daemon`."""
    daemons = ControlDaemons(bed_with_controls(tmp_path, 3), tmp_path / "ha", lease_duration=8, renew_deadline=5.5,
                             retry_period=0.5, extra=("--no-agents",))
    argv = daemons.daemon_argv()
    assert argv[argv.index("--leader-elect-lease-duration") + 1] == "8"
    assert argv[argv.index("--leader-elect-renew-deadline") + 1] == "5.5"
    assert argv[argv.index("--leader-elect-retry-period") + 1] == "0.5"
    assert argv[-1] == "--no-agents"


@pytest.mark.parametrize(("holder", "leader"), [
    ("c2_0", "c2"), ("c3_1", "c3"), ("elsewhere_0", None), ("", None), (None, None)])
def test_leader_is_the_control_host_of_the_lease_holder(tmp_path: Path, holder: str | None,
                                                        leader: str | None) -> None:
    """`<hostname>_<slot>` on the Lease names the control host; anything else (or no Lease) is None."""
    daemons = ControlDaemons(bed_with_controls(tmp_path, 3), tmp_path / "ha")
    assert daemons.leader(FakeAPI(holder)) == leader


def test_a_bed_without_control_hosts_is_refused(tmp_path: Path) -> None:
    """ControlDaemons on a bed without control hosts is one clear TestBedError."""
    with pytest.raises(TestBedError, match="has no control hosts"):
        ControlDaemons(bed_with_controls(tmp_path, 0), tmp_path / "ha")
