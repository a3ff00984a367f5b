"""`kctl create`/`apply` of objects over Kubernetes' size limits: its message, exit 6, nothing stored."""

from __future__ import annotations

import pytest

MiB = 1024 * 1024


@pytest.mark.parametrize("command, size, message", [
    ("create", 2 * MiB, 'ConfigMap "big" is invalid: []: Too long: must have at most 1048576 bytes'),
    ("create", 4 * MiB, "Request entity too large: limit is 3145728"),
    ("apply", 2 * MiB, "Request entity too large: limit is 3145728"),
], ids=["create-2MiB", "create-4MiB", "apply-2MiB"])
def test_large_configmap_is_refused(kctl, tmp_path, command, size, message):
    """A ConfigMap over 1 MiB of data (or a request over 3 MiB) is refused with Kubernetes' words."""
    path = tmp_path / "big.yaml"
    path.write_text(f'apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata:\n  a: "{"x" * size}"\n')
    result = kctl(command, "-f", str(path))
    assert result.code == 6, result.err[:300]
    assert message in result.err
    assert len(result.err.strip().splitlines()) == 1 and len(result.err) < 400
    assert kctl("get", "configmap", "big").code == 3
