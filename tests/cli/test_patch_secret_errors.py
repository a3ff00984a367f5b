"""`kctl patch` of a Secret: a failing patch prints one line without the Secret's value."""

from __future__ import annotations

import base64

import pytest

PLAIN = "hunter2-top-secret"
ENCODED = base64.b64encode(PLAIN.encode()).decode()


@pytest.mark.parametrize("patch_type, patch, words", [
    ("json", '[{"op": "test", "path": "/data/password", "value": "guess"}]', "testing value /data/password failed"),
    ("json", '[{"op": "replace", "path": "/data/nope/x", "value": "v"}]', 'doc is missing path: "/data/nope/x"'),
    ("json", '[{"op": "copy", "from": "/data/password", "path": "/metadata/name"}]', "metadata.name"),
    ("merge", '{"data": "flat"}', "is invalid"),
    ("strategic", '{"data": {"$patch": "bogus"}}', "directive"),
], ids=["test-op", "missing-path", "value-into-name", "merge-type", "strategic-directive"])
def test_patch_error_hides_the_secret(kctl, patch_type, patch, words):
    """Exit non-zero, one stderr line naming what failed, neither the value nor its base64."""
    assert kctl("create", "-f", "-", input=("apiVersion: v1\nkind: Secret\nmetadata: {name: db}\n"
                                            f"data: {{password: {ENCODED}}}\n")).code == 0
    result = kctl("patch", "secret", "db", "--type", patch_type, "-p", patch)
    assert result.code != 0
    assert words in result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert PLAIN not in result.err + result.out and ENCODED not in result.err + result.out
