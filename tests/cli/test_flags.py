"""kubectl-style flags through the real entry point: `--flag=true|false`, global flags anywhere, durations."""

from __future__ import annotations

import pytest

POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}, labels: {{app: web}}}}
spec: {{containers: [{{name: c, image: busybox}}]}}
"""


@pytest.fixture
def pods(kctl):
    """Pod `one` in default and pod `two` in namespace demo."""
    assert kctl("create", "namespace", "demo").code == 0
    docs = POD.format(name="one", namespace="default") + "---\n" + POD.format(name="two", namespace="demo")
    assert kctl("apply", "-f", "-", input=docs).code == 0


def _names(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize(("args", "lines"), [
    (["get", "pods", "--no-headers=true"], ["one"]),
    (["get", "pods", "--no-headers=false"], ["NAME", "one"]),
    (["get", "pods", "--no-headers=1"], ["one"]),
    (["get", "pods", "--no-headers"], ["one"]),
    (["get", "pods", "--all-namespaces=true", "--no-headers"], ["default", "demo"]),
    (["get", "pods", "-A=true", "--no-headers"], ["default", "demo"]),
    (["get", "pods", "--all-namespaces=false", "--no-headers=yes"], ["one"]),
    (["-n", "demo", "get", "pods", "--no-headers"], ["two"]),
    (["get", "-n", "demo", "pods", "--no-headers"], ["two"]),
    (["get", "pods", "-n=demo", "--no-headers"], ["two"]),
    (["-n", "demo", "version", "-o", "json"], ["{"]),
], ids=["no-headers=true", "no-headers=false", "no-headers=1", "no-headers", "all-namespaces=true", "-A=true",
        "all-namespaces=false", "-n-before-verb", "-n-after-verb", "-n=demo", "-n-before-verb-without-namespaces"])
def test_boolean_flags_and_namespace_as_kubectl(kctl, pods, args, lines):
    """Boolean flags take `=true|false|1|yes`, and -n may stand before the verb, as kubectl allows."""
    result = kctl(*args)
    assert result.code == 0, result.err
    assert _names(result.out)[:len(lines)] == lines and len(_names(result.out)) >= len(lines)
    if args[-1] == "--no-headers" or "--no-headers=true" in args:
        assert len(_names(result.out)) == len(lines)


def test_show_labels_true(kctl, pods):
    """`--show-labels=true` adds the LABELS column."""
    result = kctl("get", "pods", "--show-labels=true")
    assert result.code == 0 and "LABELS" in result.out and "app=web" in result.out


@pytest.mark.parametrize("value", ["maybe", "2"], ids=["word", "number"])
def test_boolean_flag_with_bad_value_is_a_usage_error(kctl, pods, value):
    """`--no-headers=maybe` is refused by the parser (exit 2), naming the flag."""
    result = kctl("get", "pods", f"--no-headers={value}")
    assert result.code == 2 and "--no-headers" in result.err


@pytest.mark.parametrize("where", ["after-verb", "after-args", "equals"], ids=str)
def test_global_store_after_the_verb(kctl, tmp_path, where):
    """`kctl get pods --store X` uses store X, wherever --store stands."""
    other = tmp_path / "other" / "kctl.db"
    other.parent.mkdir()
    assert kctl("--store", str(other), "create", "namespace", "elsewhere").code == 0
    args = {"after-verb": ["get", "--store", str(other), "namespaces", "--no-headers"],
            "after-args": ["get", "namespaces", "--no-headers", "--store", str(other)],
            "equals": ["get", "namespaces", f"--store={other}", "--no-headers"]}[where]
    result = kctl(*args)
    assert result.code == 0, result.err
    assert "elsewhere" in _names(result.out)
    assert "elsewhere" not in _names(kctl("get", "namespaces", "--no-headers").out)


@pytest.mark.parametrize(("wait", "code"), [("--wait=false", 0), ("--wait=true", 0), ("--wait=0", 0)],
                         ids=["false", "true", "0"])
def test_delete_wait_takes_a_value(kctl, pods, wait, code):
    """`delete --wait=false` is kubectl's spelling of --no-wait."""
    result = kctl("delete", "pod", "one", "--grace-period=0", wait)
    assert result.code == code, result.err
    assert result.out == 'pod "one" deleted\n'


@pytest.mark.parametrize("timeout", ["30s", "1m30s", "0", "-1s", "500ms", "10"],
                         ids=["30s", "1m30s", "0", "-1s", "500ms", "bare-seconds"])
def test_delete_timeout_takes_go_durations(kctl, pods, timeout):
    """`delete --timeout` reads Go durations (and bare seconds), as kubectl."""
    result = kctl("delete", "pod", "one", "--grace-period=0", "--timeout", timeout)
    assert result.code == 0, result.err


@pytest.mark.parametrize(("args", "flag"), [
    (["delete", "pod", "one", "--timeout", "soon"], "--timeout"),
    (["wait", "pod/one", "--for=delete", "--timeout=1x"], "--timeout"),
    (["rollout", "status", "deployment/web", "--timeout", "abc"], "--timeout"),
    (["drain", "h1", "--timeout", "1d"], "--timeout"),
    (["apply", "-f", "-", "--watch", "--debounce", "fast"], "--debounce"),
    (["daemon", "--resync", "0.1s"], "--resync"),
    (["daemon", "--node-monitor-grace-period", "forty"], "--node-monitor-grace-period"),
], ids=["delete", "wait", "rollout-status", "drain", "apply-debounce", "daemon-min", "daemon-bad"])
def test_bad_duration_is_a_usage_error(kctl, pods, args, flag):
    """A duration that does not parse is one usage error naming the flag (exit 2), never a traceback."""
    result = kctl(*args)
    assert result.code == 2, (result.out, result.err)
    assert flag in result.err and "Traceback" not in result.err


@pytest.mark.parametrize("timeout", ["-1s", "1m", "0"], ids=["-1s", "1m", "0"])
def test_wait_timeout_durations(kctl, pods, timeout):
    """`wait --timeout=-1s` (a week, as kubectl), 1m and 0 (check once) all accept a met condition."""
    result = kctl("wait", "pod/one", "--for=jsonpath={.metadata.name}=one", f"--timeout={timeout}")
    assert result.code == 0, result.err


def test_daemon_periods_take_durations():
    """The daemon's periods are durations: `--node-monitor-grace-period 1m` is 60 seconds."""
    import click

    from kctl.cli.main import command

    daemon = command().commands["daemon"]
    ctx = daemon.make_context("daemon", ["--node-monitor-grace-period", "1m", "--resync", "1500ms"],
                              resilient_parsing=True)
    assert ctx.params["node_monitor_grace_period"] == 60.0 and ctx.params["resync"] == 1.5
    assert isinstance(daemon, click.Command)


@pytest.mark.parametrize(("argv", "expected"), [
    ("get pods --no-headers=true", "get pods --no-headers"),
    ("get pods --store X", "--store X get pods"),
    ("-n demo get pods", "get -n demo pods"),
    ("delete cm x --wait=false", "delete cm x --no-wait"),
    ("delete cm x --no-wait=false", "delete cm x --wait"),
    ("rollout status deploy/x --store=s -n d", "--store=s rollout status deploy/x -n d"),
    ("exec p -- kctl --store x --wait=false", "exec p -- kctl --store x --wait=false"),
    ("daemon --store x --server ssh://h/db", "daemon --store x --server ssh://h/db"),
    ("--store y daemon --store x", "--store y daemon --store x"),
    ("node add h --ssh root@h --identity k", "node add h --ssh root@h --identity k"),
    ("get pods --identity k", "--identity k get pods"),
    ("patch cm x -p --store", "patch cm x -p --store"),
    ("nosuch --store x", "nosuch --store x"),
    ("-n demo version", "version"),
    ("get pods -n=demo -o=name", "get pods -n demo -o name"),
    ("-n=demo get pods", "get -n demo pods"),
], ids=["bool-true", "global-after-verb", "namespace-before-verb", "bool-false-secondary", "no-form-false",
        "global-in-subcommand", "after-double-dash", "daemon-own-store", "root-and-daemon-store",
        "node-add-own-identity", "identity", "option-value-not-moved", "unknown-verb", "namespace-ignored",
        "short-option-equals", "short-option-equals-before-verb"])
def test_normalise_rewrites(argv, expected):
    """kctl.cli.argv.normalise: the rewrites, and what it must leave alone."""
    from kctl.cli.argv import normalise
    from kctl.cli.main import command

    assert " ".join(normalise(command(), argv.split())) == expected


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30.0), ("1m30s", 90.0), ("1h", 3600.0), ("1.5h", 5400.0), ("500ms", 0.5), ("2us", 2e-6),
    ("3µs", 3e-6), ("10ns", 1e-8), ("0", 0.0), ("-1s", -1.0), ("+2m", 120.0), ("30", 30.0), ("0.3", 0.3),
    (".5s", 0.5), ("1h2m3s", 3723.0),
], ids=lambda v: str(v))
def test_parse_duration(text, seconds):
    """kctl.machinery.times.parse_duration reads Go durations (and bare seconds) as seconds."""
    from kctl.machinery.times import parse_duration

    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "-", "abc", "1x", "1s2", "--1s", "1 s", "1d"], ids=repr)
def test_parse_duration_refuses(text):
    """A text that is no Go duration is a ValueError with Go's wording."""
    from kctl.machinery.times import parse_duration

    with pytest.raises(ValueError, match="time: invalid duration"):
        parse_duration(text)
