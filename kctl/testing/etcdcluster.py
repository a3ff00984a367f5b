"""Real etcd clusters on this machine, for tests, benchmarks and the test bed: `EtcdCluster`.

`EtcdCluster(folder, members=3).start()` runs N members of Debian's etcd-server (/usr/bin/etcd,
3.4) as processes of their own, with TLS by default: a CA, one certificate per member (its host
address, 127.0.0.1 and localhost; serverAuth+clientAuth, used for the peer and the client
listeners) and one client certificate, all made with `cryptography` (EC P-256) and written 0600
in the folder. Members demand client certificates (--client-cert-auth, --peer-client-cert-auth),
so `cluster.tls` (an EtcdTLS) is what a client needs and `cluster.address` is the `etcd://h:p,...`
address kctl's --store takes. Auto-compaction is off (kctl compacts itself); fsync stays on.

    with EtcdCluster(tmp / "etcd", members=3) as cluster:   # start() ... stop()
        store = EtcdStore(parse_address(cluster.address + "/t1"), state_path=..., tls=cluster.tls)
        cluster.kill(0); cluster.restart(0); cluster.wait_healthy()

Ports: free ones (bind-probed below the kernel's ephemeral range, re-chosen when a member finds
its port taken) unless base_port is given (member i: client base+2i, peer base+2i+1); a member
in a network namespace of its own (netns[i], run through `ip netns exec`) listens on hosts[i]
with etcd's usual 2379/2380 (hosts[i] must be reachable from this process: a bridge, as the
test bed's). Members are tracked by PID; stop(), a failed start() and the exit
of the Python process that started them (unless `detach()`ed) end them and remove their data;
with die_with_parent (the test fixtures) they die with the thread that started them even when
that process is SIGKILLed (`setpriv --pdeathsig KILL`; not for a cluster that is to be detached).
`cluster.json` in the folder records what runs, so `EtcdCluster.attach(folder)` (another
process, `python -m kctl.testing.etcdcluster down`) can stop a detached cluster.

Used by tests/conftest.py (the `etcd_cluster`/`etcd_cluster3` fixtures: the store contract
suite, tests/cli, tests/integration/etcd), kctl.testing.testbed (a member per control host),
benchmarks, and by hand:

    python -m kctl.testing.etcdcluster up|down|status [--dir DIR] [-n 3] [--no-tls]
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import datetime
import ipaddress
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kctl.testing import processes
from kctl.testing.processes import alive, spawn, stop_pids, wait_ended, wait_listening

if TYPE_CHECKING:
    from kctl.store.etcd.address import EtcdTLS

ETCD = "/usr/bin/etcd"
STATE_FILE = "cluster.json"
START_TIMEOUT = 30.0            # seconds until every member answers /health
STOP_GRACE = 2.0                # seconds between SIGTERM and SIGKILL (stop() deletes the data anyway)
QUOTA_BACKEND_BYTES = 1 << 30   # 1 GiB (etcd: 2 GiB): a runaway test hits NOSPACE sooner
PORT_RANGE = (20000, 32000)     # below Linux's ephemeral range: outgoing connections never take them
NETNS_PORTS = (2379, 2380)      # a member alone in its namespace uses etcd's usual ports
START_ATTEMPTS = 3              # fresh ports after "address already in use"


class EtcdClusterError(Exception):
    """A cluster could not start, or a member did not come back; the message names the member and its log."""


@dataclass
class EtcdMember:
    """One member: its name, where it listens, its data and log, and its process (pid None: not running)."""

    name: str
    host: str
    client_port: int
    peer_port: int
    data_dir: str
    log: str
    netns: str | None = None
    scheme: str = "https"
    pid: int | None = None

    @property
    def client_url(self) -> str:
        return f"{self.scheme}://{_host_port(self.host, self.client_port)}"

    @property
    def peer_url(self) -> str:
        return f"{self.scheme}://{_host_port(self.host, self.peer_port)}"

    @property
    def endpoint(self) -> str:
        """host:port of the client listener, as an etcd:// address lists it."""
        return _host_port(self.host, self.client_port)


class EtcdCluster:
    """N etcd members on this machine (see the module docstring); a context manager: start() ... stop()."""

    def __init__(self, folder: str | os.PathLike, *, members: int = 1, host: str = "127.0.0.1", tls: bool = True,
                 base_port: int | None = None, netns: list[str | None] | None = None,
                 hosts: list[str] | None = None, max_txn_ops: int = 128,
                 quota_backend_bytes: int = QUOTA_BACKEND_BYTES, binary: str = ETCD,
                 die_with_parent: bool = False) -> None:
        if members < 1:
            raise ValueError(f"an etcd cluster needs at least one member, not {members}")
        if netns is not None and len(netns) != members:
            raise ValueError(f"netns lists {len(netns)} namespaces for {members} members")
        if hosts is not None and len(hosts) != members:
            raise ValueError(f"hosts lists {len(hosts)} addresses for {members} members")
        self.folder = Path(folder).resolve()
        self.use_tls = tls
        self.base_port = base_port
        self.max_txn_ops = max_txn_ops
        self.quota_backend_bytes = quota_backend_bytes
        self.binary = binary
        self.die_with_parent = die_with_parent
        self.token = f"kctl-test-{secrets.token_hex(4)}"
        self._netns = list(netns) if netns is not None else [None] * members
        self._hosts = list(hosts) if hosts is not None else [host] * members
        self.members: list[EtcdMember] = []
        self._processes: dict[int, subprocess.Popen] = {}
        self._atexit_registered = False
        self._owner = os.getpid()
        self._place_members()

    # -- what clients need -------------------------------------------------------------------------

    @property
    def endpoints(self) -> tuple[str, ...]:
        """Every member's client host:port."""
        return tuple(member.endpoint for member in self.members)

    @property
    def client_urls(self) -> tuple[str, ...]:
        """Every member's client URL (https://host:port)."""
        return tuple(member.client_url for member in self.members)

    @property
    def address(self) -> str:
        """The etcd://host:port,... address of the cluster (no prefix: append "/prefix" for one)."""
        return "etcd://" + ",".join(self.endpoints)

    @property
    def pki(self) -> Path:
        return self.folder / "pki"

    @property
    def ca_file(self) -> Path:
        return self.pki / "ca.crt"

    @property
    def client_cert_file(self) -> Path:
        return self.pki / "client.crt"

    @property
    def client_key_file(self) -> Path:
        return self.pki / "client.key"

    @property
    def tls(self) -> EtcdTLS | None:
        """The client's CA, certificate and key (None without TLS)."""
        if not self.use_tls:
            return None
        from kctl.store.etcd.address import EtcdTLS
        return EtcdTLS(ca_file=str(self.ca_file), cert_file=str(self.client_cert_file),
                       key_file=str(self.client_key_file))

    def session(self) -> Any:
        """A requests.Session that talks to the members (client certificate, no proxy or CA from the environment)."""
        import requests
        session = requests.Session()
        session.trust_env = False
        if self.use_tls:
            session.verify = str(self.ca_file)
            session.cert = (str(self.client_cert_file), str(self.client_key_file))
        return session

    # -- life cycle --------------------------------------------------------------------------------

    def __enter__(self) -> EtcdCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, *, timeout: float = START_TIMEOUT) -> None:
        """Start every member and wait until each answers /health; on failure stop all and raise EtcdClusterError."""
        if not Path(self.binary).exists():
            raise EtcdClusterError(f"{self.binary} is missing: install etcd-server (`make system`)")
        running = [m.name for m in self.members if m.pid and alive(m.pid)]
        if running:
            raise EtcdClusterError(f"etcd members {', '.join(running)} are running already: stop() first")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        if self.use_tls and not self.client_key_file.exists():
            write_pki(self.pki, [(member.name, member.host) for member in self.members])
        self._register_atexit()
        for attempt in range(START_ATTEMPTS):
            for member in self.members:
                shutil.rmtree(member.data_dir, ignore_errors=True)
            try:
                for index in range(len(self.members)):
                    self._spawn(index)
                self._write_state()
                self.wait_healthy(timeout=timeout)
                return
            except EtcdClusterError as error:
                taken = self.base_port is None and "address already in use" in str(error)
                self._stop_members()
                if not taken or attempt == START_ATTEMPTS - 1:
                    self._cleanup_data()
                    raise
                self._place_members()
            except BaseException:   # interrupted: leave nothing running
                self._stop_members(grace=0.0)
                self._cleanup_data()
                raise

    def stop(self, *, grace: float = STOP_GRACE) -> None:
        """SIGTERM every member, SIGKILL those left after grace seconds, remove the data dirs."""
        self._stop_members(grace=grace)
        self._cleanup_data()
        self._write_state()

    def kill(self, index: int) -> None:
        """SIGKILL member index (a crash) and wait until it is gone; its data stays for restart()."""
        member = self.members[index]
        if member.pid and self._ours(member):
            with contextlib.suppress(ProcessLookupError):
                os.kill(member.pid, signal.SIGKILL)
            wait_ended([member.pid], 30.0, ended=self._ended)
        member.pid = None
        self._write_state()

    def restart(self, index: int, *, timeout: float = START_TIMEOUT) -> None:
        """Start member index again on its data and wait until it listens (it answers requests only with quorum)."""
        member = self.members[index]
        if member.pid and alive(member.pid):
            raise EtcdClusterError(f"etcd member {member.name} is still running (pid {member.pid})")
        self._spawn(index)
        self._write_state()
        self._wait_listening(member, timeout)

    def wait_healthy(self, *, timeout: float = START_TIMEOUT, members: list[int] | None = None) -> None:
        """Until every member (or those listed) answers /health with true; EtcdClusterError naming one that exited
        or stayed unhealthy, with its log tail."""
        deadline = time.monotonic() + timeout
        waiting = [self.members[i] for i in (members if members is not None else range(len(self.members)))]
        why: dict[str, str] = {}
        with self.session() as session:
            while waiting:
                for member in list(waiting):
                    if not member.pid or not alive(member.pid):
                        raise EtcdClusterError(f"etcd member {member.name} ({member.client_url}) is not running: "
                                               f"{log_tail(member.log)}")
                    try:
                        response = session.get(member.client_url + "/health", timeout=2)
                        if response.ok and response.json().get("health") == "true":
                            waiting.remove(member)
                            continue
                        why[member.name] = f"/health: {response.status_code} {response.text.strip()[:200]}"
                    except Exception as error:  # noqa: BLE001 - any failure is "not healthy yet"
                        why[member.name] = f"/health: {type(error).__name__}"
                if waiting and time.monotonic() > deadline:
                    member = waiting[0]
                    raise EtcdClusterError(f"etcd member {member.name} ({member.client_url}) not healthy within "
                                           f"{timeout:g} s ({why.get(member.name, 'no answer')}): "
                                           f"{log_tail(member.log)}")
                if waiting:
                    time.sleep(0.1)

    def detach(self) -> None:
        """Let the members outlive this Python process (`up`); stop them later with attach(folder).stop()."""
        if self._atexit_registered:
            atexit.unregister(self._kill_on_exit)
            self._atexit_registered = False

    @classmethod
    def attach(cls, folder: str | os.PathLike) -> EtcdCluster:
        """The cluster whose cluster.json is in folder (started by another process), to stop or inspect it."""
        folder = Path(folder).resolve()
        try:
            state = json.loads((folder / STATE_FILE).read_text())
        except (OSError, ValueError) as error:
            raise EtcdClusterError(f"{folder / STATE_FILE}: no etcd cluster recorded there ({error})") from None
        members = [EtcdMember(**entry) for entry in state["members"]]
        cluster = cls(folder, members=len(members), tls=state["tls"], hosts=[m.host for m in members],
                      netns=[m.netns for m in members], max_txn_ops=state["max_txn_ops"],
                      quota_backend_bytes=state["quota_backend_bytes"], binary=state["binary"])
        cluster.token = state["token"]
        cluster.members = members
        return cluster

    # -- inside ------------------------------------------------------------------------------------

    def _place_members(self) -> None:
        """Name the members and choose their ports."""
        scheme = "https" if self.use_tls else "http"
        probes: list[socket.socket] = []
        try:
            self.members = []
            for index, (host, netns) in enumerate(zip(self._hosts, self._netns)):
                if self.base_port is not None:
                    client, peer = self.base_port + 2 * index, self.base_port + 2 * index + 1
                elif netns is not None:
                    client, peer = NETNS_PORTS
                else:
                    client, peer = _free_port(host, probes), _free_port(host, probes)
                name = f"m{index}"
                self.members.append(EtcdMember(name=name, host=host, client_port=client, peer_port=peer,
                                               data_dir=str(self.folder / f"{name}.data"),
                                               log=str(self.folder / f"{name}.log"), netns=netns, scheme=scheme))
        finally:
            for probe in probes:
                probe.close()

    def _command(self, member: EtcdMember) -> list[str]:
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        argv = [self.binary, "--name", member.name, "--data-dir", member.data_dir,
                "--listen-client-urls", member.client_url, "--advertise-client-urls", member.client_url,
                "--listen-peer-urls", member.peer_url, "--initial-advertise-peer-urls", member.peer_url,
                "--initial-cluster", initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", self.token,
                "--max-txn-ops", str(self.max_txn_ops), "--quota-backend-bytes", str(self.quota_backend_bytes),
                "--auto-compaction-retention", "0", "--logger", "zap", "--log-outputs", "stderr"]
        if self.use_tls:
            cert, key, ca = (str(self.pki / f"{member.name}.crt"), str(self.pki / f"{member.name}.key"),
                             str(self.ca_file))
            argv += ["--cert-file", cert, "--key-file", key, "--trusted-ca-file", ca, "--client-cert-auth",
                     "--peer-cert-file", cert, "--peer-key-file", key, "--peer-trusted-ca-file", ca,
                     "--peer-client-cert-auth"]
        if member.netns is not None:
            argv = ["ip", "netns", "exec", member.netns, *argv]
        if self.die_with_parent and shutil.which("setpriv"):   # SIGKILLed with the thread that started it
            argv = ["setpriv", "--pdeathsig", "KILL", "--", *argv]
        return argv

    def _spawn(self, index: int) -> None:
        member = self.members[index]
        Path(member.data_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            process = spawn(self._command(member), log=member.log, cwd=self.folder, env=_member_env())
        except OSError as error:
            raise EtcdClusterError(f"cannot start etcd member {member.name}: {error}") from None
        member.pid = process.pid
        self._processes[process.pid] = process

    def _wait_listening(self, member: EtcdMember, timeout: float) -> None:
        why = wait_listening(member.host, member.client_port, pid=member.pid or 0, timeout=timeout)
        if why == "exited":
            raise EtcdClusterError(f"etcd member {member.name} exited: {log_tail(member.log)}")
        if why:
            raise EtcdClusterError(f"etcd member {member.name} did not listen on {member.endpoint} within "
                                   f"{timeout:g} s: {log_tail(member.log)}")

    def _ours(self, member: EtcdMember) -> bool:
        """Whether member.pid is still the etcd we started (its command line names its data dir)."""
        try:
            return member.data_dir.encode() in Path(f"/proc/{member.pid}/cmdline").read_bytes()
        except OSError:
            return False

    def _stop_members(self, *, grace: float = STOP_GRACE) -> None:
        pids = [m.pid for m in self.members if m.pid and self._ours(m)]
        stop_pids(pids, grace=grace, kill_wait=30.0, ended=self._ended)
        for member in self.members:
            member.pid = None

    def _ended(self, pid: int) -> bool:
        """Whether pid has ended (our children: once reaped, so none is left a zombie)."""
        process = self._processes.get(pid)
        if process is not None:   # a Go process shows Z before its last thread exits: wait for the reaping
            if process.poll() is None:
                return False
            self._processes.pop(pid, None)
            return True
        try:   # our child started by another EtcdCluster of this process (attach): ended once reaped
            return os.waitpid(pid, os.WNOHANG)[0] == pid
        except ChildProcessError:   # not our child (or reaped already)
            return not alive(pid)

    def _cleanup_data(self) -> None:
        for member in self.members:
            shutil.rmtree(member.data_dir, ignore_errors=True)

    def _kill_on_exit(self) -> None:
        """atexit: SIGKILL what still runs (a test run that died before stop()), remove the data."""
        if os.getpid() != self._owner:   # a forked child exiting must not end its parent's cluster
            return
        with contextlib.suppress(Exception):
            self._stop_members(grace=0.0)
            self._cleanup_data()

    def _register_atexit(self) -> None:
        if not self._atexit_registered:
            atexit.register(self._kill_on_exit)
            self._atexit_registered = True

    def _write_state(self) -> None:
        if not self.folder.is_dir():
            return
        state = {"tls": self.use_tls, "token": self.token, "max_txn_ops": self.max_txn_ops,
                 "quota_backend_bytes": self.quota_backend_bytes, "binary": self.binary,
                 "address": self.address, "members": [asdict(m) for m in self.members]}
        path = self.folder / STATE_FILE
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state, indent=1) + "\n")
        temporary.replace(path)


# -- certificates ----------------------------------------------------------------------------------

def write_pki(folder: Path, members: list[tuple[str, str]], *, days: int = 30) -> None:
    """ca.crt/key, <name>.crt/key per (name, host) member and client.crt/key in folder (files 0600)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def save(stem: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        _write_private(folder / f"{stem}.key", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        _write_private(folder / f"{stem}.crt", cert.public_bytes(serialization.Encoding.PEM))

    def issue(common: str, usages: list, sans: list | None) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(name(common)).issuer_name(ca_cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=days))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False,
                                                content_commitment=False, data_encipherment=False,
                                                key_agreement=True, key_cert_sign=False, crl_sign=False,
                                                encipher_only=False, decipher_only=False), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(name("kctl-test-etcd-ca")).issuer_name(name("kctl-test-etcd-ca"))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, content_commitment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    save("ca", ca_key, ca_cert)
    both = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    for member, host in members:
        sans: list = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        with contextlib.suppress(ValueError):
            address = ipaddress.ip_address(host)
            if str(address) != "127.0.0.1":
                sans.append(x509.IPAddress(address))
        if not _is_ip(host) and host != "localhost":
            sans.append(x509.DNSName(host))
        save(member, *issue(f"etcd-{member}", both, sans))
    save("client", *issue("kctl-test-client", [ExtendedKeyUsageOID.CLIENT_AUTH], None))


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o600)


# -- small helpers ---------------------------------------------------------------------------------

def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _free_port(host: str, probes: list[socket.socket]) -> int:
    """A port nothing listens on at host, held by a probe socket (closed by the caller) so no sibling gets it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(200):
        port = random.randrange(*PORT_RANGE)
        probe = socket.socket(family, socket.SOCK_STREAM)
        try:
            probe.bind((host, port))
        except OSError:
            probe.close()
            continue
        probes.append(probe)
        return port
    raise EtcdClusterError(f"no free port on {host} in {PORT_RANGE[0]}-{PORT_RANGE[1]}")


def _member_env() -> dict[str, str]:
    """The members' environment: no ETCD_* variables from ours (etcd reads its flags from them too)."""
    return {key: value for key, value in os.environ.items() if not key.startswith("ETCD_")}


def log_tail(log: str | os.PathLike, *, lines: int = 3) -> str:
    """The last lines of a member's log, joined (etcd's zap logs are JSON lines)."""
    return processes.log_tail(log, lines=lines)


# -- command line ----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """up|down|status an etcd cluster in a folder, for a human (the members outlive `up`)."""
    parser = argparse.ArgumentParser(prog="python -m kctl.testing.etcdcluster", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--dir", default=str(Path(__file__).resolve().parents[2] / ".state" / "etcd"),
                        help="the cluster's folder (default: .state/etcd in the repository)")
    parser.add_argument("-n", "--members", type=int, default=3)
    parser.add_argument("--base-port", type=int, default=None)
    parser.add_argument("--no-tls", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.action == "up":
            with contextlib.suppress(EtcdClusterError):
                EtcdCluster.attach(args.dir).stop()
            cluster = EtcdCluster(args.dir, members=args.members, tls=not args.no_tls, base_port=args.base_port)
            cluster.start()
            cluster.detach()
            _print_status(cluster)
        elif args.action == "down":
            EtcdCluster.attach(args.dir).stop()
        else:
            _print_status(EtcdCluster.attach(args.dir))
    except EtcdClusterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _print_status(cluster: EtcdCluster) -> None:
    for member in cluster.members:
        state = f"pid {member.pid}" if member.pid and alive(member.pid) else "stopped"
        print(f"{member.name}  {member.client_url}  {state}")
    print(f"--store {cluster.address}")
    if cluster.use_tls:
        print(f"--etcd-cafile {cluster.ca_file} --etcd-certfile {cluster.client_cert_file} "
              f"--etcd-keyfile {cluster.client_key_file}")


if __name__ == "__main__":
    sys.exit(main())

