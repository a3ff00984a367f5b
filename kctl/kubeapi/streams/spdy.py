"""SPDY/3.1 as kubectl's port-forward speaks it: the frames, the compressed header blocks, one session's streams.

kctl.kubeapi.streams.portforward runs one `Session` per port-forward connection, over a WebSocket's binary
messages (kubectl 1.31+, subprotocol `SPDY/3.1+portforward.k8s.io`) or over a raw HTTP/1.1 `Upgrade: SPDY/3.1`
connection. The session does no I/O ("sans-IO"): `receive(bytes)` parses what arrived and returns the events
it carried (a stream opened, data, a half-close, a reset, a window opened, the peer going away); the methods
that act (`reply`, `send_data`, `end_stream`, `reset`, `consumed`, `go_away`) queue frames, and
`data_to_send()` hands over the bytes to write. PINGs are answered inside.

Wire format (SPDY Protocol Draft 3.1): every frame has an 8-byte head. A control frame: the control bit,
version 3 (15 bits), type (16 bits), flags (8), length (24); a data frame: stream id (31 bits), flags, length.
Header blocks (SYN_STREAM, SYN_REPLY, HEADERS) are a count and length-prefixed lower-case names and
NUL-joined values, zlib-compressed with the SPDY/3 dictionary; one compression context per direction for
the whole connection (each block ends with a sync flush).

Flow control: each stream has a 64 KiB window either way (SPDY/3.1 adds one for the session). The session
tells the peer what it consumed (`consumed`: WINDOW_UPDATE once half a window is used). Kubernetes' peers
(moby/spdystream, in kubectl and kubelet) neither send WINDOW_UPDATE nor honour windows, so the sending
side keeps to the peer's windows only once the peer has shown it does flow control (it sent a WINDOW_UPDATE
or an initial window in SETTINGS); before that `send_window` is None (no limit but the transport's own
back-pressure).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Union

VERSION = 3

# control frame types
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
# flags
FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02
FLAG_SETTINGS_CLEAR = 0x01
# RST_STREAM status codes
PROTOCOL_ERROR, INVALID_STREAM, REFUSED_STREAM, UNSUPPORTED_VERSION, CANCEL = 1, 2, 3, 4, 5
INTERNAL_ERROR, FLOW_CONTROL_ERROR, STREAM_IN_USE, STREAM_ALREADY_CLOSED, FRAME_TOO_LARGE = 6, 7, 8, 9, 11
# GOAWAY status codes
GOAWAY_OK, GOAWAY_PROTOCOL_ERROR, GOAWAY_INTERNAL_ERROR = 0, 1, 11
# SETTINGS ids
SETTINGS_INITIAL_WINDOW_SIZE = 7

#: the initial flow-control window of a stream and of the session
DEFAULT_WINDOW = 64 * 1024
#: the most data bytes put in one DATA frame
MAX_DATA_CHUNK = 32 * 1024
#: the longest frame accepted (SPDY's length field allows 16 MiB)
MAX_FRAME = 1 << 24
#: the most bytes a decompressed header block may have
MAX_HEADER_BLOCK = 256 * 1024
#: the largest window SPDY allows (2^31 - 1)
MAX_WINDOW = 0x7FFFFFFF

_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
    "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
    "content-base", "content-encoding", "content-language", "content-length", "content-location", "content-md5",
    "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host", "if-match",
    "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer", "retry-after",
    "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
    "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url", "public",
    "set-cookie", "keep-alive", "origin",
)
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
#: SPDY/3's zlib dictionary (the spec's "Compression" section): each word with its 32-bit length, then the tail
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()

#: header name -> its values (names lower-case, as SPDY/3 carries them)
HeaderBlock = dict[str, list[str]]


class SPDYError(Exception):
    """The peer broke the protocol in a way that ends the session (it gets a GOAWAY with PROTOCOL_ERROR)."""


# -- frames -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SynStream:
    """SYN_STREAM: the sender opens stream `stream_id` with these headers."""

    stream_id: int
    headers: HeaderBlock
    fin: bool = False
    unidirectional: bool = False
    associated_to: int = 0
    priority: int = 0
    slot: int = 0


@dataclass(frozen=True)
class SynReply:
    """SYN_REPLY: the receiver of a SYN_STREAM accepts it."""

    stream_id: int
    headers: HeaderBlock
    fin: bool = False


@dataclass(frozen=True)
class RstStream:
    """RST_STREAM: the stream ends abnormally, with a status code."""

    stream_id: int
    status: int


@dataclass(frozen=True)
class Settings:
    """SETTINGS: (flags, id, value) entries."""

    entries: tuple[tuple[int, int, int], ...] = ()
    clear: bool = False


@dataclass(frozen=True)
class Ping:
    """PING: answered by the peer with the same id (a client's ids are odd, a server's even)."""

    ping_id: int


@dataclass(frozen=True)
class GoAway:
    """GOAWAY: the sender takes no new streams after `last_good_stream_id`."""

    last_good_stream_id: int
    status: int = GOAWAY_OK


@dataclass(frozen=True)
class Headers:
    """HEADERS: more headers for an open stream."""

    stream_id: int
    headers: HeaderBlock
    fin: bool = False


@dataclass(frozen=True)
class WindowUpdate:
    """WINDOW_UPDATE: the sender consumed `delta` more bytes of stream `stream_id` (0: of the session)."""

    stream_id: int
    delta: int


@dataclass(frozen=True)
class Data:
    """A data frame: bytes of a stream; `fin` half-closes the sender's side."""

    stream_id: int
    data: bytes
    fin: bool = False


Frame = Union[SynStream, SynReply, RstStream, Settings, Ping, GoAway, Headers, WindowUpdate, Data]


# -- header blocks ------------------------------------------------------------------------------

def header_value(headers: HeaderBlock, name: str) -> str:
    """The first value of header `name` (any case), "" without one."""
    values = headers.get(name.lower()) or [""]
    return values[0]


def encode_header_block(headers: Mapping[str, str | list[str]]) -> bytes:
    """The uncompressed block: a count, then each lower-cased name and its NUL-joined values, length-prefixed."""
    pairs = sorted((name.lower(), "\0".join(value) if isinstance(value, list) else value)
                   for name, value in headers.items())
    out = [struct.pack(">I", len(pairs))]
    for name, value in pairs:
        name_bytes, value_bytes = name.encode(), value.encode()
        out.append(struct.pack(">I", len(name_bytes)) + name_bytes + struct.pack(">I", len(value_bytes)) + value_bytes)
    return b"".join(out)


def decode_header_block(block: bytes) -> HeaderBlock:
    """The headers of an uncompressed block; SPDYError when it is truncated, has trailing bytes, an empty or
    upper-case name, or a name twice."""
    view, offset = memoryview(block), 0

    def take(n: int) -> bytes:
        nonlocal offset
        if n < 0 or offset + n > len(view):
            raise SPDYError("truncated header block")
        chunk = bytes(view[offset:offset + n])
        offset += n
        return chunk

    def take_length() -> int:
        return struct.unpack(">I", take(4))[0]

    headers: HeaderBlock = {}
    for _ in range(take_length()):
        name = take(take_length()).decode("utf-8", "replace")
        value = take(take_length()).decode("utf-8", "replace")
        if not name or name != name.lower():
            raise SPDYError(f"invalid header name {name!r}")
        if name in headers:
            raise SPDYError(f"header {name!r} given twice")
        headers[name] = value.split("\0")
    if offset != len(view):
        raise SPDYError("trailing bytes after the header block")
    return headers


class HeaderCompressor:
    """One direction's compression context: every block is compressed with the dictionary, then sync-flushed."""

    def __init__(self) -> None:
        self._zlib = zlib.compressobj(level=9, zdict=DICTIONARY)

    def compress(self, headers: Mapping[str, str | list[str]]) -> bytes:
        """The compressed bytes of a header block (they depend on every block compressed before)."""
        return self._zlib.compress(encode_header_block(headers)) + self._zlib.flush(zlib.Z_SYNC_FLUSH)


class HeaderDecompressor:
    """The other direction's context: blocks must be decompressed in the order they came."""

    def __init__(self) -> None:
        self._zlib = zlib.decompressobj(zdict=DICTIONARY)

    def decompress(self, data: bytes) -> HeaderBlock:
        """The headers of one compressed block; SPDYError for bad zlib data or a block above MAX_HEADER_BLOCK."""
        try:
            block = self._zlib.decompress(data, MAX_HEADER_BLOCK)
        except zlib.error as exc:
            raise SPDYError(f"header block: {exc}") from None
        if self._zlib.unconsumed_tail:
            raise SPDYError("header block too large")
        return decode_header_block(block)


# -- the frame codec ----------------------------------------------------------------------------

def _control(frame_type: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, frame_type, (flags << 24) | len(payload)) + payload


class FrameWriter:
    """Frames to bytes, with this direction's header compression."""

    def __init__(self) -> None:
        self._headers = HeaderCompressor()

    def encode(self, frame: Frame) -> bytes:
        """The bytes of one frame."""
        if isinstance(frame, Data):
            if len(frame.data) >= MAX_FRAME:
                raise ValueError("data frame too long")
            return struct.pack(">II", frame.stream_id & MAX_WINDOW,
                               ((FLAG_FIN if frame.fin else 0) << 24) | len(frame.data)) + frame.data
        if isinstance(frame, SynStream):
            flags = (FLAG_FIN if frame.fin else 0) | (FLAG_UNIDIRECTIONAL if frame.unidirectional else 0)
            head = struct.pack(">IIBB", frame.stream_id & MAX_WINDOW, frame.associated_to & MAX_WINDOW,
                               (frame.priority & 0x7) << 5, frame.slot & 0xFF)
            return _control(SYN_STREAM, flags, head + self._headers.compress(frame.headers))
        if isinstance(frame, SynReply):
            return _control(SYN_REPLY, FLAG_FIN if frame.fin else 0,
                            struct.pack(">I", frame.stream_id & MAX_WINDOW) + self._headers.compress(frame.headers))
        if isinstance(frame, Headers):
            return _control(HEADERS, FLAG_FIN if frame.fin else 0,
                            struct.pack(">I", frame.stream_id & MAX_WINDOW) + self._headers.compress(frame.headers))
        if isinstance(frame, RstStream):
            return _control(RST_STREAM, 0, struct.pack(">II", frame.stream_id & MAX_WINDOW, frame.status))
        if isinstance(frame, Settings):
            entries = b"".join(struct.pack(">II", (flags << 24) | (ident & 0xFFFFFF), value)
                               for flags, ident, value in frame.entries)
            return _control(SETTINGS, FLAG_SETTINGS_CLEAR if frame.clear else 0,
                            struct.pack(">I", len(frame.entries)) + entries)
        if isinstance(frame, Ping):
            return _control(PING, 0, struct.pack(">I", frame.ping_id))
        if isinstance(frame, GoAway):
            return _control(GOAWAY, 0, struct.pack(">II", frame.last_good_stream_id & MAX_WINDOW, frame.status))
        if isinstance(frame, WindowUpdate):
            return _control(WINDOW_UPDATE, 0, struct.pack(">II", frame.stream_id & MAX_WINDOW,
                                                          frame.delta & MAX_WINDOW))
        raise TypeError(f"not a SPDY frame: {frame!r}")


class FrameReader:
    """Bytes to frames, however the transport splits them, with the other direction's header decompression."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._headers = HeaderDecompressor()

    def feed(self, data: bytes) -> list[Frame]:
        """The frames `data` completes (the rest waits for more); SPDYError for a frame that breaks the protocol."""
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            first, flags_length = struct.unpack_from(">II", self._buffer)
            flags, length = flags_length >> 24, flags_length & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                break
            payload = bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            if first & 0x80000000:
                frame = self._control((first >> 16) & 0x7FFF, first & 0xFFFF, flags, payload)
                if frame is not None:
                    frames.append(frame)
            else:
                if first == 0:
                    raise SPDYError("data frame for stream 0")
                frames.append(Data(first & MAX_WINDOW, payload, bool(flags & FLAG_FIN)))
        return frames

    def _control(self, version: int, frame_type: int, flags: int, payload: bytes) -> Frame | None:
        if version != VERSION:
            raise SPDYError(f"SPDY version {version} (only 3 is spoken)")

        def need(size: int, *, exact: bool = False) -> None:
            if len(payload) < size or (exact and len(payload) != size):
                raise SPDYError(f"control frame type {frame_type}: bad length {len(payload)}")

        fin = bool(flags & FLAG_FIN)
        if frame_type == SYN_STREAM:
            need(10)
            stream_id, associated, priority, slot = struct.unpack_from(">IIBB", payload)
            return SynStream(stream_id & MAX_WINDOW, self._headers.decompress(payload[10:]), fin,
                             bool(flags & FLAG_UNIDIRECTIONAL), associated & MAX_WINDOW, priority >> 5, slot)
        if frame_type in (SYN_REPLY, HEADERS):
            need(4)
            stream_id = struct.unpack_from(">I", payload)[0] & MAX_WINDOW
            headers = self._headers.decompress(payload[4:])
            return (SynReply if frame_type == SYN_REPLY else Headers)(stream_id, headers, fin)
        if frame_type == RST_STREAM:
            need(8, exact=True)
            stream_id, status = struct.unpack(">II", payload)
            return RstStream(stream_id & MAX_WINDOW, status)
        if frame_type == SETTINGS:
            need(4)
            count = struct.unpack_from(">I", payload)[0]
            need(4 + 8 * count, exact=True)
            entries = []
            for index in range(count):
                flags_id, value = struct.unpack_from(">II", payload, 4 + 8 * index)
                entries.append((flags_id >> 24, flags_id & 0xFFFFFF, value))
            return Settings(tuple(entries), bool(flags & FLAG_SETTINGS_CLEAR))
        if frame_type == PING:
            need(4, exact=True)
            return Ping(struct.unpack(">I", payload)[0])
        if frame_type == GOAWAY:
            need(8, exact=True)
            last, status = struct.unpack(">II", payload)
            return GoAway(last & MAX_WINDOW, status)
        if frame_type == WINDOW_UPDATE:
            need(8, exact=True)
            stream_id, delta = struct.unpack(">II", payload)
            return WindowUpdate(stream_id & MAX_WINDOW, delta & MAX_WINDOW)
        return None  # unknown control frames are ignored (the spec's rule)


# -- the session --------------------------------------------------------------------------------

@dataclass(frozen=True)
class StreamOpened:
    """The peer opened a stream (its SYN_STREAM); `fin`: it will send nothing on it."""

    stream_id: int
    headers: HeaderBlock
    fin: bool = False


@dataclass(frozen=True)
class DataReceived:
    """Bytes for a stream; tell the session with `consumed` once they are passed on."""

    stream_id: int
    data: bytes


@dataclass(frozen=True)
class StreamEnded:
    """The peer half-closed the stream: no more data comes on it."""

    stream_id: int


@dataclass(frozen=True)
class StreamReset:
    """The stream ended abnormally (a RST_STREAM from the peer)."""

    stream_id: int
    status: int


@dataclass(frozen=True)
class WindowOpened:
    """The peer's window for a stream (0: for the session) grew: more may be sent."""

    stream_id: int


@dataclass(frozen=True)
class GoneAway:
    """The peer sent GOAWAY: it takes no new streams; the session should end once its streams have."""

    last_good_stream_id: int
    status: int


Event = Union[StreamOpened, DataReceived, StreamEnded, StreamReset, WindowOpened, GoneAway]


@dataclass
class _Stream:
    stream_id: int
    send_window: int
    local_closed: bool = False
    remote_closed: bool = False
    unacknowledged: int = 0


@dataclass
class Session:
    """One SPDY/3.1 connection's state (the server's side unless `server=False`): frames in, events out."""

    server: bool = True
    initial_window: int = DEFAULT_WINDOW
    _reader: FrameReader = field(default_factory=FrameReader, init=False, repr=False)
    _writer: FrameWriter = field(default_factory=FrameWriter, init=False, repr=False)
    _out: list[bytes] = field(default_factory=list, init=False, repr=False)
    _streams: dict[int, _Stream] = field(default_factory=dict, init=False, repr=False)
    _last_peer_stream: int = field(default=0, init=False)
    _next_own_stream: int = field(default=0, init=False)
    _peer_window: int = field(default=DEFAULT_WINDOW, init=False)
    _session_send_window: int = field(default=DEFAULT_WINDOW, init=False)
    _session_unacknowledged: int = field(default=0, init=False)
    _flow_controlled: bool = field(default=False, init=False)
    _session_flow_controlled: bool = field(default=False, init=False)
    going_away: bool = field(default=False, init=False)
    peer_gone: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._next_own_stream = 2 if self.server else 1

    # -- bytes in and out -----------------------------------------------------------------------

    def receive(self, data: bytes) -> list[Event]:
        """The events `data` carried; SPDYError when the peer broke the protocol (a GOAWAY is queued)."""
        try:
            frames = self._reader.feed(data)
        except SPDYError:
            self.go_away(GOAWAY_PROTOCOL_ERROR)
            raise
        events: list[Event] = []
        for frame in frames:
            events.extend(self._handle(frame))
        return events

    def data_to_send(self) -> bytes:
        """The bytes queued for the peer since the last call."""
        out, self._out = b"".join(self._out), []
        return out

    def _send(self, frame: Frame) -> None:
        self._out.append(self._writer.encode(frame))

    # -- acting ---------------------------------------------------------------------------------

    def open_stream(self, headers: Mapping[str, str | list[str]], *, fin: bool = False) -> int:
        """Open a stream of our own (SYN_STREAM); its id."""
        stream_id = self._next_own_stream
        self._next_own_stream += 2
        self._streams[stream_id] = _Stream(stream_id, self._peer_window, local_closed=fin)
        self._send(SynStream(stream_id, {k: (v if isinstance(v, list) else [v]) for k, v in headers.items()},
                             fin=fin))
        return stream_id

    def reply(self, stream_id: int, headers: Mapping[str, str | list[str]] | None = None, *,
              fin: bool = False) -> None:
        """Accept the peer's stream (SYN_REPLY); `fin`: nothing will be sent on it."""
        self._send(SynReply(stream_id, {k: (v if isinstance(v, list) else [v]) for k, v in (headers or {}).items()},
                            fin=fin))
        if fin:
            self._close_local(stream_id)

    def send_window(self, stream_id: int) -> int | None:
        """How many bytes may be sent on the stream now; None while the peer does no flow control."""
        if not self._flow_controlled:
            return None
        stream = self._streams.get(stream_id)
        window = stream.send_window if stream else 0
        return max(0, min(window, self._session_send_window) if self._session_flow_controlled else window)

    def send_data(self, stream_id: int, data: bytes, *, fin: bool = False) -> int:
        """Queue data for the stream, within the peer's windows; how many bytes were taken (the rest must wait
        for a WindowOpened). `fin` half-closes our side once all of `data` is taken. 0 for a closed stream."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.local_closed:
            return 0
        allowed = self.send_window(stream_id)
        size = len(data) if allowed is None else min(len(data), allowed)
        view, sent = memoryview(data), 0
        while sent < size:
            chunk = bytes(view[sent:sent + min(MAX_DATA_CHUNK, size - sent)])
            sent += len(chunk)
            self._send(Data(stream_id, chunk, fin=fin and sent == len(data)))
        if self._flow_controlled:
            stream.send_window -= size
            self._session_send_window -= size
        if fin and size == len(data):
            if not data:
                self._send(Data(stream_id, b"", fin=True))
            self._close_local(stream_id)
        return size

    def end_stream(self, stream_id: int) -> None:
        """Half-close our side of the stream (an empty DATA frame with FIN)."""
        stream = self._streams.get(stream_id)
        if stream is not None and not stream.local_closed:
            self._send(Data(stream_id, b"", fin=True))
            self._close_local(stream_id)

    def reset(self, stream_id: int, status: int = CANCEL) -> None:
        """End the stream abnormally (RST_STREAM)."""
        self._streams.pop(stream_id, None)
        self._send(RstStream(stream_id, status))

    def consumed(self, stream_id: int, size: int) -> None:
        """`size` bytes of the stream were passed on: reopen the peer's window (WINDOW_UPDATE at half a window)."""
        if size <= 0:
            return
        threshold = self.initial_window // 2
        stream = self._streams.get(stream_id)
        if stream is not None and not stream.remote_closed:
            stream.unacknowledged += size
            if stream.unacknowledged >= threshold:
                self._send(WindowUpdate(stream_id, stream.unacknowledged))
                stream.unacknowledged = 0
        self._session_unacknowledged += size
        if self._session_unacknowledged >= threshold:
            self._send(WindowUpdate(0, self._session_unacknowledged))
            self._session_unacknowledged = 0

    def go_away(self, status: int = GOAWAY_OK) -> None:
        """Take no new streams (GOAWAY, once)."""
        if not self.going_away:
            self.going_away = True
            self._send(GoAway(self._last_peer_stream, status))

    @property
    def open_streams(self) -> list[int]:
        """The ids of the streams not yet closed both ways."""
        return sorted(self._streams)

    # -- frames from the peer -------------------------------------------------------------------

    def _close_local(self, stream_id: int) -> None:
        stream = self._streams.get(stream_id)
        if stream is not None:
            stream.local_closed = True
            if stream.remote_closed:
                del self._streams[stream_id]

    def _close_remote(self, stream_id: int) -> None:
        stream = self._streams.get(stream_id)
        if stream is not None:
            stream.remote_closed = True
            if stream.local_closed:
                del self._streams[stream_id]

    def _peer_id(self, stream_id: int) -> bool:
        """Whether the id is one the peer may open (odd from a client, even from a server)."""
        return stream_id % 2 == (1 if self.server else 0)

    def _handle(self, frame: Frame) -> list[Event]:
        if isinstance(frame, SynStream):
            return self._on_syn_stream(frame)
        if isinstance(frame, Data):
            return self._on_data(frame)
        if isinstance(frame, (SynReply, Headers)):
            if frame.fin and frame.stream_id in self._streams:
                self._close_remote(frame.stream_id)
                return [StreamEnded(frame.stream_id)]
            return []
        if isinstance(frame, RstStream):
            if self._streams.pop(frame.stream_id, None) is not None:
                return [StreamReset(frame.stream_id, frame.status)]
            return []
        if isinstance(frame, Ping):
            if self._peer_id(frame.ping_id):  # the peer's ping: echo it; an answer to ours needs nothing
                self._send(frame)
            return []
        if isinstance(frame, Settings):
            return self._on_settings(frame)
        if isinstance(frame, WindowUpdate):
            return self._on_window_update(frame)
        if isinstance(frame, GoAway):
            self.peer_gone = True
            return [GoneAway(frame.last_good_stream_id, frame.status)]
        return []

    def _on_syn_stream(self, frame: SynStream) -> list[Event]:
        stream_id = frame.stream_id
        if stream_id == 0 or not self._peer_id(stream_id) or stream_id <= self._last_peer_stream:
            self._send(RstStream(stream_id, PROTOCOL_ERROR))
            return []
        self._last_peer_stream = stream_id
        if self.going_away:
            self._send(RstStream(stream_id, REFUSED_STREAM))
            return []
        self._streams[stream_id] = _Stream(stream_id, self._peer_window, local_closed=frame.unidirectional,
                                           remote_closed=frame.fin)
        if frame.fin and frame.unidirectional:
            del self._streams[stream_id]
        return [StreamOpened(stream_id, frame.headers, frame.fin)]

    def _on_data(self, frame: Data) -> list[Event]:
        stream = self._streams.get(frame.stream_id)
        if stream is None:
            if frame.stream_id > self._last_peer_stream and self._peer_id(frame.stream_id):
                self._send(RstStream(frame.stream_id, INVALID_STREAM))  # never opened
            return []  # a stream that ended: late data is dropped
        if stream.remote_closed:
            self.reset(frame.stream_id, STREAM_ALREADY_CLOSED)
            return [StreamReset(frame.stream_id, STREAM_ALREADY_CLOSED)]
        events: list[Event] = [DataReceived(frame.stream_id, frame.data)] if frame.data else []
        if frame.fin:
            self._close_remote(frame.stream_id)
            events.append(StreamEnded(frame.stream_id))
        return events

    def _on_settings(self, frame: Settings) -> list[Event]:
        for _, ident, value in frame.entries:
            if ident == SETTINGS_INITIAL_WINDOW_SIZE and 0 < value <= MAX_WINDOW:
                delta = value - self._peer_window
                self._peer_window = value
                self._flow_controlled = True
                for stream in self._streams.values():
                    stream.send_window += delta
                return [WindowOpened(0)] if delta > 0 else []
        return []

    def _on_window_update(self, frame: WindowUpdate) -> list[Event]:
        self._flow_controlled = True
        if frame.delta <= 0:
            return []
        if frame.stream_id == 0:  # SPDY/3.1's session window: kept to once the peer speaks of it
            self._session_flow_controlled = True
            self._session_send_window = min(MAX_WINDOW, self._session_send_window + frame.delta)
            return [WindowOpened(0)]
        stream = self._streams.get(frame.stream_id)
        if stream is None:
            return []
        if stream.send_window + frame.delta > MAX_WINDOW:
            self.reset(frame.stream_id, FLOW_CONTROL_ERROR)
            return [StreamReset(frame.stream_id, FLOW_CONTROL_ERROR)]
        stream.send_window += frame.delta
        return [WindowOpened(frame.stream_id)]


__all__ = ["DEFAULT_WINDOW", "DICTIONARY", "Data", "DataReceived", "Event", "Frame", "FrameReader", "FrameWriter",
           "GoAway", "GoneAway", "HeaderBlock", "HeaderCompressor", "HeaderDecompressor", "Headers", "Ping",
           "RstStream", "SPDYError", "Session", "Settings", "StreamEnded", "StreamOpened", "StreamReset", "SynReply",
           "SynStream", "WindowOpened", "WindowUpdate", "decode_header_block", "encode_header_block",
           "header_value"]
