"""`kctl set image`'s write when someone else wrote the object first: read again, decide again (retry_on_conflict).

The command reads each object, sets the images and updates it with the resourceVersion it
read; a Conflict re-reads the object and applies the images again (scale.RETRIES attempts
in all, the last Conflict raised). Exercised on kctl.cli.scale._set_images over a real
store, with the object made stale by another writer.
"""

from __future__ import annotations

import pytest

from kctl.cli import scale
from kctl.machinery.errors import Conflict

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "httpd", "image": "busybox:1.36"}]}}}}


def live(api) -> dict:
    return api.get(api.resource("deployments"), "web", namespace="default")


def image(obj: dict) -> str:
    return obj["spec"]["template"]["spec"]["containers"][0]["image"]


def someone_else_writes(api, **labels: str) -> None:
    api.patch(api.resource("deployments"), "web", {"metadata": {"labels": labels}}, patch_type="merge",
              namespace="default")


def test_stale_object_is_read_again_and_written(api, capsys):
    """A stale Deployment gets the image on a fresh read, keeping the other writer's change; one line printed."""
    stale = api.create(DEPLOYMENT)
    someone_else_writes(api, touched="yes")
    missing = scale._set_images(api, api.resource("deployments"), stale, {"httpd": "nginx:1.27"}, dry_run=None)
    assert missing == []
    assert (image(live(api)), live(api)["metadata"]["labels"]) == ("nginx:1.27", {"touched": "yes"})
    assert capsys.readouterr().out == "deployment.apps/web image updated\n"


def test_fresh_read_already_has_the_image(api, capsys):
    """After a Conflict, a fresh read already carrying the image is no write and prints nothing (as kubectl)."""
    stale = api.create(DEPLOYMENT)
    api.patch(api.resource("deployments"), "web",
              {"spec": {"template": {"spec": {"containers": [{"name": "httpd", "image": "nginx:1.27"}]}}}},
              patch_type="merge", namespace="default")
    version = live(api)["metadata"]["resourceVersion"]
    assert scale._set_images(api, api.resource("deployments"), stale, {"httpd": "nginx:1.27"}, dry_run=None) == []
    assert live(api)["metadata"]["resourceVersion"] == version
    assert capsys.readouterr().out == ""


def test_every_attempt_conflicting_raises_conflict(api, capsys, monkeypatch):
    """Conflict on every one of RETRIES attempts raises the last Conflict; nothing printed."""
    created = api.create(DEPLOYMENT)
    calls: list[dict] = []

    def update(obj, *args, **kwargs):
        calls.append(obj)
        raise Conflict("the object has been modified")

    monkeypatch.setattr(api, "update", update)
    with pytest.raises(Conflict):
        scale._set_images(api, api.resource("deployments"), created, {"httpd": "nginx:1.27"}, dry_run=None)
    assert len(calls) == scale.RETRIES
    assert capsys.readouterr().out == ""


def test_set_image_cli_on_a_contended_object(kctl, tmp_path, monkeypatch):
    """Through the command: an update that conflicts once is retried on a fresh read and succeeds (exit 0)."""
    from kctl.apiserver.server import APIServer

    path = tmp_path / "d.yaml"
    path.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
                    "spec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n"
                    "    spec:\n      containers:\n      - {name: httpd, image: busybox:1.36}\n")
    assert kctl("apply", "-f", str(path)).code == 0
    real = APIServer.update
    calls: list[dict] = []

    def update(self, obj, *args, **kwargs):
        calls.append(obj)
        if len(calls) == 1:
            raise Conflict("the object has been modified")
        return real(self, obj, *args, **kwargs)

    monkeypatch.setattr(APIServer, "update", update)
    result = kctl("set", "image", "deploy/web", "httpd=nginx:1.27")
    monkeypatch.setattr(APIServer, "update", real)  # not undo(): the kctl fixture's KCTL_STORE stays set
    assert (result.code, result.out) == (0, "deployment.apps/web image updated\n"), result.err
    assert len(calls) == 2
    assert kctl("get", "deploy/web", "-o", "jsonpath={.spec.template.spec.containers[0].image}").out == "nginx:1.27"
