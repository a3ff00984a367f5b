"""SPDY/3.1 frames, header compression and the session (kctl.kubeapi.streams.spdy), against bytes from the spec."""

from __future__ import annotations

import struct
import zlib

import pytest

from kctl.kubeapi.streams import spdy


def client_and_server() -> tuple[spdy.Session, spdy.Session]:
    """A client session and a server session, to pass bytes between."""
    return spdy.Session(server=False), spdy.Session(server=True)


def deliver(sender: spdy.Session, receiver: spdy.Session) -> list[spdy.Event]:
    """Everything `sender` queued, received by `receiver`."""
    return receiver.receive(sender.data_to_send())


# -- the dictionary and header blocks ----------------------------------------------------------

def test_dictionary_is_the_specs() -> None:
    """The dictionary has the spec's 1423 bytes and its Adler-32 (the id a zlib stream names it by)."""
    assert len(spdy.DICTIONARY) == 1423
    assert zlib.adler32(spdy.DICTIONARY) == 0xE3C6A7C2
    assert spdy.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert spdy.DICTIONARY.endswith(b"utf-,*,enq=0.")


def test_first_compressed_block_names_the_dictionary() -> None:
    """The first block opens a zlib stream whose header asks for the dictionary by its Adler-32 (FDICT)."""
    block = spdy.HeaderCompressor().compress({"port": "80"})
    cmf, flg = block[0], block[1]
    assert cmf & 0x0F == 8 and (cmf * 256 + flg) % 31 == 0
    assert flg & 0x20, "FDICT bit"
    assert struct.unpack(">I", block[2:6])[0] == 0xE3C6A7C2
    assert block.endswith(b"\x00\x00\xff\xff"), "each block ends with a sync flush"


@pytest.mark.parametrize(("headers", "expected"), [
    ({}, b"\x00\x00\x00\x00"),
    ({"port": "80"}, b"\x00\x00\x00\x01" b"\x00\x00\x00\x04port" b"\x00\x00\x00\x0280"),
    ({"streamType": "data", "Port": "8080"},
     b"\x00\x00\x00\x02" b"\x00\x00\x00\x04port\x00\x00\x00\x048080"
     b"\x00\x00\x00\x0astreamtype\x00\x00\x00\x04data"),
    ({"x": ["a", "b"]}, b"\x00\x00\x00\x01\x00\x00\x00\x01x\x00\x00\x00\x03a\x00b"),
], ids=["empty", "one", "lower-cased-sorted", "two-values-nul-joined"])
def test_header_block_encoding(headers: dict, expected: bytes) -> None:
    """Header blocks are a count then length-prefixed lower-case names and NUL-joined values."""
    assert spdy.encode_header_block(headers) == expected
    decoded = spdy.decode_header_block(expected)
    assert {k: v for k, v in decoded.items()} == {k.lower(): (v if isinstance(v, list) else [v])
                                                   for k, v in headers.items()}


@pytest.mark.parametrize(("block", "message"), [
    (b"\x00\x00\x00\x01\x00\x00\x00\x04po", "truncated"),
    (b"\x00\x00\x00\x01\x00\x00\x00\x04Port\x00\x00\x00\x00", "invalid header name"),
    (b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00", "invalid header name"),
    (b"\x00\x00\x00\x02" + (b"\x00\x00\x00\x01a\x00\x00\x00\x00" * 2), "twice"),
    (b"\x00\x00\x00\x00junk", "trailing"),
], ids=["truncated", "upper-case", "empty-name", "duplicate", "trailing"])
def test_bad_header_blocks(block: bytes, message: str) -> None:
    """A malformed header block is a SPDYError saying what is wrong."""
    with pytest.raises(spdy.SPDYError, match=message):
        spdy.decode_header_block(block)


def test_header_compression_shares_one_context_per_direction() -> None:
    """Blocks decompress in order with one context; a later block alone does not (it refers to earlier ones)."""
    compressor, decompressor = spdy.HeaderCompressor(), spdy.HeaderDecompressor()
    blocks = [compressor.compress({"streamtype": "error", "port": "80", "requestid": str(n)}) for n in range(3)]
    assert [decompressor.decompress(b) for b in blocks] == [
        {"streamtype": ["error"], "port": ["80"], "requestid": [str(n)]} for n in range(3)]
    assert len(blocks[1]) < len(blocks[0]), "the second block reuses the first one's words"
    with pytest.raises(spdy.SPDYError):
        spdy.HeaderDecompressor().decompress(blocks[1])


def test_header_block_decompresses_with_plain_zlib_and_the_dictionary() -> None:
    """What the compressor makes is standard zlib with the dictionary (what Go's zlib.NewReaderDict reads)."""
    block = spdy.HeaderCompressor().compress({"streamtype": "data"})
    plain = zlib.decompressobj(zdict=spdy.DICTIONARY).decompress(block)
    assert plain == spdy.encode_header_block({"streamtype": "data"})


# -- frames ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("frame", "wire"), [
    (spdy.Data(1, b"hi", fin=True), b"\x00\x00\x00\x01\x01\x00\x00\x02hi"),
    (spdy.Data(3, b""), b"\x00\x00\x00\x03\x00\x00\x00\x00"),
    (spdy.RstStream(5, spdy.CANCEL), b"\x80\x03\x00\x03\x00\x00\x00\x08\x00\x00\x00\x05\x00\x00\x00\x05"),
    (spdy.Ping(7), b"\x80\x03\x00\x06\x00\x00\x00\x04\x00\x00\x00\x07"),
    (spdy.GoAway(9, spdy.GOAWAY_OK), b"\x80\x03\x00\x07\x00\x00\x00\x08\x00\x00\x00\x09\x00\x00\x00\x00"),
    (spdy.WindowUpdate(1, 65536), b"\x80\x03\x00\x09\x00\x00\x00\x08\x00\x00\x00\x01\x00\x01\x00\x00"),
    (spdy.Settings(((0, spdy.SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20),)),
     b"\x80\x03\x00\x04\x00\x00\x00\x0c\x00\x00\x00\x01\x00\x00\x00\x07\x00\x10\x00\x00"),
], ids=["data-fin", "data-empty", "rst-stream", "ping", "goaway", "window-update", "settings"])
def test_frames_without_headers_encode_as_the_spec_lays_them_out(frame: spdy.Frame, wire: bytes) -> None:
    """Fixed-layout frames give the spec's bytes and parse back to the same frame."""
    assert spdy.FrameWriter().encode(frame) == wire
    assert spdy.FrameReader().feed(wire) == [frame]


def test_syn_stream_layout_and_round_trip() -> None:
    """SYN_STREAM: control bit, version 3, type 1, flags, length, ids, priority in the top 3 bits, then headers."""
    frame = spdy.SynStream(1, {"streamtype": ["error"], "port": ["80"], "requestid": ["0"]}, fin=False,
                           unidirectional=True, associated_to=0, priority=3)
    wire = spdy.FrameWriter().encode(frame)
    assert wire[:4] == b"\x80\x03\x00\x01"
    assert wire[4] == spdy.FLAG_UNIDIRECTIONAL
    assert int.from_bytes(wire[5:8], "big") == len(wire) - 8
    assert wire[8:18] == b"\x00\x00\x00\x01" b"\x00\x00\x00\x00" b"\x60\x00"
    assert spdy.FrameReader().feed(wire) == [frame]


def test_reader_reassembles_frames_split_anywhere() -> None:
    """Frames fed one byte at a time come out whole, in order, header context intact."""
    writer = spdy.FrameWriter()
    frames = [spdy.SynStream(1, {"port": ["80"]}), spdy.SynReply(2, {}), spdy.Data(1, b"x" * 100, fin=True),
              spdy.Headers(1, {"a": ["b"]}), spdy.Ping(1)]
    wire = b"".join(writer.encode(f) for f in frames)
    reader, got = spdy.FrameReader(), []
    for index in range(len(wire)):
        got.extend(reader.feed(wire[index:index + 1]))
    assert got == frames


@pytest.mark.parametrize(("wire", "message"), [
    (b"\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01", "version 2"),
    (b"\x00\x00\x00\x00\x00\x00\x00\x00", "stream 0"),
    (b"\x80\x03\x00\x06\x00\x00\x00\x03\x00\x00\x00", "bad length"),
    (b"\x80\x03\x00\x02\x00\x00\x00\x06\x00\x00\x00\x01\x78\x00", "header block"),
], ids=["version", "data-stream-0", "ping-length", "bad-zlib"])
def test_reader_rejects_broken_frames(wire: bytes, message: str) -> None:
    """A frame that breaks the protocol is a SPDYError."""
    with pytest.raises(spdy.SPDYError, match=message):
        spdy.FrameReader().feed(wire)


def test_unknown_control_frames_are_ignored() -> None:
    """An unknown control frame type is skipped (the spec's rule); what follows still parses."""
    wire = b"\x80\x03\x00\x0a\x00\x00\x00\x02ab" + spdy.FrameWriter().encode(spdy.Ping(3))
    assert spdy.FrameReader().feed(wire) == [spdy.Ping(3)]


# -- the session -------------------------------------------------------------------------------

def test_stream_opens_replies_carries_data_and_closes_both_ways() -> None:
    """A client's stream: opened, replied, data both ways, FIN both ways, then gone from the table."""
    client, server = client_and_server()
    stream_id = client.open_stream({"streamType": "data", "port": "80", "requestID": "0"})
    assert stream_id == 1
    events = deliver(client, server)
    assert events == [spdy.StreamOpened(1, {"streamtype": ["data"], "port": ["80"], "requestid": ["0"]})]
    assert spdy.header_value(events[0].headers, "streamType") == "data"
    server.reply(1)
    assert deliver(server, client) == []
    client.send_data(1, b"GET /", fin=True)
    assert deliver(client, server) == [spdy.DataReceived(1, b"GET /"), spdy.StreamEnded(1)]
    server.send_data(1, b"page")
    server.end_stream(1)
    assert deliver(server, client) == [spdy.DataReceived(1, b"page"), spdy.StreamEnded(1)]
    assert server.open_streams == [] and client.open_streams == []


def test_pings_from_the_peer_are_echoed_and_answers_are_not() -> None:
    """A client's (odd) ping comes back with the same id; an even one (an answer to the server) does not."""
    server = spdy.Session()
    writer = spdy.FrameWriter()
    assert server.receive(writer.encode(spdy.Ping(1))) == []
    assert spdy.FrameReader().feed(server.data_to_send()) == [spdy.Ping(1)]
    server.receive(writer.encode(spdy.Ping(2)))
    assert server.data_to_send() == b""


@pytest.mark.parametrize(("frame", "status"), [
    (spdy.SynStream(2, {}), spdy.PROTOCOL_ERROR),
    (spdy.Data(9, b"x"), spdy.INVALID_STREAM),
], ids=["even-id-from-client", "data-never-opened"])
def test_streams_the_peer_may_not_use_are_reset(frame: spdy.Frame, status: int) -> None:
    """A stream id the client may not open, or data for a stream never opened, gets RST_STREAM."""
    server = spdy.Session()
    assert server.receive(spdy.FrameWriter().encode(frame)) == []
    assert spdy.FrameReader().feed(server.data_to_send()) == [spdy.RstStream(frame.stream_id, status)]


def test_after_goaway_new_streams_are_refused() -> None:
    """Once the server went away, a new stream is refused; GOAWAY names the last stream it took."""
    client, server = client_and_server()
    client.open_stream({"port": "80"})
    deliver(client, server)
    server.go_away()
    client.open_stream({"port": "81"})
    deliver(client, server)
    assert spdy.FrameReader().feed(server.data_to_send()) == [spdy.GoAway(1, spdy.GOAWAY_OK),
                                                              spdy.RstStream(3, spdy.REFUSED_STREAM)]


def test_reset_and_goaway_from_the_peer_are_events() -> None:
    """RST_STREAM ends the stream (an event, removed); GOAWAY is an event too."""
    client, server = client_and_server()
    client.open_stream({"port": "80"})
    deliver(client, server)
    writer = spdy.FrameWriter()
    assert server.receive(writer.encode(spdy.RstStream(1, spdy.CANCEL))) == [spdy.StreamReset(1, spdy.CANCEL)]
    assert server.open_streams == []
    assert server.receive(writer.encode(spdy.GoAway(1))) == [spdy.GoneAway(1, spdy.GOAWAY_OK)]
    assert server.peer_gone


def test_without_flow_control_from_the_peer_sends_are_not_limited() -> None:
    """A peer that never sent WINDOW_UPDATE (spdystream) gets everything at once, in 32 KiB frames."""
    client, server = client_and_server()
    client.open_stream({"port": "80"})
    deliver(client, server)
    server.reply(1)
    assert server.send_window(1) is None
    payload = bytes(range(256)) * 1024  # 256 KiB, four windows' worth
    assert server.send_data(1, payload) == len(payload)
    frames = spdy.FrameReader().feed(server.data_to_send())
    data = [f for f in frames if isinstance(f, spdy.Data)]
    assert b"".join(f.data for f in data) == payload
    assert max(len(f.data) for f in data) == spdy.MAX_DATA_CHUNK


def test_with_flow_control_from_the_peer_windows_are_kept() -> None:
    """Once the peer sends WINDOW_UPDATE, sends stop at the stream's window and go on when it opens."""
    client, server = client_and_server()
    client.open_stream({"port": "80"})
    deliver(client, server)
    server.reply(1)
    writer = spdy.FrameWriter()
    assert server.receive(writer.encode(spdy.WindowUpdate(1, 1))) == [spdy.WindowOpened(1)]
    assert server.send_window(1) == spdy.DEFAULT_WINDOW + 1
    payload = b"x" * (spdy.DEFAULT_WINDOW + 100)
    assert server.send_data(1, payload) == spdy.DEFAULT_WINDOW + 1
    assert server.send_window(1) == 0
    assert server.send_data(1, b"more") == 0
    server.receive(writer.encode(spdy.WindowUpdate(1, 1000)))
    assert server.send_data(1, payload[spdy.DEFAULT_WINDOW + 1:], fin=True) == 99
    received = [f for f in spdy.FrameReader().feed(server.data_to_send()) if isinstance(f, spdy.Data)]
    assert b"".join(f.data for f in received) == payload and received[-1].fin


def test_consumed_data_reopens_the_peers_window_at_half() -> None:
    """Consumed bytes are acknowledged with WINDOW_UPDATE (stream and session) once half a window is used."""
    client, server = client_and_server()
    client.open_stream({"port": "80"})
    deliver(client, server)
    server.reply(1)
    server.data_to_send()
    server.consumed(1, spdy.DEFAULT_WINDOW // 2 - 1)
    assert server.data_to_send() == b""
    server.consumed(1, 1)
    assert spdy.FrameReader().feed(server.data_to_send()) == [
        spdy.WindowUpdate(1, spdy.DEFAULT_WINDOW // 2), spdy.WindowUpdate(0, spdy.DEFAULT_WINDOW // 2)]


def test_data_after_the_peers_fin_resets_the_stream() -> None:
    """Data on a stream the peer already half-closed is STREAM_ALREADY_CLOSED."""
    client, server = client_and_server()
    client.open_stream({"port": "80"})
    deliver(client, server)
    writer = spdy.FrameWriter()
    server.receive(writer.encode(spdy.Data(1, b"", fin=True)))
    events = server.receive(writer.encode(spdy.Data(1, b"late")))
    assert events == [spdy.StreamReset(1, spdy.STREAM_ALREADY_CLOSED)]
    assert spdy.FrameReader().feed(server.data_to_send())[-1] == spdy.RstStream(1, spdy.STREAM_ALREADY_CLOSED)


def test_protocol_error_queues_goaway() -> None:
    """A frame that breaks the protocol raises SPDYError and queues GOAWAY PROTOCOL_ERROR."""
    server = spdy.Session()
    with pytest.raises(spdy.SPDYError):
        server.receive(b"\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01")
    assert spdy.FrameReader().feed(server.data_to_send()) == [spdy.GoAway(0, spdy.GOAWAY_PROTOCOL_ERROR)]
