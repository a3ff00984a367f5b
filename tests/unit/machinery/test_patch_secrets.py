"""A failed patch of a Secret names the path and the operation, never the stored value."""

from __future__ import annotations

import base64

import pytest

from kctl.machinery.errors import APIError

PLAIN = "hunter2-top-secret"
ENCODED = base64.b64encode(PLAIN.encode()).decode()
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "type": "Opaque",
          "data": {"password": ENCODED, "user": base64.b64encode(b"admin-user").decode()}}

PATCHES = [
    ("json", [{"op": "test", "path": "/data/password", "value": "guess"}]),
    ("json", [{"op": "test", "path": "/data", "value": {}}]),
    ("json", [{"op": "test", "path": "/data/nope", "value": "x"}]),
    ("json", [{"op": "remove", "path": "/data/nope"}]),
    ("json", [{"op": "replace", "path": "/data/nope/deeper", "value": "x"}]),
    ("json", [{"op": "add", "path": "/data/password/x", "value": "x"}]),
    ("json", [{"op": "add", "path": "/nowhere/at/all", "value": "x"}]),
    ("json", [{"op": "move", "from": "/data/nope", "path": "/data/b"}]),
    ("json", [{"op": "copy", "from": "/data/password/0", "path": "/data/b"}]),
    ("json", [{"op": "bogus", "path": "/data"}]),
    ("json", [{"op": "add", "path": "/data/x"}]),
    ("json", [{"op": "move", "from": "/data", "path": "/data/x"}]),
    ("json", [{"op": "copy", "from": "/data/password", "path": "/metadata/name"}]),
    ("json", [{"op": "copy", "from": "/data/password", "path": "/metadata/labels"}]),
    ("json", [{"op": "move", "from": "/data/password", "path": "/metadata/namespace"}]),
    ("json", [{"op": "copy", "from": "/data", "path": "/immutable"}]),
    ("json", {"op": "not-a-list"}),
    ("json", ["not-an-object"]),
    ("merge", {"data": "not-a-map"}),
    ("merge", {"metadata": None}),
    ("merge", [1]),
    ("strategic", {"data": {"$patch": "bogus"}}),
    ("strategic", {"$retainKeys": "x"}),
    ("strategic", {"data": {"password": 12}}),
    ("bogus", {}),
]


@pytest.mark.parametrize("patch_type, patch", PATCHES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(PATCHES)])
def test_patch_error_never_shows_the_secret(api, patch_type, patch):
    """Every patch type/op error: the stored value and its base64 appear nowhere in the error."""
    api.create(SECRET)
    with pytest.raises(APIError) as err:
        api.patch(api.resource("secrets"), "db", patch, patch_type=patch_type)
    exc = err.value
    texts = [exc.message, str(exc), *(f"{c.path} {c.message}" for c in getattr(exc, "causes", []) or [])]
    for text in texts:
        assert PLAIN not in text and ENCODED not in text, text
        assert "admin-user" not in text
    assert "\n" not in exc.message
    assert api.get(api.resource("secrets"), "db")["data"]["password"] == ENCODED


@pytest.mark.parametrize("patch, expected", [
    ([{"op": "test", "path": "/data/password", "value": "guess"}],
     "[0]: test /data/password: testing value /data/password failed: test failed"),
    ([{"op": "add", "path": "/nowhere/at/all", "value": "x"}],
     '[0]: add /nowhere/at/all: doc is missing path: "/nowhere/at/all"'),
    ([{"op": "move", "from": "/data/nope", "path": "/data/b"}],
     '[0]: move /data/b: doc is missing from path: "/data/nope"'),
], ids=["test", "missing-path", "missing-from"])
def test_json_patch_error_names_op_and_path(api, patch, expected):
    """The message says which operation failed where, in Kubernetes' words."""
    api.create(SECRET)
    with pytest.raises(APIError) as err:
        api.patch(api.resource("secrets"), "db", patch, patch_type="json")
    assert err.value.message == f"patch is invalid: {expected}"

