"""`kctl daemon`, `kctl logs` and `kctl exec` as a user runs them: flags, errors, exit statuses.

logs and exec reach a fake runtime (kctl.cli.logs._runtime_for is replaced); the daemon
runs for real in a subprocess, pointed at a Podman URL nothing listens on.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from kctl.runtime.interface import (LABEL_CONTAINER, LABEL_POD_UID, LABEL_RESTART, ContainerState, ExecResult,
                                    RuntimeError_)


class FakeRuntime:
    """Containers by labels, canned logs and exec results; records the calls."""

    def __init__(self) -> None:
        self.containers: list[ContainerState] = []
        self.calls: list[tuple] = []
        self.exec_result = ExecResult(0, b"out\n", b"")

    def add(self, uid: str, name: str, restart: int, state: str = "running") -> str:
        cid = f"{name}-{restart}"
        self.containers.append(ContainerState(
            id=cid, name=cid, pod_id="p", image="busybox", image_id="i", state=state, started_at=f"t{restart}",
            labels={LABEL_POD_UID: uid, LABEL_CONTAINER: name, LABEL_RESTART: str(restart)}))
        return cid

    def list_containers(self, labels):
        return [c for c in self.containers if all(c.labels.get(k) == v for k, v in labels.items())]

    def logs(self, container_id, *, follow=False, tail=None, since=None, timestamps=False):
        self.calls.append(("logs", container_id, follow, tail, since, timestamps))
        if container_id == "broken-0":
            raise RuntimeError_("connection lost")
        yield f"log of {container_id}\n".encode()

    def exec(self, container_id, argv, *, stdin=None, timeout=None):
        self.calls.append(("exec", container_id, argv, stdin))
        return self.exec_result


POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  nodeName: n1
  containers:
  - {name: a, image: busybox}
  - {name: b, image: busybox}
"""
NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: n1
  annotations: {kctl.io/podman-url: "unix:///nowhere.sock"}
"""


@pytest.fixture
def runtime(kctl, tmp_path, monkeypatch):
    """A Node n1, a two-container Pod `web` bound to it, and the fake runtime behind n1."""
    from kctl.cli import logs

    fake = FakeRuntime()
    monkeypatch.setattr(logs, "_runtime_for", lambda node: fake)
    (tmp_path / "objs.yaml").write_text(NODE + "---\n" + POD)
    assert kctl("apply", "-f", str(tmp_path / "objs.yaml")).code == 0
    fake.uid = kctl("get", "pod", "web", "-o", "jsonpath={.metadata.uid}").out
    return fake


# -- help and flags --------------------------------------------------------------------------

@pytest.mark.parametrize("command, needles", [
    ("daemon", ["--node", "--podman-url", "--workers", "--log-level", "--backoff-initial", "--backoff-max",
                "--scheduler-config", "--event-ttl", "--no-controllers", "--node-monitor-grace-period",
                "--default-toleration-seconds", "--controllers"]),
    ("logs", ["--container", "--follow", "--tail", "--since", "--previous", "--timestamps"]),
    ("exec", ["--container", "--stdin", "--tty", "COMMAND"]),
], ids=["daemon", "logs", "exec"])
def test_help(kctl, command, needles):
    """Each command's help names its flags."""
    result = kctl(command, "--help")
    assert result.code == 0
    for needle in needles:
        assert needle in result.out


@pytest.mark.parametrize("args", [
    ["daemon", "--workers", "0"],
    ["daemon", "--log-level", "loud"],
    ["daemon", "--bogus"],
    ["daemon", "--node-monitor-grace-period", "0"],
    ["daemon", "--default-toleration-seconds", "-1"],
    ["daemon", "--max-endpoints-per-slice", "1001"],
    ["logs"],
    ["exec", "web"],
], ids=["workers-zero", "bad-log-level", "unknown-flag", "grace-zero", "toleration-negative",
        "max-endpoints-over", "logs-no-pod", "exec-no-command"])
def test_bad_flags_are_usage_errors(kctl, args):
    """Bad or missing arguments exit 2 before anything runs."""
    assert kctl(*args).code == 2


def test_bad_scheduler_config_is_one_line_and_exit_2(kctl, tmp_path):
    """A scheduler config the daemon cannot use is refused before anything starts, naming the file."""
    bad = tmp_path / "sched.yaml"
    bad.write_text("profiles: 3\n")
    result = kctl("daemon", "--scheduler-config", str(bad))
    assert result.code == 2
    assert result.err.startswith("error: ") and str(bad) in result.err and len(result.err.strip().splitlines()) == 1


@pytest.mark.parametrize("value, named", [
    ("gc", ['"gc"']),
    ("*,-gc", ['"-gc"']),
    ("replicaset,bogus,-nope", ['"bogus"', '"-nope"']),
    ("-*", ['"-*"']),
], ids=["unknown", "unknown-disabled", "two-unknown", "minus-star"])
def test_unknown_controllers_are_one_line_and_exit_2(kctl, value, named):
    """--controllers naming no controller: one line naming the entry and listing the known ones, exit 2."""
    from kctl.daemon.controllers import CONTROLLER_NAMES

    result = kctl("daemon", "--controllers", value)
    assert result.code == 2
    assert result.err.startswith("error: --controllers: unknown controller") and result.err.count("\n") == 1
    assert all(entry in result.err for entry in named)
    assert all(name in result.err for name in CONTROLLER_NAMES)
    assert "Traceback" not in result.err


@pytest.mark.parametrize("args, expected", [
    ([], {"controllers": "ALL", "control_plane": True, "agents": True}),
    (["--controllers", "*"], {"controllers": "ALL"}),
    (["--controllers", "*,-garbagecollector"], {"controllers": "ALL-garbagecollector"}),
    (["--controllers", "replicaset,deployment"], {"controllers": ("replicaset", "deployment")}),
    (["--no-controllers"], {"control_plane": False, "controllers": "ALL"}),
    (["--no-agents", "--controllers", "job"], {"agents": False, "controllers": ("job",)}),
    (["--event-ttl", "1m", "--node-monitor-grace-period", "12", "--default-toleration-seconds", "7",
      "--workers", "3", "--node", "h1"],
     {"event_ttl": 60.0, "node_monitor_grace_period": 12.0, "default_toleration_seconds": 7.0, "workers": 3,
      "node": "h1", "node_mode": False}),
    (["--max-endpoints-per-slice", "250"], {"max_endpoints_per_slice": 250}),
], ids=["defaults", "star", "star-minus-gc", "two-names", "no-controllers", "no-agents-one-controller",
        "durations-and-names", "max-endpoints-per-slice"])
def test_flags_become_the_daemon_settings(kctl, monkeypatch, args, expected):
    """The command turns its flags into one frozen DaemonSettings and hands it to kctl.daemon.server.run."""
    from kctl.cli import daemon as daemon_cli
    from kctl.daemon import server
    from kctl.daemon.controllers import CONTROLLER_NAMES

    given = []
    monkeypatch.setattr(server, "run", lambda settings, *, api: given.append(settings))
    monkeypatch.setattr(daemon_cli, "configure_logging", lambda level: None)
    result = kctl("daemon", *args)
    assert result.code == 0, result.err
    [settings] = given
    for field, value in expected.items():
        if value == "ALL":
            value = CONTROLLER_NAMES
        elif isinstance(value, str) and value.startswith("ALL-"):
            value = tuple(n for n in CONTROLLER_NAMES if n != value[4:])
        assert getattr(settings, field) == value, field


# -- logs --------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["logs", "nope"], ["exec", "nope", "--", "true"]], ids=["logs", "exec"])
def test_missing_pod_is_not_found(kctl, args):
    """A pod that does not exist: kubectl's NotFound line, exit 3."""
    result = kctl(*args)
    assert result.code == 3
    assert result.err == 'Error from server (NotFound): pods "nope" not found\n'


def test_logs_needs_container_of_several(kctl, runtime):
    """Several containers and no -c: an error listing them, as kubectl words it."""
    result = kctl("logs", "web")
    assert result.code == 1
    assert result.err == "error: a container name must be specified for pod web, choose one of: [a b]\n"


@pytest.mark.parametrize("args, container, options", [
    (["-c", "a"], "a-1", (False, None, None, False)),
    (["-c", "a", "--previous"], "a-0", (False, None, None, False)),
    (["-c", "b", "-f", "--tail", "5", "--timestamps"], "b-0", (True, 5, None, True)),
], ids=["current", "previous", "follow-tail-timestamps"])
def test_logs_streams_chosen_instance(kctl, runtime, args, container, options):
    """The container is found by pod uid + name; --previous is the instance before the current one."""
    runtime.add(runtime.uid, "a", 0, state="exited")
    runtime.add(runtime.uid, "a", 1)
    runtime.add(runtime.uid, "b", 0)
    result = kctl("logs", "web", *args)
    assert result.code == 0, result.err
    assert result.out == f"log of {container}\n"
    assert runtime.calls == [("logs", container, *options)]


def test_logs_since_is_a_time_before_now(kctl, runtime):
    """--since 5m asks for logs from five minutes ago on."""
    runtime.add(runtime.uid, "a", 0)
    assert kctl("logs", "web", "-c", "a", "--since", "5m").code == 0
    since = runtime.calls[0][4]
    assert abs(since - (time.time() - 300)) < 5


@pytest.mark.parametrize("args, message", [
    (["-c", "a"], 'container "a" in pod "web" is waiting to start: ContainerCreating'),
    (["-c", "a", "--previous"], 'previous terminated container "a" in pod "web" not found'),
    (["-c", "zzz"], "container zzz is not valid for pod web"),
], ids=["not-started", "no-previous", "unknown-container"])
def test_logs_errors(kctl, runtime, args, message):
    """No such container instance: one error line, exit 1."""
    result = kctl("logs", "web", *args)
    assert (result.code, result.err) == (1, f"error: {message}\n")


def test_logs_runtime_error_is_one_line(kctl, runtime):
    """A runtime failure while streaming: one error line, exit 1."""
    runtime.add(runtime.uid, "broken", 0)
    runtime.containers[-1].labels[LABEL_CONTAINER] = "a"
    assert kctl("logs", "web", "-c", "a").err == "error: connection lost\n"


def test_logs_bad_since_is_usage_error(kctl, runtime):
    """--since that is no duration exits 2."""
    assert kctl("logs", "web", "-c", "a", "--since", "5x").code == 2


# -- exec --------------------------------------------------------------------------------------

@pytest.mark.parametrize("exit_code", [0, 3, 137], ids=["ok", "failed", "killed"])
def test_exec_output_and_exit_status(kctl, runtime, exit_code):
    """exec prints the command's stdout/stderr and exits with its status."""
    runtime.add(runtime.uid, "a", 0)
    runtime.exec_result = ExecResult(exit_code, b"hello\n", b"warn\n")
    result = kctl("exec", "web", "-c", "a", "--", "sh", "-c", "echo hello")
    assert (result.code, result.out, result.err) == (exit_code, "hello\n", "warn\n")
    assert runtime.calls == [("exec", "a-0", ["sh", "-c", "echo hello"], None)]


def test_exec_stdin_and_default_container(kctl, runtime):
    """-i passes stdin; without -c the first container is used and named on stderr."""
    runtime.add(runtime.uid, "a", 0)
    result = kctl("exec", "-i", "web", "--", "cat", input="data")
    assert result.code == 0
    assert result.err.startswith('Defaulted container "a" out of: a, b')
    assert runtime.calls == [("exec", "a-0", ["cat"], b"data")]


def test_exec_needs_running_container(kctl, runtime):
    """A container with no running instance cannot be exec'd into."""
    runtime.add(runtime.uid, "a", 0, state="exited")
    result = kctl("exec", "web", "-c", "a", "--", "true")
    assert (result.code, result.err) == (1, 'error: unable to upgrade connection: container not found ("a")\n')


def test_unscheduled_pod(kctl, tmp_path):
    """A pod not bound to a node has no logs yet: BadRequest, exit 1."""
    (tmp_path / "p.yaml").write_text(POD.replace("  nodeName: n1\n", ""))
    kctl("apply", "-f", str(tmp_path / "p.yaml"))
    result = kctl("logs", "web", "-c", "a")
    assert result.code == 1 and "not scheduled to a node" in result.err


# -- the daemon, for real ---------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_daemon_registers_node_and_stops_cleanly(tmp_path, sig):
    """On an empty store the daemon registers this host, logs to stderr, and exits 0 on a signal."""
    store = tmp_path / "kctl.db"
    env = {**os.environ, "KCTL_STORE": str(store)}
    proc = subprocess.Popen([sys.executable, "-m", "kctl", "daemon", "--node", "testhost", "--podman-url",
                             f"unix://{tmp_path}/nothing.sock", "--heartbeat", "0.5"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        registered = False
        while time.monotonic() < deadline and not registered:
            out = subprocess.run([sys.executable, "-m", "kctl", "get", "node", "testhost", "-o",
                                  "jsonpath={.metadata.annotations.kctl\\.io/podman-url}"],
                                 env=env, capture_output=True, text=True)
            registered = out.returncode == 0 and out.stdout == f"unix://{tmp_path}/nothing.sock"
            time.sleep(0.2)
        assert registered
        time.sleep(0.5)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = err.decode()
    assert proc.returncode == 0, text
    assert "registered node testhost" in text
    assert "daemon stopped; containers left running" in text
    assert "Traceback" not in text


# -- hand-over without waiting ----------------------------------------------------------------

def _replicaset(name: str, replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"rs": name}},
                     "template": {"metadata": {"labels": {"rs": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


class _ControlDaemon:
    """`kctl daemon --no-agents` (controllers and scheduler only) as a subprocess on one store."""

    def __init__(self, store, log) -> None:
        self.store, self.log = store, log
        self.proc: subprocess.Popen | None = None
        self.started = 0.0

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "kctl", "daemon", "--store", str(self.store),
                                          "--no-agents", "--log-level", "info"], stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=out, env={**os.environ, "KCTL_STORE": str(self.store)})
        self.started = time.monotonic()

    def signal(self, sig: int) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=60)  # on a timeout the process stays known: cleanup() kills it
        self.proc = None
        return code

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def _poll(check, *, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)


def test_daemon_hands_over_without_waiting(tmp_path):
    """SIGTERM releases the leader Lease with every Event recorded; a daemon restarted after kill -9
    on the same host and store takes its own Lease back at once: controllers act within 3 s."""
    from kctl.apiserver.server import APIServer
    from kctl.client import events
    from kctl.machinery.errors import NotFound
    from kctl.store.sqlite import Store

    store_file = tmp_path / "kctl.db"
    store = Store(store_file)
    api = APIServer(store, user="test")
    daemon = _ControlDaemon(store_file, tmp_path / "daemon.log")

    def pods_of(rs: str) -> list[dict]:
        return [p for p in api.list(api.resource("pods"), namespace="default")[0]
                if (p["metadata"].get("labels") or {}).get("rs") == rs]

    def holder() -> str | None:
        try:
            return api.get(api.resource("leases"), "kctl-controller-manager",
                           namespace="kube-system")["spec"].get("holderIdentity")
        except NotFound:
            return None

    try:
        api.create(_replicaset("first", 2))
        daemon.start()
        _poll(lambda: len(pods_of("first")) == 2, what="the first daemon's controllers act")
        first_start = time.monotonic() - daemon.started
        identity = holder()
        assert identity == f"{socket.gethostname()}_0", "a stable identity: hostname and slot"
        api.create(_replicaset("burst", 30))
        _poll(lambda: pods_of("burst"), what="the burst under way")
        assert daemon.signal(signal.SIGTERM) == 0
        assert holder() == "", "SIGTERM released the Lease"
        created = [e for e in api.list(api.resource("events"), namespace="default")[0]
                   if e["reason"] == "SuccessfulCreate" and e["involvedObject"]["name"] == "burst"]
        # one per pod made, as far as client-go's spam filter lets them through (a burst of 25 per object)
        made = min(len(pods_of("burst")), events.SPAM_BURST)
        assert sum(e.get("count", 1) for e in created) == made, "an Event for every pod made"

        daemon.start()
        # and has logged it: the Lease is written before the log line, which a SIGKILL right after would lose
        _poll(lambda: holder() == identity and (tmp_path / "daemon.log").read_text().count(
            f"{identity}: became leader") == 2, what="the second daemon leads")
        assert daemon.signal(signal.SIGKILL) == -signal.SIGKILL
        assert holder() == identity, "kill -9: the Lease is left held"
        api.create(_replicaset("after", 2))
        daemon.start()
        _poll(lambda: len(pods_of("after")) == 2, what="the restarted daemon's controllers act")
        resumed = time.monotonic() - daemon.started
        bound = max(3.0, 1.5 * first_start)  # 3 s, unless this machine starts a daemon slower than that
        assert resumed < bound, f"controllers resumed {resumed:.1f} s after the restart (bound {bound:.1f} s)"
        assert daemon.signal(signal.SIGTERM) == 0
        log = (tmp_path / "daemon.log").read_text()
        assert "Traceback" not in log and log.count(f"{identity}: became leader") == 3
    finally:
        daemon.cleanup()
        store.close()
