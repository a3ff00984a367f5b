"""`kctl image ls` and `kctl image push` against a real store; hosts' Podman are MemoryRuntimes."""

from __future__ import annotations

import json

import pytest

from kctl.runtime.interface import RuntimeError_
from kctl.runtime.memory import MemoryRuntime

IMAGE = "localhost/app:1"


def node(name: str, images: list[tuple[list[str], int]] = ()) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"images": [{"names": names, "sizeBytes": size} for names, size in images]}}


def add_nodes(server, *nodes: dict) -> None:
    for obj in nodes:
        status = obj.pop("status")
        created = server.create(obj)
        server.update_status({**created, "status": status})


@pytest.fixture
def hosts(monkeypatch):
    """The control host (holding IMAGE) and one MemoryRuntime per node name, patched into kctl.cli.image."""
    from kctl.cli import image

    control = MemoryRuntime(images={IMAGE})
    runtimes: dict[str, MemoryRuntime] = {}

    def node_runtime(obj: dict) -> MemoryRuntime:
        name = obj["metadata"]["name"]
        if name == "down":
            raise RuntimeError_("ssh to 10.0.0.9:22 failed: Connection refused")
        return runtimes.setdefault(name, MemoryRuntime())

    monkeypatch.setattr(image, "open_source", lambda url: control)
    monkeypatch.setattr(image, "node_runtime", node_runtime)
    return control, runtimes


def test_ls_table(kctl, server):
    """One row per image name: its size and the nodes holding it."""
    add_nodes(server, node("n1", [(["localhost/busybox:demo"], 2_130_000), (["localhost/app:1"], 5_000)]),
              node("n2", [(["localhost/busybox:demo"], 2_130_000)]))
    result = kctl("image", "ls")
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        "IMAGE                    SIZE      NODES",
        "localhost/app:1          5 kB      n1",
        "localhost/busybox:demo   2.13 MB   n1,n2",
    ]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_ls_json_and_yaml(kctl, server, fmt):
    """-o json / -o yaml give name, sizeBytes and nodes of each image."""
    from kctl.manifests.yamlio import load_documents

    add_nodes(server, node("n1", [(["localhost/app:1"], 5_000)]))
    result = kctl("image", "ls", "-o", fmt)
    assert result.code == 0, result.err
    data = json.loads(result.out) if fmt == "json" else load_documents(result.out, source="-")[0][2]
    assert data == [{"name": "localhost/app:1", "sizeBytes": 5000, "nodes": ["n1"]}]


def test_ls_without_images_and_bad_output(kctl, server):
    """No images: a note on stderr, exit 0; an unknown -o: one error line, exit 1."""
    add_nodes(server, node("n1"))
    empty = kctl("image", "ls")
    assert (empty.code, empty.out, empty.err) == (0, "", "No images found.\n")
    bad = kctl("image", "ls", "-o", "wide")
    assert bad.code == 1 and bad.err.startswith("error: unable to match a printer") and len(bad.err.splitlines()) == 1


def test_push_to_nodes(kctl, server, hosts):
    """Copied to a node lacking it, 'already present' where it is; exit 0."""
    control, runtimes = hosts
    add_nodes(server, node("n1"), node("n2"))
    runtimes["n2"] = MemoryRuntime(images={IMAGE})
    result = kctl("image", "push", IMAGE, "--node", "n1", "--node", "n2")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith(f"node/n1 copied {IMAGE} (") and lines[1] == "node/n2 already present"
    assert IMAGE in runtimes["n1"].images and runtimes["n2"].count("load_image") == 0


def test_push_all_reports_each_node_and_fails_if_one_did(kctl, server, hosts):
    """--all: one line per node; a node that cannot be reached fails the command (exit 1)."""
    _, runtimes = hosts
    add_nodes(server, node("a"), node("down"))
    result = kctl("image", "push", IMAGE, "--all")
    assert result.code == 1
    assert result.out.splitlines()[1] == "node/down failed: ssh to 10.0.0.9:22 failed: Connection refused"
    assert result.out.splitlines()[0].startswith("node/a copied")
    assert result.err == f"error: {IMAGE} could not be copied to 1 of 2 node(s)\n"


@pytest.mark.parametrize(("args", "code", "message"), [
    (["localhost/missing:1", "--node", "n1"], 1, "error: image localhost/missing:1 not found on the control host"),
    ([IMAGE, "--node", "nope"], 3, 'Error from server (NotFound): nodes "nope" not found'),
    ([IMAGE], 1, "error: give --node NAME (repeatable) or --all"),
    ([IMAGE, "--all", "--node", "n1"], 1, "error: give --node NAME (repeatable) or --all"),
    ([IMAGE, "--all", "--source", "http://x"], 1, "error: --source 'http://x' is not a unix:// or ssh:// URL"),
], ids=["image-missing", "node-missing", "no-target", "both-targets", "bad-source"])
def test_push_errors(kctl, server, hosts, args, code, message):
    """Bad input: one line on stderr, a distinct exit status, nothing copied."""
    _, runtimes = hosts
    add_nodes(server, node("n1"))
    result = kctl("image", "push", *args)
    assert result.code == code
    assert result.err.startswith(message) and len(result.err.splitlines()) == 1
    assert all(r.count("load_image") == 0 for r in runtimes.values())


def test_push_without_a_local_podman(kctl, server, monkeypatch, tmp_path):
    """No Podman answers on the daemon's sockets: one line naming them and --source."""
    from kctl.daemon import localpodman

    monkeypatch.setattr(localpodman, "local_sockets", lambda: (str(tmp_path / "a.sock"), str(tmp_path / "b.sock")))
    add_nodes(server, node("n1"))
    result = kctl("image", "push", IMAGE, "--node", "n1")
    assert result.code == 1
    assert result.err == (f"error: no Podman answers on unix://{tmp_path}/a.sock or unix://{tmp_path}/b.sock; "
                          "give the control host's with --source URL\n")
