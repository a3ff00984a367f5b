"""A test bed of several Podman hosts on one machine: network namespaces, each with sshd and Podman.

`TestBed(folder).up(n)` brings up hosts h1..hN. Each is a network namespace on a bridge
of the bed's own, with an address of its own, an sshd (its own host key; the bed's client
key lets root in) and a Podman service (its own storage, kctl's containers.conf) that
holds the demo image (localhost/busybox:demo).

`up(n, control=K)` (or `start_control(K)` on a running bed) also brings up control hosts
c1..cK for issue 17's several control hosts: network namespaces on the same bridge, no
sshd or Podman, each running one member of one K-member TLS etcd cluster
(kctl.testing.etcdcluster.EtcdCluster with its members in the hosts' namespaces; its CA,
member and client certificates under the bed's folder). `etcd_store_args()` gives the
`--store etcd://... --etcd-cafile/certfile/keyfile` a kctl needs, `control_command(cN,
argv)` runs argv inside cN (its network namespace and a UTS namespace whose hostname is
cN, so each control host's `kctl daemon` has its own leader identity). `cut`/`heal` take
a control host's link down and up as a worker's; `stop_control()` (and `down`) stop its
members and every process left in its namespace. kctl.testing.hadaemons runs a `kctl daemon`
in each. The hosts share this machine's /run, so `remove_fences()` (and `down`) removes
the leader terms kctl's fencing left for their Podman sockets. kctl reaches them as it reaches real
machines: `kctl node add hN --ssh root@ADDRESS:22 --identity KEY --socket SOCKET`
(`TestBed.node_add_args`, host keys from `known_hosts_line`). `cut`/`heal` take a host's
link down and up, `rekey` gives it a new host key, `add` one more host, `serve_control`
an sshd on the bridge address (the control host, for node mode); `down` removes
everything the state file records, also after a crash or a partial `up`.

Used by tests/e2e (the `testbed` fixture; test_ha.py adds control hosts), benchmarks/multihost.py,
benchmarks/failover.py, `make testbed-up [CONTROL=3]` / `make testbed-down`, and by hand:

    python -m kctl.testing.testbed up|down|status|add|cut hN|heal hN|rekey hN [--dir DIR] [-n 3] [--control 3]
    python -m kctl.testing.testbed exec cN -- COMMAND...   # COMMAND inside control host cN

What a bed owns, named from a small id (1-254) chosen from its folder, kept in its state:

    folder (0700)   testbed.json (state, 0600), id_ed25519[.pub] (client key, 0600),
                    bed_known_hosts (its hosts' current keys), demo-image.tar, hN/ per host
    bridge          kb<id>, 10.77.<id>.1/24: this machine's side (the control host)
    host hN         netns kctl-<id>-hN, veth kv<id>hN (its peer is eth0 inside),
                    10.77.<id>.(10+N); sshd and `podman system service` run inside it,
                    tracked by PID; storage, run and Podman network definitions
                    (`--network-config-dir hN/networks`) under hN/
    control cN      netns kctl-<id>-cN, veth kv<id>cN, 10.77.<id>.(240+N); folder cN/; its etcd
                    member (client port 2379, peer 2380 on that address, tracked by PID) keeps
                    its data and the cluster's PKI under etcd/

What kctl's pod network makes on a host (the `kctl` bridge network, routes of proto 76,
the nft table `ip kctl-net`, sysctls) lives in the host's namespace and folder, so `down`
removes it with them: nothing of it is left on this machine.

Two beds (CI's e2e tests and a developer's) get different ids, so different names and
subnets. Needs root, ip (iproute2), nsenter (util-linux), sshd, podman (`make system`).
The sshd, unmount and process helpers are shared with tests/integration/conftest.py.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from kctl.runtime.service import CONTAINERS_CONF_FILE, ping, service_command
from kctl.ssh import HostKey, host_pattern
from kctl.testing import processes
from kctl.testing.processes import alive, log_tail, reap, spawn, wait_listening

if TYPE_CHECKING:
    from kctl.testing.etcdcluster import EtcdCluster

REPO = Path(__file__).resolve().parents[2]
BUILD_DEMO_IMAGE = REPO / "tools" / "build-demo-image.sh"
DEMO_IMAGE = "localhost/busybox:demo"
DEFAULT_FOLDER = REPO / ".state" / "testbed"
STATE_FILE = "testbed.json"
SSHD = "/usr/sbin/sshd"
SSH_PORT = 22
CONTROL_PORT = 2222          # the control sshd, on the bridge address (node mode)
START_TIMEOUT = 30.0         # seconds sshd or a Podman service may take to answer
STOP_GRACE = 5.0             # seconds between SIGTERM and SIGKILL
PODMAN_TIMEOUT = 180.0       # seconds one podman command (load, rm -af) may take
FIRST_HOST_OCTET = 10        # hN is 10.77.<id>.(10+N)
MAX_HOSTS = 200
FIRST_CONTROL_OCTET = 240    # cN is 10.77.<id>.(240+N)
MAX_CONTROL = 9
ETCD = "/usr/bin/etcd"
ETCD_CLIENT_PORT = 2379      # each member listens on its own control host's address
ETCD_START_TIMEOUT = 60.0    # seconds a fresh cluster may take to elect a leader on a loaded machine
TOOLS = ("ip", "nsenter", "ssh-keygen", "podman", SSHD)
CONTROL_TOOLS = ("ip", "nsenter", "unshare", ETCD)


class TestBedError(Exception):
    """A step of bringing a bed up or changing it failed; the message says which and why."""

    __test__ = False  # not a pytest test class


# -- helpers shared with tests/integration/conftest.py -----------------------------------------

def sshd_config(*, listen: str, port: int, host_key: str, pid_file: str, authorized_keys: str) -> str:
    """An sshd_config letting in only the authorized keys (root too), with forwarding for Podman tunnels."""
    return "\n".join([
        f"Port {port}", f"ListenAddress {listen}", f"HostKey {host_key}", f"PidFile {pid_file}",
        f"AuthorizedKeysFile {authorized_keys}", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "UsePAM no", "StrictModes no", "PermitRootLogin prohibit-password", "AllowTcpForwarding yes",
        "AllowStreamLocalForwarding yes", "LogLevel ERROR", ""])


def make_key(path: str | os.PathLike, *, comment: str = "") -> HostKey:
    """A new ed25519 key pair at path (replacing one there); returns its public key."""
    for old in (Path(path), Path(f"{path}.pub")):
        old.unlink(missing_ok=True)
    run_command(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    return public_key(f"{path}.pub")


def public_key(pub_file: str | os.PathLike) -> HostKey:
    """The key an OpenSSH .pub file holds."""
    fields = Path(pub_file).read_text().split()
    return HostKey(fields[0], fields[1])


def wait_for_port(host: str, port: int, *, pid: int, log: str, timeout: float = START_TIMEOUT) -> None:
    """Until sshd accepts on host:port; TestBedError if process `pid` exits or time runs out."""
    why = wait_listening(host, port, pid=pid, timeout=timeout)
    if why == "exited":
        raise TestBedError(f"sshd on {host}:{port} exited: {log_tail(log)}")
    if why:
        raise TestBedError(f"sshd did not listen on {host}:{port} within {timeout:g} s: {log_tail(log)}")


def kill_processes_naming(folder: str | os.PathLike) -> None:
    """SIGKILL, by PID, processes whose command line names folder (conmon of its containers)."""
    marker = os.fspath(folder).encode()
    spared = _ancestors()
    for pid in _pids():
        with contextlib.suppress(OSError):
            if pid not in spared and marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
                reap(pid)


def unmount_under(folder: str | os.PathLike) -> None:
    """Unmount, deepest first, everything mounted under folder (overlay, shm, netns)."""
    prefix = os.path.realpath(folder) + "/"
    points = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                points.append(point)
    for point in sorted(points, key=len, reverse=True):
        if subprocess.run(["umount", point], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True)


# -- processes and commands ----------------------------------------------------------------------

def run_command(argv: list[str], *, check: bool = True, env: dict | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess:
    """Run argv (no shell); TestBedError naming it and its stderr when it fails and check is set."""
    try:
        result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout,
                                stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        if not check:
            return subprocess.CompletedProcess(argv, -1, "", str(error))
        raise TestBedError(f"{' '.join(argv[:6])}: {error}") from None
    if check and result.returncode != 0:
        why = (result.stderr or result.stdout).strip().splitlines()
        raise TestBedError(f"{' '.join(argv[:6])}: {why[-1] if why else f'exit status {result.returncode}'}")
    return result


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _ancestors() -> set[int]:
    """This process and its parents (a command naming the folder must not end the one cleaning it)."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def stop_pids(pids: list[int], *, grace: float = STOP_GRACE) -> None:
    """SIGTERM the processes, SIGKILL those still alive after grace seconds, wait (grace s) until they are gone."""
    processes.stop_pids(pids, grace=grace)


def _stop_ours(pid: int | None, marker: str) -> None:
    """Stop pid only if it is still the process we started (its command line names marker)."""
    if not pid:
        return
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if marker.encode() in cmdline:
        stop_pids([pid])


def _pids_in_netns(netns: str, *, exe: str | None = None) -> list[int]:
    """The processes living in network namespace netns (those running exe, when given)."""
    try:
        inode = os.stat(f"/run/netns/{netns}").st_ino
    except OSError:
        return []
    found = []
    for pid in _pids():
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{pid}/ns/net").st_ino == inode and (
                    exe is None or os.readlink(f"/proc/{pid}/exe") == exe):
                found.append(pid)
    return found


def _spawn(argv: list[str], *, log: str, cwd: str, env: dict | None = None) -> int:
    """Start argv in a session of its own, output to log; its PID (it outlives us when we exit)."""
    try:
        return spawn(argv, log=log, cwd=cwd, env=env).pid
    except OSError as error:
        raise TestBedError(f"cannot start {argv[0]}: {error}") from None


def podman_env() -> dict[str, str]:
    """The environment of the bed's Podman commands: kctl's containers.conf (runc, cgroupfs, ulimits)."""
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF_FILE)}


def missing_prerequisites(*, hosts: bool = True, control: bool = False) -> list[str]:
    """Why a bed (worker hosts, control hosts) cannot come up on this machine ([] when it can)."""
    missing = [] if os.geteuid() == 0 else ["not root (network namespaces and rootful Podman need root)"]
    tools = (TOOLS if hosts else ()) + (CONTROL_TOOLS if control else ())
    for tool in dict.fromkeys(tools):
        if shutil.which(tool) is None:
            what = "etcd-server" if tool == ETCD else tool
            missing.append(f"{what} is not installed (make system)")
    return missing


# -- the bed ---------------------------------------------------------------------------------------

@dataclass
class Host:
    """One host of the bed: a network namespace with an address, an sshd and a Podman service."""

    name: str
    index: int
    address: str
    netns: str
    veth: str
    folder: str
    sshd_pid: int | None = None
    podman_pid: int | None = None
    cut: bool = False

    @property
    def socket(self) -> str:
        """The Podman socket (a path on this machine's filesystem, shared with the namespace)."""
        return f"{self.folder}/podman.sock"

    @property
    def url(self) -> str:
        """The Podman URL of the host's service from this machine, without SSH (for checks)."""
        return f"unix://{self.socket}"

    @property
    def host_key(self) -> str:
        return f"{self.folder}/ssh_host_ed25519_key"

    @property
    def network_config_dir(self) -> str:
        """The host's own Podman network definitions (a real host's /etc/containers/networks)."""
        return f"{self.folder}/networks"

    def podman_args(self) -> list[str]:
        """Podman's global options naming this host's storage and network definitions."""
        return ["--root", f"{self.folder}/storage", "--runroot", f"{self.folder}/run",
                "--network-config-dir", self.network_config_dir]

    def nsenter(self) -> list[str]:
        """The prefix running a command in the host's network namespace (not `ip netns exec`: runc needs /sys)."""
        return ["nsenter", f"--net=/run/netns/{self.netns}"]


@dataclass
class ControlHost:
    """One control host of the bed: a network namespace with an address and one etcd member."""

    name: str
    index: int
    address: str
    netns: str
    veth: str
    folder: str
    etcd_pid: int | None = None
    cut: bool = False

    @property
    def client_url(self) -> str:
        """The etcd member's client URL (TLS)."""
        return f"https://{self.address}:{ETCD_CLIENT_PORT}"

    @property
    def endpoint(self) -> str:
        """host:port of the member, as an `etcd://` address lists it."""
        return f"{self.address}:{ETCD_CLIENT_PORT}"

    def nsenter(self) -> list[str]:
        """The prefix running a command in the host's network namespace."""
        return ["nsenter", f"--net=/run/netns/{self.netns}"]

    def command(self, argv: list[str]) -> list[str]:
        """argv run inside the host: its network namespace, and a UTS namespace whose hostname is the host's
        name (so a `kctl daemon` there has its own leader identity and default node name)."""
        return [*self.nsenter(), "unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"',
                self.name, *argv]


@dataclass
class EtcdInfo:
    """What a kctl needs to reach the bed's etcd cluster: its address and client TLS files."""

    address: str
    ca_file: str
    cert_file: str
    key_file: str


@dataclass
class _State:
    id: int
    bridge: str
    gateway: str
    hosts: dict[str, Host] = field(default_factory=dict)
    control_pid: int | None = None
    controls: dict[str, ControlHost] = field(default_factory=dict)
    etcd: EtcdInfo | None = None

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "_State":
        data = json.loads(text)
        hosts = {name: Host(**host) for name, host in data.pop("hosts").items()}
        controls = {name: ControlHost(**host) for name, host in (data.pop("controls", None) or {}).items()}
        etcd = data.pop("etcd", None)
        return cls(hosts=hosts, controls=controls, etcd=EtcdInfo(**etcd) if etcd else None, **data)


class TestBed:
    """A bed of hosts in `folder`; `up`, `add`, `cut`, `heal`, `rekey`, `down` change it (see the module doc)."""

    __test__ = False  # not a pytest test class

    def __init__(self, folder: str | os.PathLike = DEFAULT_FOLDER) -> None:
        self.folder = Path(os.path.abspath(folder))
        self._lock = threading.RLock()
        self._state: _State | None = None
        self._etcd: EtcdCluster | None = None  # the cluster this process started (kill/restart a member)

    # -- paths and what kctl needs ------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.folder / STATE_FILE

    @property
    def identity(self) -> str:
        """The client private key every host (and the control sshd) lets in as root."""
        return str(self.folder / "id_ed25519")

    @property
    def known_hosts(self) -> str:
        """A known_hosts file with the current keys of every host (and of the control sshd)."""
        return str(self.folder / "bed_known_hosts")  # not "known_hosts": kctl keeps that beside a store in DIR

    @property
    def image_archive(self) -> Path:
        return self.folder / "demo-image.tar"

    @property
    def state(self) -> _State:
        if self._state is None:
            self._state = self._read_state()
            if self._state is None:
                raise TestBedError(f"no test bed in {self.folder} (start one with: up)")
        return self._state

    @property
    def hosts(self) -> list[Host]:
        return sorted(self.state.hosts.values(), key=lambda host: host.index)

    def host(self, name: str) -> Host:
        try:
            return self.state.hosts[name]
        except KeyError:
            raise TestBedError(f"no host {name!r} in the bed (hosts: {', '.join(self.state.hosts)})") from None

    @property
    def control_hosts(self) -> list[ControlHost]:
        return sorted(self.state.controls.values(), key=lambda host: host.index)

    def control_host(self, name: str) -> ControlHost:
        try:
            return self.state.controls[name]
        except KeyError:
            known = ", ".join(self.state.controls) or "none"
            raise TestBedError(f"no control host {name!r} in the bed (control hosts: {known})") from None

    @property
    def etcd(self) -> EtcdInfo:
        """The etcd cluster of the control hosts (TestBedError when the bed has none)."""
        if self.state.etcd is None:
            raise TestBedError(f"the test bed in {self.folder} has no control hosts (start them with: up --control 3)")
        return self.state.etcd

    def etcd_address(self, *names: str) -> str:
        """The `etcd://` address of the given control hosts' members (all, in order, when none are given)."""
        hosts = [self.control_host(name) for name in names] if names else self.control_hosts
        if not hosts:
            raise TestBedError(f"the test bed in {self.folder} has no control hosts")
        return "etcd://" + ",".join(host.endpoint for host in hosts)

    def etcd_store_args(self, *names: str) -> list[str]:
        """kctl's global options reaching the control hosts' etcd (only the named members', when given)."""
        info = self.etcd
        return ["--store", self.etcd_address(*names) if names else info.address, "--etcd-cafile", info.ca_file,
                "--etcd-certfile", info.cert_file, "--etcd-keyfile", info.key_file]

    def control_command(self, name: str, argv: list[str]) -> list[str]:
        """argv run inside control host `name` (its network namespace, its hostname)."""
        return self.control_host(name).command(argv)

    def node_add_args(self, name: str) -> list[str]:
        """What `kctl node add NAME` needs to reach host `name`."""
        host = self.host(name)
        return ["--ssh", f"root@{host.address}:{SSH_PORT}", "--identity", self.identity, "--socket", host.socket]

    def host_key(self, name: str) -> HostKey:
        return public_key(f"{self.host(name).host_key}.pub")

    def known_hosts_line(self, name: str) -> str:
        """The known_hosts line of host `name`'s current key, as `kctl node trust` records it."""
        key = self.host_key(name)
        return f"{host_pattern(self.host(name).address, SSH_PORT)} {key.type} {key.blob}"

    @property
    def control_address(self) -> tuple[str, int]:
        """(address, port) of the control sshd that serve_control() starts on the bridge."""
        return self.state.gateway, CONTROL_PORT

    # -- state ---------------------------------------------------------------------------------

    def _read_state(self) -> _State | None:
        try:
            return _State.from_json(self.state_file.read_text())
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, KeyError) as error:
            raise TestBedError(f"{self.state_file}: not a test bed state file ({error})") from None

    def _save(self) -> None:
        with self._lock:
            tmp = self.state_file.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(self.state.to_json())
            os.replace(tmp, self.state_file)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One command at a time on a bed, across processes (a lock file in its folder)."""
        with open(os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)) as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._state = None  # re-read: another process may have changed it
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write_known_hosts(self) -> None:
        lines = [self.known_hosts_line(host.name) for host in self.hosts if Path(f"{host.host_key}.pub").exists()]
        control = self.folder / "control" / "ssh_host_ed25519_key.pub"
        if self.state.control_pid and control.exists():
            key = public_key(control)
            lines.append(f"{host_pattern(*self.control_address)} {key.type} {key.blob}")
        fd = os.open(self.known_hosts, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write("".join(line + "\n" for line in lines))

    # -- up ---------------------------------------------------------------------------------------

    def up(self, count: int = 3, *, control: int = 0) -> "TestBed":
        """Bring up `count` hosts and `control` control hosts with etcd; on failure remove what was made and
        raise TestBedError."""
        problems = missing_prerequisites(hosts=count > 0, control=control > 0)
        if problems:
            raise TestBedError("cannot start a test bed: " + "; ".join(problems))
        if not (0 if control else 1) <= count <= MAX_HOSTS:
            raise TestBedError(f"-n {count}: expected 1 to {MAX_HOSTS} hosts (0 only with control hosts)")
        if not 0 <= control <= MAX_CONTROL:
            raise TestBedError(f"--control {control}: expected 0 to {MAX_CONTROL} control hosts")
        if self.state_file.exists():
            raise TestBedError(f"a test bed is up in {self.folder} already (remove it with: down)")
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        try:
            with self._exclusive():
                bed_id = _choose_id(self.folder)
                self._state = _State(id=bed_id, bridge=f"kb{bed_id}", gateway=f"10.77.{bed_id}.1")
                self._save()
                run_command(["ip", "link", "add", self.state.bridge, "type", "bridge"])
                run_command(["ip", "addr", "add", f"{self.state.gateway}/24", "dev", self.state.bridge])
                run_command(["ip", "link", "set", self.state.bridge, "up"])
                make_key(self.identity, comment=f"kctl-testbed-{bed_id}")
                if count:
                    self._prepare_image()
                for index in range(1, count + 1):
                    self._reserve_host(index)
                if count:
                    with ThreadPoolExecutor(max_workers=count) as pool:
                        list(pool.map(self._start_host, self.hosts))
                self._write_known_hosts()
            if control:
                self.start_control(control)
        except BaseException:
            self.down()
            raise
        return self

    def add(self) -> Host:
        """One more host, like the others (named after the highest index so far + 1)."""
        with self._exclusive():
            index = max((host.index for host in self.hosts), default=0) + 1
            if index > MAX_HOSTS:
                raise TestBedError(f"the bed has room for {MAX_HOSTS} hosts")
            host = self._reserve_host(index)
            self._start_host(host)
            self._write_known_hosts()
            return host

    # -- control hosts (issue 17) -------------------------------------------------------------------

    def start_control(self, count: int = 3) -> list[ControlHost]:
        """Control hosts c1..c<count>, each with one member of one new TLS etcd cluster; TestBedError (and
        nothing left of them) when they do not come up."""
        problems = missing_prerequisites(hosts=False, control=True)
        if problems:
            raise TestBedError("cannot start control hosts: " + "; ".join(problems))
        if not 1 <= count <= MAX_CONTROL:
            raise TestBedError(f"--control {count}: expected 1 to {MAX_CONTROL} control hosts")
        try:
            with self._exclusive():
                if self.state.controls:
                    raise TestBedError(f"the bed has control hosts already ({', '.join(self.state.controls)}): "
                                       "stop them first")
                hosts = [self._reserve_control(index) for index in range(1, count + 1)]
                for host in hosts:
                    self._start_control_host(host)
                self._start_etcd(hosts)
        except TestBedError as error:
            self.stop_control()
            raise TestBedError(f"control hosts did not come up: {error}") from None
        except BaseException:
            self.stop_control()
            raise
        return self.control_hosts

    def _reserve_control(self, index: int) -> ControlHost:
        bed_id = self.state.id
        name = f"c{index}"
        host = ControlHost(name=name, index=index, address=f"10.77.{bed_id}.{FIRST_CONTROL_OCTET + index}",
                           netns=f"kctl-{bed_id}-{name}", veth=f"kv{bed_id}{name}", folder=str(self.folder / name))
        with self._lock:
            self.state.controls[name] = host
            self._save()
        return host

    def _plug_in(self, host: Host | ControlHost) -> None:
        """The host's network namespace, its veth pair on the bed's bridge, address and links up."""
        run_command(["ip", "netns", "add", host.netns])
        run_command(["ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns])
        run_command(["ip", "link", "set", host.veth, "master", self.state.bridge, "up"])
        run_command(["ip", "-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0"])
        run_command(["ip", "-n", host.netns, "link", "set", "eth0", "up"])
        run_command(["ip", "-n", host.netns, "link", "set", "lo", "up"])

    def _start_control_host(self, host: ControlHost) -> None:
        Path(host.folder).mkdir(mode=0o700, exist_ok=True)
        self._plug_in(host)

    @property
    def etcd_folder(self) -> Path:
        """The control hosts' etcd cluster: members' data, PKI (CA, member and client certificates), logs."""
        return self.folder / "etcd"

    def _start_etcd(self, hosts: list[ControlHost]) -> None:
        """One etcd member in each control host's namespace, on its address; PIDs and TLS files recorded."""
        from kctl.testing.etcdcluster import EtcdCluster

        cluster = EtcdCluster(self.etcd_folder, members=len(hosts), tls=True,  # in a netns: ports 2379, 2380
                              netns=[host.netns for host in hosts], hosts=[host.address for host in hosts])
        self._etcd = cluster
        try:
            cluster.start(timeout=ETCD_START_TIMEOUT)
        except Exception as error:
            raise TestBedError(f"etcd: {error}") from None
        finally:
            for host, member in zip(hosts, cluster.members):
                host.etcd_pid = member.pid
            self._save()
        self.state.etcd = EtcdInfo(address=cluster.address, ca_file=str(cluster.ca_file),
                                   cert_file=str(cluster.client_cert_file), key_file=str(cluster.client_key_file))
        self._save()

    def detach(self) -> None:
        """Let the control hosts' etcd members outlive this process (the command's `up`; `down` ends them)."""
        if self._etcd is not None:
            self._etcd.detach()

    def stop_control(self) -> None:
        """Stop the control hosts' etcd members and every process in their namespaces (daemons a test started
        there), delete their links, namespaces and folders, and the etcd folder. Idempotent."""
        with self._exclusive():
            state = self._read_state()
            if state is None:
                return
            self._state = state
            cluster, self._etcd = self._etcd, None
            hosts = list(state.controls.values())
            for host in hosts:
                _stop_ours(host.etcd_pid, str(self.folder))
            if cluster is not None:
                with contextlib.suppress(Exception):
                    cluster.stop()
            for host in hosts:
                _remove_control_host(host)
            kill_processes_naming(self.etcd_folder)
            shutil.rmtree(self.etcd_folder, ignore_errors=True)
            state.controls.clear()
            state.etcd = None
            self._save()

    def _reserve_host(self, index: int) -> Host:
        """Record a host in the state before anything of it exists, so down() can always find it."""
        bed_id = self.state.id
        name = f"h{index}"
        host = Host(name=name, index=index, address=f"10.77.{bed_id}.{FIRST_HOST_OCTET + index}",
                    netns=f"kctl-{bed_id}-{name}", veth=f"kv{bed_id}{name}", folder=str(self.folder / name))
        with self._lock:
            self.state.hosts[name] = host
            self._save()
        return host

    def _start_host(self, host: Host) -> None:
        """Namespace and link, host key, image, sshd and Podman service of one recorded host."""
        Path(host.folder).mkdir(mode=0o700, exist_ok=True)
        self._plug_in(host)
        make_key(host.host_key, comment=host.name)
        self._start_sshd(host)
        run_command(["podman", *host.podman_args(), "load", "-q", "-i", str(self.image_archive)], env=podman_env(),
             timeout=PODMAN_TIMEOUT)
        self._start_podman(host)
        wait_for_port(host.address, SSH_PORT, pid=host.sshd_pid or 0, log=f"{host.folder}/sshd.log")

    def _start_sshd(self, host: Host) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
        config = f"{host.folder}/sshd_config"
        Path(config).write_text(sshd_config(listen=host.address, port=SSH_PORT, host_key=host.host_key,
                                            pid_file=f"{host.folder}/sshd.pid",
                                            authorized_keys=f"{self.identity}.pub"))
        pid = _spawn([*host.nsenter(), SSHD, "-D", "-e", "-f", config], log=f"{host.folder}/sshd.log",
                     cwd=host.folder)
        with self._lock:
            host.sshd_pid = pid
            self._save()

    def _start_podman(self, host: Host) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(host.socket)
        argv = service_command(host.socket, root=f"{host.folder}/storage", runroot=f"{host.folder}/run")
        # its own network definitions: rootful ones live in /etc/containers/networks, which every
        # namespace "host" of this machine would share (the pod network's `kctl` network is per host)
        Path(host.network_config_dir).mkdir(mode=0o700, exist_ok=True)
        argv[1:1] = ["--network-config-dir", host.network_config_dir]
        pid = _spawn([*host.nsenter(), *argv], log=f"{host.folder}/podman.log", cwd=host.folder, env=podman_env())
        with self._lock:
            host.podman_pid = pid
            self._save()
        deadline = time.monotonic() + START_TIMEOUT
        while not ping(host.socket):
            if not alive(pid) or time.monotonic() > deadline:
                why = "exited" if not alive(pid) else f"did not answer within {START_TIMEOUT:g} s"
                raise TestBedError(f"podman service of {host.name} {why}: {log_tail(f'{host.folder}/podman.log')}")
            time.sleep(0.1)

    def _prepare_image(self) -> None:
        """Build the demo image once, in scratch storage, and save it to the archive each host loads."""
        scratch = self.folder / "image"
        args = ["--root", str(scratch / "storage"), "--runroot", str(scratch / "run")]
        try:
            run_command([str(BUILD_DEMO_IMAGE), *args], env=podman_env(), timeout=PODMAN_TIMEOUT)
            run_command(["podman", *args, "save", "-q", "-o", str(self.image_archive), DEMO_IMAGE], env=podman_env(),
                 timeout=PODMAN_TIMEOUT)
        finally:
            run_command(["podman", *args, "rmi", "-a", "-f"], check=False, env=podman_env(), timeout=PODMAN_TIMEOUT)
            unmount_under(scratch)
            shutil.rmtree(scratch, ignore_errors=True)

    # -- control sshd (node mode) -------------------------------------------------------------

    def serve_control(self) -> tuple[str, int]:
        """An sshd on the bridge address (this machine, the control host), letting in the bed's key
        from the bed's subnet only; its key goes into known_hosts. Returns (address, port)."""
        with self._exclusive():
            folder = self.folder / "control"
            if alive(self.state.control_pid):
                return self.control_address
            folder.mkdir(mode=0o700, exist_ok=True)
            make_key(folder / "ssh_host_ed25519_key", comment="control")
            client = public_key(f"{self.identity}.pub")
            authorized = folder / "authorized_keys"
            authorized.write_text(f'from="10.77.{self.state.id}.0/24" {client.type} {client.blob}\n')
            os.chmod(authorized, 0o600)
            address, port = self.control_address
            config = folder / "sshd_config"
            config.write_text(sshd_config(listen=address, port=port, host_key=str(folder / "ssh_host_ed25519_key"),
                                          pid_file=str(folder / "sshd.pid"), authorized_keys=str(authorized)))
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
            pid = _spawn([SSHD, "-D", "-e", "-f", str(config)], log=str(folder / "sshd.log"), cwd=str(folder))
            self.state.control_pid = pid
            self._save()
            wait_for_port(address, port, pid=pid, log=str(folder / "sshd.log"))
            self._write_known_hosts()
            return address, port

    # -- faults -------------------------------------------------------------------------------

    def cut(self, name: str) -> None:
        """Cut host `name` (hN or cN) off: its link goes down (it stays up inside, unreachable, like a
        partition)."""
        self._set_link(name, up=False)

    def heal(self, name: str) -> None:
        """Bring host `name`'s link back up."""
        self._set_link(name, up=True)

    def _set_link(self, name: str, *, up: bool) -> None:
        with self._exclusive():
            host: Host | ControlHost = self.control_host(name) if name in self.state.controls else self.host(name)
            run_command(["ip", "link", "set", host.veth, "up" if up else "down"])
            host.cut = not up
            self._save()

    def remove_fences(self) -> None:
        """Remove the hosts' fence folders (kctl.runtime.fencing: the leader terms that drove their Podman).

        The bed's hosts share this machine's /run, so a term left there by one store's leaders would
        refuse the lower terms of the next store's daemons; `down` and the HA tests call this."""
        from kctl.runtime.fencing import remove_local_fence

        for host in self.hosts:
            remove_local_fence(host.socket)

    def rekey(self, name: str) -> HostKey:
        """Give host `name` a new host key: sshd and its open sessions end, then sshd starts with the new key."""
        with self._exclusive():
            host = self.host(name)
            _stop_ours(host.sshd_pid, host.folder)
            stop_pids(_pids_in_netns(host.netns, exe=SSHD))  # open sessions (the agents' tunnels) too
            key = make_key(host.host_key, comment=host.name)
            self._start_sshd(host)
            if not host.cut:
                wait_for_port(host.address, SSH_PORT, pid=host.sshd_pid or 0, log=f"{host.folder}/sshd.log")
            self._write_known_hosts()
            return key

    # -- status and down ----------------------------------------------------------------------

    def status(self) -> list[dict]:
        """One row per host: name, address, link (up/cut), sshd and podman alive, netns present."""
        rows = []
        for host in self.hosts:
            rows.append({"name": host.name, "address": host.address, "link": "cut" if host.cut else "up",
                         "sshd": alive(host.sshd_pid), "podman": alive(host.podman_pid) and ping(host.socket),
                         "netns": os.path.exists(f"/run/netns/{host.netns}"), "socket": host.socket})
        return rows

    def control_status(self) -> list[dict]:
        """One row per control host: name, address, link, etcd member alive, netns present, client URL."""
        return [{"name": host.name, "address": host.address, "link": "cut" if host.cut else "up",
                 "etcd": alive(host.etcd_pid), "netns": os.path.exists(f"/run/netns/{host.netns}"),
                 "url": host.client_url} for host in self.control_hosts]

    def down(self) -> None:
        """Remove everything of the bed: containers, processes, mounts, links, namespaces, the folder.

        Idempotent, and works from the state file alone after a crash or a partial up.
        """
        if not self.folder.exists():
            return
        with self._exclusive():
            state = self._read_state()
            if state is not None:
                self._state = state
                self.remove_fences()
                hosts = list(state.hosts.values())
                if hosts:
                    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
                        list(pool.map(_remove_host, hosts))
                for control in state.controls.values():
                    _stop_ours(control.etcd_pid, str(self.folder))
                    _remove_control_host(control)
                _stop_ours(state.control_pid, str(self.folder))
                run_command(["ip", "link", "del", state.bridge], check=False)
            kill_processes_naming(self.folder)
            unmount_under(self.folder)
        shutil.rmtree(self.folder, ignore_errors=True)
        self._state = None

    def usage(self) -> str:
        """How to use the bed with kctl: the commands to add its hosts (and, with control hosts, to run a
        daemon in each on the etcd store), as `make testbed-up` prints them."""
        kctl = _display(Path(sys.executable).with_name("kctl"))
        where = "" if self.folder == DEFAULT_FOLDER else f" --dir {self.folder}"
        bed = f"{_display(sys.executable)} -m kctl.testing.testbed"
        controls = self.control_hosts
        names = [h.name for h in self.hosts] + [c.name for c in controls]
        lines = [f"Test bed up in {_display(self.folder)}: bridge {self.state.bridge} "
                 f"10.77.{self.state.id}.0/24, hosts {', '.join(names)}."]
        if controls:
            info = self.etcd
            admin = self.folder / "admin"
            lines += [f"Control hosts {', '.join(c.name for c in controls)} run one {len(controls)}-member etcd "
                      "cluster (TLS, client certificates). kctl reaches it with (every command below):",
                      f"  export KCTL_STORE={info.address}",
                      f"  export KCTL_ETCD_CAFILE={info.ca_file} KCTL_ETCD_CERTFILE={info.cert_file} "
                      f"KCTL_ETCD_KEYFILE={info.key_file}",
                      f"  export KCTL_ETCD_STATE_DIR={admin}   # the store's key file and known_hosts (local side)",
                      f"  # or, as flags: {' '.join(self.etcd_store_args())} --etcd-state-dir {admin}"]
        else:
            lines += ["Use it with a store of its own (make testbed-down removes it; stop the daemon first):",
                      f"  export KCTL_STORE={self.folder}/kctl.db"]
        if controls:
            lines += [f"  {kctl} init   # the store's key file in $KCTL_ETCD_STATE_DIR (copied to each control host)"]
        for host in self.hosts:
            lines.append(f"  {kctl} node add {host.name} {' '.join(self.node_add_args(host.name))}")
        if self.hosts:
            lines.append(f"  for h in {' '.join(h.name for h in self.hosts)}; do {kctl} node trust $h --yes; done"
                         f"   # the keys in {_display(self.known_hosts)}")
        if controls:
            lines.append("A daemon in each control host (its own hostname: its own leader identity; its own etcd "
                         "member first), on a copy of the state folder:")
            for host in controls:
                state = f"{self.folder}/{host.name}/state"
                order = "etcd://" + ",".join(c.endpoint for c in [host, *(c for c in controls if c is not host)])
                lines.append(f"  mkdir -p {state} && cp -a {admin}/. {state}/ && KCTL_ETCD_STATE_DIR={state} "
                             f"KCTL_STORE={order} {bed} exec {host.name}{where} -- {kctl} daemon "
                             f"{'' if self.hosts else '--no-agents '}--leader-elect-lease-duration 6 "
                             "--leader-elect-renew-deadline 4 --leader-elect-retry-period 1 "
                             f">{self.folder}/{host.name}/daemon.log 2>&1 &")
            lines += [f"  {kctl} get lease kctl-controller-manager -n kube-system   # which control host leads",
                      f"  {bed} cut c1{where}    # if c1 leads: another takes over within the lease; `heal c1` after"]
        if not self.hosts:
            return "\n".join(lines)
        if not controls:
            lines.append(f"  {kctl} daemon --node-monitor-grace-period 10 --default-toleration-seconds 5 &")
        lines.append(f"  {kctl} apply -f examples/web/ && {kctl} scale deployment web -n demo --replicas 3")
        lines.append(f"  {kctl} get pods -n demo -o wide -w     # web's 3 replicas spread over the hosts")
        lines.append("Service demo/web is a NodePort (30080): one port on any host's address reaches every replica,")
        lines.append("wherever it runs (kube-proxy rules on each host, routes between the hosts' pod networks):")
        addresses = " ".join(h.address for h in self.hosts)
        lines.append(f"  for ip in {addresses}; do curl -s http://$ip:30080/; done")
        lines.append(f"  {kctl} get endpointslices -n demo      # the replicas' pod IPs behind it")
        lines.append(f"  {bed} cut h1{where}    # h1 NotReady, then its pods move; `heal h1` brings it back")
        return "\n".join(lines)


def _remove_namespace(host: Host | ControlHost) -> None:
    """End every process in a host's network namespace, delete its link and the namespace."""
    stop_pids(_pids_in_netns(host.netns))
    run_command(["ip", "link", "del", host.veth], check=False)
    if os.path.exists(f"/run/netns/{host.netns}"):
        run_command(["ip", "netns", "del", host.netns], check=False)


def _remove_control_host(host: ControlHost) -> None:
    """End every process in a control host's namespace (its etcd member, daemons), delete its link and netns."""
    _remove_namespace(host)
    shutil.rmtree(host.folder, ignore_errors=True)


def _remove_host(host: Host) -> None:
    """Stop a host's Podman service, remove its containers, end its processes, delete its link and netns."""
    _stop_ours(host.podman_pid, host.folder)
    if os.path.exists(f"/run/netns/{host.netns}") and Path(host.folder, "storage").exists():
        for what in (["pod", "rm", "-a", "-f", "-t", "0"], ["rm", "-a", "-f", "-t", "0"]):
            run_command([*host.nsenter(), "podman", *host.podman_args(), *what], check=False, env=podman_env(),
                 timeout=PODMAN_TIMEOUT)
    _stop_ours(host.sshd_pid, host.folder)
    _remove_namespace(host)  # sshd sessions, conmon, a node-mode daemon...


def _choose_id(folder: Path) -> int:
    """A bed id from the folder's path, moved on while another bed (or anything) uses its names or subnet."""
    start = int(hashlib.sha256(str(folder).encode()).hexdigest(), 16) % 254
    links = json.loads(run_command(["ip", "-j", "link", "show"]).stdout or "[]")
    names = {link.get("ifname") for link in links}
    addresses = json.loads(run_command(["ip", "-j", "-4", "addr", "show"]).stdout or "[]")
    used = {int(info["local"].split(".")[2]) for link in addresses for info in link.get("addr_info", ())
            if info.get("local", "").startswith("10.77.")}
    netns = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    for step in range(254):
        candidate = (start + step) % 254 + 1
        if (f"kb{candidate}" not in names and candidate not in used
                and not any(name.startswith(f"kctl-{candidate}-") for name in netns)):
            return candidate
    raise TestBedError("no free bed id: 254 beds (or 10.77.x.0/24 subnets) are in use")


def _display(path: str | os.PathLike) -> str:
    """path relative to the working directory when it is below it."""
    with contextlib.suppress(ValueError):
        return str(Path(path).relative_to(Path.cwd()))
    return str(path)


# -- the command -----------------------------------------------------------------------------------

def _print_status(bed: TestBed) -> None:
    print(f"bed {bed.folder}: id {bed.state.id}, bridge {bed.state.bridge}, "
          f"control side {bed.state.gateway}")
    yes_no: Callable[[bool], str] = lambda flag: "yes" if flag else "no"  # noqa: E731
    if bed.hosts:
        print(f"{'HOST':<6}{'ADDRESS':<16}{'LINK':<6}{'SSHD':<6}{'PODMAN':<8}SOCKET")
        for row in bed.status():
            print(f"{row['name']:<6}{row['address']:<16}{row['link']:<6}{yes_no(row['sshd']):<6}"
                  f"{yes_no(row['podman']):<8}{row['socket']}")
    if bed.control_hosts:
        print(f"{'HOST':<6}{'ADDRESS':<16}{'LINK':<6}{'ETCD':<6}{'NETNS':<8}ETCD URL")
        for row in bed.control_status():
            print(f"{row['name']:<6}{row['address']:<16}{row['link']:<6}{yes_no(row['etcd']):<6}"
                  f"{yes_no(row['netns']):<8}{row['url']}")


def _exec(bed: TestBed, name: str, argv: list[str]) -> int:
    """Run argv inside control host `name` in the foreground (its network namespace and hostname)."""
    if not argv:
        raise TestBedError(f"exec {name}: give the command to run after --")
    command = bed.control_command(name, argv)
    os.execvp(command[0], command)
    return 1  # not reached


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kctl.testing.testbed",
                                     description="Several Podman hosts on this machine, for kctl's multi-host tests.")
    parser.add_argument("command", choices=("up", "down", "status", "add", "cut", "heal", "rekey", "exec"))
    parser.add_argument("host", nargs="?", help="the host (hN, or cN for cut, heal and exec)")
    parser.add_argument("--dir", default=str(DEFAULT_FOLDER), help=f"the bed's folder (default {DEFAULT_FOLDER})")
    parser.add_argument("-n", type=int, default=3, help="hosts to bring up (up; default 3)")
    parser.add_argument("--control", type=int, default=0,
                        help="control hosts to bring up, each with one member of one etcd cluster (up; default 0)")
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[argv.index("--") + 1:] if "--" in argv else []  # exec cN [--dir DIR] -- COMMAND...
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    bed = TestBed(args.dir)
    needs_host = args.command in ("cut", "heal", "rekey", "exec")
    if needs_host != bool(args.host):
        parser.error(f"{args.command} {'needs a host name' if needs_host else 'takes no host name'}")
    if command and args.command != "exec":
        parser.error(f"{args.command} takes no command (only exec does)")
    try:
        if args.command == "up":
            bed.up(args.n, control=args.control)
            bed.detach()
            _print_status(bed)
            print()
            print(bed.usage())
        elif args.command == "down":
            existed = bed.state_file.exists()
            bed.down()
            print(f"test bed in {bed.folder} removed" if existed else f"no test bed in {bed.folder}")
        elif args.command == "status":
            _print_status(bed)
        elif args.command == "add":
            host = bed.add()
            add = " ".join(bed.node_add_args(host.name))
            print(f"{host.name} up at {host.address}: kctl node add {host.name} {add}")
        elif args.command == "rekey":
            key = bed.rekey(args.host)
            print(f"{args.host} has a new host key: {key.type} {key.fingerprint}")
        elif args.command == "exec":
            return _exec(bed, args.host, command)
        else:
            getattr(bed, args.command)(args.host)
            print(f"{args.host}: link {'down (cut off)' if args.command == 'cut' else 'up'}")
    except TestBedError as error:
        print(f"testbed: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
