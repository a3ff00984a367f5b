"""The channel protocol of pods/exec and pods/attach (kctl.machinery.remotecommand): framing, negotiation, Status."""

from __future__ import annotations

import json

import pytest

from kctl.machinery import remotecommand


@pytest.mark.parametrize(("header", "chosen"), [
    ("v5.channel.k8s.io, v4.channel.k8s.io", "v5.channel.k8s.io"),
    ("v4.channel.k8s.io,v5.channel.k8s.io", "v4.channel.k8s.io"),
    ("channel.k8s.io, v4.channel.k8s.io", "v4.channel.k8s.io"),
    ("base64.channel.k8s.io", None),
    ("", None),
    (None, None),
], ids=["kubectl", "client-order", "skips-unknown", "unsupported", "empty", "absent"])
def test_negotiate_takes_the_clients_first_served_protocol(header: str | None, chosen: str | None) -> None:
    """The first protocol of the client's offer that the server speaks is answered."""
    assert remotecommand.negotiate(header) == chosen


@pytest.mark.parametrize(("message", "decoded"), [
    (b"\x00hello", (0, b"hello")),
    (b"\xff\x00", (255, b"\x00")),
    (b"\x04{\"Width\":80}", (4, b'{"Width":80}')),
    ("\x00typed", (0, b"typed")),
    (b"", None),
    ("", None),
], ids=["stdin", "close-stdin", "resize", "text-frame", "empty-binary", "empty-text"])
def test_decode_reads_the_channel_byte(message: bytes | str, decoded: tuple[int, bytes] | None) -> None:
    """Binary and text messages carry their channel first; empty ones carry nothing."""
    assert remotecommand.decode(message) == decoded


def test_encode_prefixes_the_channel() -> None:
    """A server message is the channel byte then the data."""
    assert remotecommand.encode(remotecommand.STDERR, b"oops") == b"\x02oops"


@pytest.mark.parametrize(("data", "size"), [
    (b'{"Width":120,"Height":40}', (120, 40)),
    (b'{"Width":0,"Height":40}', None),
    (b"not json", None),
    (b"[1, 2]", None),
], ids=["size", "zero", "not-json", "not-object"])
def test_resize_messages(data: bytes, size: tuple[int, int] | None) -> None:
    """A resize message gives (width, height); anything else is ignored."""
    assert remotecommand.resize_of(data) == size


def test_statuses_as_the_kubelet_writes_them() -> None:
    """Success, a non-zero exit (reason NonZeroExitCode, the code as the ExitCode cause) and a failure."""
    succeeded = json.loads(remotecommand.status_message(remotecommand.success())[1:])
    assert succeeded == {"metadata": {}, "status": "Success"}
    failed = json.loads(remotecommand.status_message(remotecommand.exit_status(3, ["sh", "-c", "exit 3"]))[1:])
    assert (failed["status"], failed["reason"], failed["details"]["causes"]) == \
        ("Failure", "NonZeroExitCode", [{"reason": "ExitCode", "message": "3"}])
    assert remotecommand.status_message(remotecommand.success())[0] == remotecommand.ERROR
    broken = remotecommand.failure("container gone")
    assert (broken["reason"], broken["code"]) == ("InternalError", 500) and "container gone" in broken["message"]
