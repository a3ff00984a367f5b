"""A Proxier loads its rules with the real `nft` in a private network namespace, and replaces them on change."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).parent / "sync_probe.py"


def _missing() -> str | None:
    for tool in ("nft", "unshare", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if os.geteuid() != 0:
        return "a network namespace and nft need root"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


@pytest.fixture(scope="module")
def probe() -> dict:
    """What sync_probe.py saw in its throwaway namespace."""
    done = subprocess.run(["unshare", "-n", sys.executable, str(PROBE)], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[3])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_first_sync_loads_the_table(probe):
    """The first sync makes table ip kctl with both Services, and the ClusterIP leads to the endpoint."""
    assert probe["first"] is True
    assert "10.96.0.20" in probe["first-table"] and "10.96.0.30" in probe["first-table"]
    assert probe["first-answers"] == ["10.244.1.2"]


def test_unchanged_sync_loads_nothing(probe):
    """A sync with nothing changed runs no nft -f."""
    assert probe["unchanged"] is True and probe["loads-after-unchanged"] == 1


def test_change_replaces_the_table(probe):
    """A changed endpoint and a removed Service: the table is replaced, the old Service's rules are gone."""
    assert probe["second"] is True
    assert "10.96.0.30" not in probe["second-table"] and "old" not in probe["second-table"]
    assert probe["second-answers"] == ["10.244.1.3"]
    assert probe["old-answers"] != "10.244.1.2"


def test_resync_restores_a_table_deleted_behind_its_back(probe):
    """After the table vanished (a reboot), the resync loads it again."""
    assert probe["resync"] is True and probe["loads"] == 3 and "10.96.0.20" in probe["resync-table"]


def test_table_deleted_by_hand_is_loaded_at_the_next_change(probe):
    """A change after the table was deleted by hand is loaded at once (the proxier reads the table again)."""
    assert probe["after-hand-delete"] is True and probe["after-hand-delete-answers"] == ["10.244.1.2"]


def test_other_tables_untouched(probe):
    """The unrelated table is still there."""
    assert "table ip other" in probe["tables"] and "table ip kctl" in probe["tables"]
