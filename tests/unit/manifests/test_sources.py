"""kctl.manifests.sources: reading -f sources (files, directories, stdin, URLs), List expansion, errors."""

from __future__ import annotations

import dataclasses
import functools
import http.server
import io
import os
import threading
import time

import pytest

from kctl.manifests.sources import STDIN, Document, ManifestError, read_manifests
from kctl.manifests.bounds import MAX_INPUT_BYTES

POD = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n"


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}}


def write(directory, name: str, text: str | bytes):
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def failure(paths: list[str], **kwargs) -> str:
    with pytest.raises(ManifestError) as caught:
        read_manifests(paths, **kwargs)
    return str(caught.value)


def test_multi_document_file(tmp_path):
    """Every document of a file, with its index and first line; empty documents skipped."""
    path = write(tmp_path, "pods.yaml", POD.format(name="a") + "---\n# empty\n---\n" + POD.format(name="b"))
    docs = read_manifests([str(path)])
    assert docs == [Document(str(path), 0, 1, pod("a")), Document(str(path), 2, 8, pod("b"))]
    assert [d.where() for d in docs] == [f"{path}: document 1 (line 1)", f"{path}: document 3 (line 8)"]


def test_json_file(tmp_path):
    """A JSON file (any name) is read as one document."""
    path = write(tmp_path, "pod.txt", '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"}}')
    assert [d.obj for d in read_manifests([str(path)])] == [pod("j")]


LISTS = [
    ("List", "v1"),
    ("PodList", "v1"),
    ("DeploymentList", "apps/v1"),
]


@pytest.mark.parametrize(("kind", "api_version"), LISTS, ids=[k for k, _ in LISTS])
def test_list_documents_expand_into_items(tmp_path, kind, api_version):
    """`kind: List` and any *List with items gives its items, each knowing its place."""
    text = (f"apiVersion: {api_version}\nkind: {kind}\nitems:\n"
            + "".join(f"- apiVersion: v1\n  kind: Pod\n  metadata: {{name: p{n}}}\n" for n in range(3)))
    path = write(tmp_path, "list.yaml", POD.format(name="first") + "---\n" + text)
    docs = read_manifests([str(path)])
    assert [d.obj["metadata"]["name"] for d in docs] == ["first", "p0", "p1", "p2"]
    assert docs[3].where() == f"{path}: document 2, item 3"
    assert (docs[3].index, docs[3].item, docs[3].line) == (1, 2, 6)


def test_object_with_items_but_not_a_list_kind_stays_whole(tmp_path):
    """Only *List kinds are expanded; other objects with `items` (a ConfigMap's data) stay whole."""
    path = write(tmp_path, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nitems: [1]\n")
    assert len(read_manifests([str(path)])) == 1


def tree(tmp_path):
    write(tmp_path, "b.yaml", POD.format(name="b"))
    write(tmp_path, "a.yml", POD.format(name="a"))
    write(tmp_path, "c.json", '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"}}')
    write(tmp_path, "README.md", "not a manifest")
    write(tmp_path, "sub/d.yaml", POD.format(name="d"))
    write(tmp_path, "sub/deeper/e.yaml", POD.format(name="e"))
    write(tmp_path, "z.yaml", POD.format(name="z"))
    return tmp_path


DIRECTORY_CASES = [(False, ["a", "b", "c", "z"]), (True, ["a", "b", "c", "d", "e", "z"])]


@pytest.mark.parametrize(("recursive", "names"), DIRECTORY_CASES, ids=["flat", "recursive"])
def test_directory(tmp_path, recursive, names):
    """A directory gives its .yaml/.yml/.json files in sorted order; subdirectories only with -R."""
    docs = read_manifests([str(tree(tmp_path))], recursive=recursive)
    assert [d.obj["metadata"]["name"] for d in docs] == names
    assert docs[0].source == str(tmp_path / "a.yml")


def test_paths_read_in_the_order_given(tmp_path):
    """Several -f sources are read one after another, in the order given."""
    second = write(tmp_path, "x/2.yaml", POD.format(name="two"))
    first = write(tmp_path, "y/1.yaml", POD.format(name="one"))
    docs = read_manifests([str(first), str(second)])
    assert [d.obj["metadata"]["name"] for d in docs] == ["one", "two"]


class Trickle(io.RawIOBase):
    """A raw stream that hands out 3 bytes per read, as a pipe may."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        size = min(3, len(buffer), len(self.data))
        buffer[:size] = self.data[:size]
        self.data = self.data[size:]
        return size


STDIN_CASES = [
    ("binary", lambda text: io.BytesIO(text.encode())),
    ("short-reads", lambda text: Trickle(text.encode())),
    ("text", lambda text: io.StringIO(text)),
    ("text-with-buffer", lambda text: io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8")),
]


@pytest.mark.parametrize("make", [c[1] for c in STDIN_CASES], ids=[c[0] for c in STDIN_CASES])
def test_stdin(make):
    """`-` reads the given stdin, binary or text."""
    docs = read_manifests(["-"], stdin=make(POD.format(name="in") + "---\n" + POD.format(name="put")))
    assert [d.obj["metadata"]["name"] for d in docs] == ["in", "put"]
    assert docs[1].where() == f"{STDIN}: document 2 (line 6)"


def test_stdin_only_once():
    """`-` may be given once."""
    assert failure(["-", "-"], stdin=io.BytesIO(b"a: 1\n")) == (
        "<stdin>: standard input can be read only once")


def error_cases(tmp_path) -> list[tuple[str, list[str], str]]:
    bad = write(tmp_path, "bad.yaml", POD.format(name="a") + "---\n" + POD.format(name="b")
                + "---\nkind: Pod\nmetadata: name: x\n")
    return [
        ("missing", [str(tmp_path / "nope.yaml")], f"{tmp_path / 'nope.yaml'}: no such file or directory"),
        ("empty-dir", [str(write(tmp_path, "empty/README", "x").parent)],
         f"{tmp_path / 'empty'}: no manifests found (.yaml, .yml, .json)"),
        ("syntax-3rd", [str(bad)], f"{bad}: document 3 (line 12): mapping values are not allowed here"),
        ("list-doc", [str(write(tmp_path, "l.yaml", "- a\n- b\n"))],
         f"{tmp_path / 'l.yaml'}: document 1 (line 1): expected a mapping (an object with apiVersion "
         f"and kind), got a list"),
        ("scalar-doc", [str(write(tmp_path, "s.yaml", POD.format(name="a") + "---\njust text\n"))],
         f"{tmp_path / 's.yaml'}: document 2 (line 6): expected a mapping (an object with apiVersion "
         f"and kind), got a string"),
        ("list-item", [str(write(tmp_path, "li.yaml", "kind: List\nitems:\n- kind: Pod\n- 3\n"))],
         f"{tmp_path / 'li.yaml'}: document 1, item 2: expected a mapping (an object with apiVersion "
         f"and kind), got a number"),
        ("duplicate", [str(write(tmp_path, "d.yaml", "kind: Pod\nmetadata:\n  name: a\n  name: b\n"))],
         f"{tmp_path / 'd.yaml'}: document 1 (line 4): duplicate key \"name\" (first at line 3)"),
        ("png", [str(write(tmp_path, "img.yaml", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"))],
         f"{tmp_path / 'img.yaml'}: binary data (a NUL byte at offset 8), not a YAML or JSON document"),
        ("nul", [str(write(tmp_path, "n.yaml", b"kind: Pod\n\0"))],
         f"{tmp_path / 'n.yaml'}: binary data (a NUL byte at offset 10), not a YAML or JSON document"),
        ("latin1", [str(write(tmp_path, "l1.yaml", b"kind: Pod\nname: caf\xe9\n"))],
         f"{tmp_path / 'l1.yaml'}: line 2: not UTF-8 text (invalid byte 0xe9 at offset 19)"),
    ]


ERROR_IDS = ["missing", "empty-dir", "syntax-3rd", "list-doc", "scalar-doc", "list-item", "duplicate",
             "png", "nul", "latin1"]


@pytest.mark.parametrize("case", ERROR_IDS, ids=ERROR_IDS)
def test_errors(tmp_path, case):
    """Each problem gives one line naming the source, the document and the line."""
    [(_, paths, expected)] = [c for c in error_cases(tmp_path) if c[0] == case]
    assert failure(paths) == expected


def test_random_bytes_refused_cleanly(tmp_path):
    """Random binary files give a ManifestError, never another exception."""
    for number in range(20):
        path = write(tmp_path, f"r{number}.yaml", os.urandom(512))
        with pytest.raises(ManifestError):
            read_manifests([str(path)])


def test_one_bad_document_means_nothing_is_returned(tmp_path):
    """A bad document anywhere, even in the last file, fails the whole read."""
    write(tmp_path, "a.yaml", POD.format(name="a"))
    write(tmp_path, "b.yaml", POD.format(name="b") + "---\n[unclosed\n")
    assert "b.yaml: document 2" in failure([str(tmp_path)])


def test_oversized_file_refused_without_reading(tmp_path):
    """A file over 32 MiB is refused from its size, before any of it is read."""
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as file:
        file.truncate(MAX_INPUT_BYTES + 1)  # sparse: no data is written or read
    started = time.perf_counter()
    assert failure([str(path)]) == f"{path}: larger than 32 MiB: refusing it"
    assert time.perf_counter() - started < 1


class EndlessStream(io.RawIOBase):
    """A stream of 'a' bytes that never ends, counting what was read from it."""

    def __init__(self) -> None:
        self.served = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        buffer[:] = b"a" * len(buffer)
        self.served += len(buffer)
        return len(buffer)


def test_oversized_stdin_refused_after_the_limit():
    """An endless stdin is read only to just past the limit, then refused."""
    stream = EndlessStream()
    assert failure(["-"], stdin=stream) == "<stdin>: larger than 32 MiB: refusing it"
    assert stream.served <= MAX_INPUT_BYTES + 1


def test_document_is_frozen():
    """Documents cannot be rebound (the object inside is the caller's to copy)."""
    doc = Document("f", 0, 1, {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        doc.index = 2  # type: ignore[misc]


# --- URLs ----------------------------------------------------------------------------------

class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 (the base class's name)
        pass


class HugeHandler(QuietHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Length", str(MAX_INPUT_BYTES + 1))
        self.end_headers()


@pytest.fixture
def web(tmp_path, request):
    """An HTTP server on 127.0.0.1 serving tmp_path/www (or a huge body), shut down after the test."""
    root = tmp_path / "www"
    root.mkdir()
    handler = getattr(request, "param", None) or functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    request.addfinalizer(stop)
    return root, f"http://127.0.0.1:{server.server_address[1]}"


def test_url(web):
    """An http:// URL is fetched and its documents read, the URL as their source."""
    root, base = web
    write(root, "pods.yaml", POD.format(name="a") + "---\n" + POD.format(name="b"))
    docs = read_manifests([f"{base}/pods.yaml"])
    assert [d.obj["metadata"]["name"] for d in docs] == ["a", "b"]
    assert docs[1].where() == f"{base}/pods.yaml: document 2 (line 6)"


def test_url_not_found(web):
    """An HTTP error status is a ManifestError naming the URL."""
    _, base = web
    assert failure([f"{base}/missing.yaml"]) == f"{base}/missing.yaml: HTTP 404 File not found"


@pytest.mark.parametrize("web", [HugeHandler], indirect=True, ids=["content-length"])
def test_url_too_large(web):
    """A body announced larger than the limit is refused without being read."""
    _, base = web
    assert failure([f"{base}/x.yaml"]) == f"{base}/x.yaml: larger than 32 MiB: refusing it"


def test_url_unreachable():
    """A refused connection is a ManifestError."""
    assert failure(["http://127.0.0.1:9/x.yaml"]).startswith("http://127.0.0.1:9/x.yaml: cannot fetch: ")
