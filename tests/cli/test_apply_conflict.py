"""`kctl apply` of a file whose resourceVersion is stale fails with Conflict (exit 5)."""

from __future__ import annotations


def test_two_people_edit_the_same_get_output(kctl, tmp_path):
    """Both `get -o yaml`, both edit, both apply: the second apply is a Conflict, the first edit stays."""
    assert kctl("create", "-f", "-", input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
                "data: {k: base}\n").code == 0
    got = kctl("get", "configmap", "c", "-o", "yaml")
    assert got.code == 0 and "resourceVersion" in got.out
    alice, bob = tmp_path / "alice.yaml", tmp_path / "bob.yaml"
    alice.write_text(got.out.replace("k: base", "k: alice"))
    bob.write_text(got.out.replace("k: base", "k: bob"))
    first = kctl("apply", "-f", str(alice))
    assert first.code == 0 and "configmap/c configured" in first.out
    second = kctl("apply", "-f", str(bob))
    assert second.code == 5, second
    assert "configured" not in second.out
    assert ("error when applying patch: Operation cannot be fulfilled on configmaps \"c\": the object has been "
            "modified; please apply your changes to the latest version and try again") in second.err
    assert len(second.err.strip().splitlines()) == 1
    assert "k: alice" in kctl("get", "configmap", "c", "-o", "yaml").out
