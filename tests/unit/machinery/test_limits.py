"""Object size limits (kctl.machinery.limits) on every write path, with Kubernetes' messages."""

from __future__ import annotations

import base64

import pytest

from kctl.machinery import limits
from kctl.machinery.errors import Invalid, RequestEntityTooLarge

MiB = 1024 * 1024


def _cm(name: str = "big", **data) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _secret(size: int) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"k": base64.b64encode(b"x" * size).decode()}}


@pytest.mark.parametrize("obj, error, message", [
    (_cm(a="x" * (MiB + 1)), Invalid, 'ConfigMap "big" is invalid: []: Too long: must have at most 1048576 bytes'),
    (_cm(a="x" * (MiB // 2), b="y" * (MiB // 2 + 1)), Invalid,
     'ConfigMap "big" is invalid: []: Too long: must have at most 1048576 bytes'),
    (_secret(MiB + 1), Invalid, 'Secret "s" is invalid: data: Too long: must have at most 1048576 bytes'),
    (_cm(a="x" * (40 * MiB)), RequestEntityTooLarge, "Request entity too large: limit is 3145728"),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
      "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
          "containers": [{"name": "c", "image": "busybox:1", "args": ["x" * (2 * MiB)]}]}}}},
     RequestEntityTooLarge, "etcdserver: request is too large"),
], ids=["configmap-over-1MiB", "configmap-sum-over-1MiB", "secret-over-1MiB", "request-over-3MiB",
        "object-over-etcd-limit"])
@pytest.mark.parametrize("path", ["create", "write_all"])
def test_too_large_is_refused(api, obj, error, message, path):
    """Kubernetes' limits and messages, through create and write_all (sync, serve); nothing is stored."""
    if path == "create":
        with pytest.raises(error) as err:
            api.create(obj)
        exc = err.value
    else:
        exc = api.write_all([("create", obj)])[0].error
    assert isinstance(exc, error)
    assert exc.message == message
    assert api.store.count(obj["kind"] + (".apps" if obj["kind"] == "Deployment" else "")) == 0


@pytest.mark.parametrize("size, error, message", [
    (40 * MiB, RequestEntityTooLarge, "Request entity too large: limit is 3145728"),
    (2 * MiB, RequestEntityTooLarge, "Request entity too large: limit is 3145728"),  # twice, with the annotation
    (300 * 1024, Invalid, "metadata.annotations: Too long: must have at most 262144 bytes"),
], ids=["40MiB", "2MiB", "300KiB-last-applied"])
def test_apply_of_large_configmap(api, size, error, message):
    """apply as kubectl: over 256 KiB the last-applied annotation is what is too long."""
    exc = api.apply(_cm(a="x" * size)).error
    assert isinstance(exc, error)
    assert message in exc.message
    assert api.store.count("ConfigMap") == 0


def test_just_under_the_limits_is_accepted(api):
    """A ConfigMap of exactly 1 MiB of data, and a Secret of 1 MiB decoded, are stored."""
    api.create(_cm(a="x" * MiB))
    api.create(_secret(MiB))
    assert api.store.count("ConfigMap") == 1 and api.store.count("Secret") == 1


def test_update_and_patch_are_checked(api):
    """Growing an object past the limit by update or patch is refused; the stored one is unchanged."""
    api.create(_cm(name="c", a="small"))
    rt = api.resource("cm")
    with pytest.raises(Invalid, match="Too long"):
        api.patch(rt, "c", {"data": {"a": "x" * (MiB + 1)}}, patch_type="merge")
    with pytest.raises(RequestEntityTooLarge, match="limit is 3145728"):
        api.patch(rt, "c", {"data": {"a": "x" * (4 * MiB)}}, patch_type="merge")
    live = api.get(rt, "c")
    live["data"] = {"a": "x" * (MiB + 1)}
    with pytest.raises(Invalid, match="Too long"):
        api.update(live)
    assert api.get(rt, "c")["data"] == {"a": "small"}


def test_error_is_typed_for_the_cli():
    """RequestEntityTooLarge is 413 with exit status 6 (bad input)."""
    exc = RequestEntityTooLarge("x")
    assert (exc.reason, exc.code, exc.exit_code) == ("RequestEntityTooLarge", 413, 6)
    assert limits.MAX_REQUEST_BYTES == 3145728 and limits.MAX_OBJECT_BYTES == 1572864
