"""`kctl node add` and `kctl node trust` against a real sshd: host keys are never taken on faith.

The added host is this machine's private Podman behind the private sshd of
tests/integration/conftest.py. Until its key is trusted the daemon refuses to connect;
`node trust --yes` records it and the node becomes Ready; a changed key is shown as such.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import Daemon, wait_for

pytestmark = pytest.mark.integration
REMOTE = "ssh-node"


def ready(api) -> str:
    node = api.get(api.resource("nodes"), REMOTE)
    return next((c["status"] for c in (node.get("status") or {}).get("conditions") or () if c["type"] == "Ready"),
                "")


def test_unknown_key_refused_until_trusted(api, podman_service, sshd, store_file: Path, tmp_path: Path, kctl):
    added = kctl("node", "add", REMOTE, "--ssh", f"{sshd.user}@{sshd.host}:{sshd.port}", "--identity", sshd.identity,
                 "--socket", podman_service.socket, "-l", "site=lab")
    assert added.returncode == 0, added.stderr
    assert f"the host key of {sshd.host}:{sshd.port} is not known" in added.stderr.decode()
    known_hosts = store_file.parent / "known_hosts"
    daemon = Daemon(store=store_file, url=podman_service.url, log=tmp_path / "daemon.log")
    daemon.start()
    try:
        wait_for(lambda: "Host key verification failed" in daemon.log_text(),
                 what="the daemon refusing the unknown host key", daemon=daemon)
        assert ready(api) != "True"
        refused = kctl("node", "trust", REMOTE)  # stdin is not a terminal: nothing recorded without --yes
        assert refused.returncode != 0 and b"confirm with --yes" in refused.stderr
        assert b"SHA256:" in refused.stdout
        assert not known_hosts.exists()
        trusted = kctl("node", "trust", REMOTE, "--yes")
        assert trusted.returncode == 0, trusted.stderr
        assert known_hosts.stat().st_mode & 0o777 == 0o600
        fingerprint = trusted.stdout.decode().split("SHA256:")[1].split()[0]
        wait_for(lambda: ready(api) == "True", what="the node Ready once its key is trusted", daemon=daemon)
        assert kctl("node", "trust", REMOTE).stdout.decode().endswith("These keys are trusted already.\n")
    finally:
        daemon.stop()

    # The host now shows another key than the recorded one: kctl says it CHANGED.
    host_key = Path(sshd.known_hosts).read_text().split()
    other = tmp_path / "other"

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    other_key = (tmp_path / "other.pub").read_text().split()
    known_hosts.write_text(f"{host_key[0]} {other_key[0]} {other_key[1]}\n")
    changed = kctl("node", "trust", REMOTE)
    out = changed.stdout.decode()
    assert changed.returncode != 0 and "has CHANGED" in out and fingerprint in out
    again = kctl("node", "add", "ssh-node-2", "--ssh", f"{sshd.user}@{sshd.host}:{sshd.port}",
                 "--socket", podman_service.socket)
    assert "has CHANGED since it was trusted" in again.stderr.decode()
