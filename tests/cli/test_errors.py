"""Error lines as kubectl prints them: `error: ...` for what the client finds,
`Error from server (Reason): ...` else."""

from __future__ import annotations

import pytest

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {tier: front}}
spec: {containers: [{name: c, image: busybox}]}
"""

UNKNOWN_KIND = "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n"


@pytest.fixture
def pod(kctl):
    """Pod p (labels tier=front) in the default namespace."""
    assert kctl("apply", "-f", "-", input=POD).code == 0


@pytest.mark.parametrize(("args", "code", "line"), [
    (["get", "foo"], 1, 'error: the server doesn\'t have a resource type "foo"'),
    (["get", "foo", "bar"], 1, 'error: the server doesn\'t have a resource type "foo"'),
    (["describe", "gadgets"], 1, 'error: the server doesn\'t have a resource type "gadgets"'),
    (["get"], 1, 'error: You must specify the type of resource to get. Use "kctl api-resources" for a complete list'),
    (["get", "pods/p", "pods"], 1, "error: there is no need to specify a resource type as a separate argument "
                                   "when passing arguments in resource/name form"),
    (["get", "pods", "-o", "bogus"], 1, 'error: unable to match a printer suitable for the output format "bogus"'),
    (["get", "pods", "-o", "jsonpath={.x"], 1, "error: error parsing jsonpath {.x"),
    (["label", "pod", "p", "tier=back"], 1, "error: 'tier' already has a value (front), and --overwrite is false"),
    (["delete", "-f", "-"], 1, 'error: no matches for kind "Gadget" in version "example.com/v1"'),
    (["get", "pods", "nothere"], 3, 'Error from server (NotFound): pods "nothere" not found'),
    (["delete", "configmap", "nothere"], 3, 'Error from server (NotFound): configmaps "nothere" not found'),
], ids=["unknown-type", "unknown-type-with-name", "describe-unknown-type", "no-type", "type-and-type/name",
        "bad-output", "bad-jsonpath", "label-without-overwrite", "unknown-kind-in-manifest", "not-found",
        "delete-not-found"])
def test_error_line(kctl, pod, args, code, line):
    """Client-side mistakes say `error:`; only what the API refuses says `Error from server`."""
    result = kctl(*args, input=UNKNOWN_KIND if args[-1] == "-" else None)
    assert result.code == code
    assert result.err.startswith(line) and result.err.count("\n") == 1, result.err


def test_missing_file_is_a_client_error(kctl, tmp_path):
    """`apply -f missing.yaml` is an `error:` line naming the file, as kubectl's."""
    result = kctl("apply", "-f", str(tmp_path / "missing.yaml"))
    assert result.code != 0 and result.err.startswith("error: ") and "missing.yaml" in result.err


def test_client_side_error_crosses_the_wire():
    """A client-side error raised by a control host (kctl serve) keeps its class, so it still prints `error:`."""
    from kctl.apiserver import wire
    from kctl.machinery.errors import BadRequest, ClientSideError
    from kctl.cli.main import error_line

    error = wire.decode_error(wire.encode_error(ClientSideError('the server doesn\'t have a resource type "x"')))
    assert isinstance(error, ClientSideError) and isinstance(error, BadRequest)
    assert error_line(error) == 'error: the server doesn\'t have a resource type "x"'
    assert error_line(BadRequest("the patch removed metadata")) == \
        "Error from server (BadRequest): the patch removed metadata"
