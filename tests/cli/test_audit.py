"""`kctl audit`: the writes of the store as a table or JSON, filtered; never object data."""

from __future__ import annotations

import base64
import json

import pytest

MANIFESTS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: default}
data: {k: v}
---
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: v1
kind: Secret
metadata: {name: pw, namespace: team}
stringData: {password: sup3r-s3cret-value}
"""


@pytest.fixture
def history(kctl):
    """A store with a few writes: apply of three objects, a failed create, a delete."""
    assert kctl("apply", "-f", "-", input=MANIFESTS).code == 0
    assert kctl("create", "-f", "-", input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n").code == 4
    assert kctl("delete", "configmap", "app").code == 0
    return kctl


def test_table_lists_every_write_oldest_first(history):
    """One row per write with time, user, verb, namespace, object, version, code and client."""
    result = history("audit")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["TIME", "USER", "VERB", "NAMESPACE", "OBJECT", "RV", "CODE", "CLIENT"]
    assert len(lines) == 6, result.out
    assert [line.split()[3] for line in lines[1:]] == ["create"] * 4 + ["delete"]
    assert "configmaps/app" in lines[1] and "201" in lines[1] and lines[1].endswith("(apply)")
    assert "namespaces/team" in lines[2]
    assert "team" in lines[3].split() and "secrets/pw" in lines[3]
    assert "409 AlreadyExists" in lines[4] and lines[4].endswith("(create)")
    assert "200" in lines[5] and lines[5].endswith("(delete)")


@pytest.mark.parametrize("args, expected", [
    (["--verb", "delete"], [("delete", "configmaps", "app")]),
    (["--kind", "cm"], [("create", "configmaps", "app"), ("create", "configmaps", "app"),
                        ("delete", "configmaps", "app")]),
    (["--kind", "Secret"], [("create", "secrets", "pw")]),
    (["-n", "team"], [("create", "secrets", "pw")]),
    (["--user", "nobody-at-all"], []),
    (["--since", "1h", "--verb", "create", "--kind", "namespaces"], [("create", "namespaces", "team")]),
], ids=["verb", "kind-short", "kind-Kind", "namespace", "user", "since-and-more"])
def test_filters_with_json_output(history, args, expected):
    """-o json is an audit.k8s.io/v1 EventList of the selected events."""
    result = history("audit", "-o", "json", *args)
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["kind"] == "EventList" and doc["apiVersion"] == "audit.k8s.io/v1"
    got = [(e["verb"], e["objectRef"]["resource"], e["objectRef"]["name"]) for e in doc["items"]]
    assert got == expected


def test_user_filter_matches_the_os_user(history):
    """The writer is the local user."""
    import getpass

    doc = json.loads(history("audit", "-o", "json", "--user", getpass.getuser()).out)
    assert len(doc["items"]) == 5


def test_no_secret_value_in_output(history):
    """Neither the Secret's value nor its base64 appears in the table or the JSON."""
    secret = "sup3r-s3cret-value"
    encoded = base64.b64encode(secret.encode()).decode()
    for args in ([], ["-o", "json"]):
        out = history("audit", *args).out
        assert secret not in out and encoded not in out


@pytest.mark.parametrize("args, message", [
    (["--since", "soon"], 'invalid argument "soon" for "--since" flag'),
    (["-o", "yaml"], 'unable to match a printer suitable for the output format "yaml"'),
], ids=["bad-since", "bad-output"])
def test_bad_flags_are_one_line(kctl, args, message):
    """A bad flag value: one `error:` line, exit 1."""
    result = kctl("audit", *args)
    assert result.code == 1
    assert message in result.err and len(result.err.strip().splitlines()) == 1


def test_empty_log_says_so(kctl, store_path):
    """No writes yet: a note on stderr, exit 0."""
    result = kctl("audit")
    assert result.code == 0 and "No audit events found." in result.err


def test_with_server_runs_on_the_control_host(kctl, monkeypatch):
    """--server ssh://...: `kctl audit` with the same filters runs over ssh where the log is."""
    import subprocess

    seen = []

    def fake_run(argv, *args, **kwargs):
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    result = kctl("--server", "ssh://ops@control.example:2222/srv/kctl.db", "audit", "--verb", "delete", "-o", "json")
    assert result.code == 0, result.err
    (argv,) = seen
    assert argv[0] == "ssh" and "ops@control.example" in argv
    assert argv[-1] == "kctl --store /srv/kctl.db audit --verb delete --output json"
