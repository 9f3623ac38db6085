"""The lab's HTTP/1.1 response reader, sans I/O: bytes in, events out (in the manner of h11).

::

    reader = ResponseReader(max_body=16 << 20)
    for event in reader.feed(data, now):   # now: when ``data`` arrived (the caller's clock)
        ...
    for event in reader.feed_eof(now):     # the server closed its side
        ...

The reader does no I/O and reads no clock: the caller passes each chunk's arrival time, and
the events carry when their first and last bytes came. Responses are read one after another
on one connection (keep-alive). One ``feed`` ends at most one response: the bytes after its
end stay buffered (:attr:`ResponseReader.buffered`) and are read by the next ``feed``
(``feed(b"", now)`` will do).

Events (immutable, named for what happened):

- :class:`ResponseReceived` ``(head, body, first_byte_ns, last_byte_ns)``: a whole response
  whose body is not an event stream. ``body`` is the content with any chunked framing
  removed, still ``Content-Encoding``-encoded.
- :class:`StreamStarted` ``(head, first_byte_ns)``: the head of a ``text/event-stream``
  response (any status); its body is parsed as it arrives (:class:`millimcp.codec.SseParser`)
- into :class:`EventReceived` ``(data, first_byte_ns, last_byte_ns)``, one per event:
  ``first_byte_ns`` is the arrival of the chunk that brought its first bytes (of a chunk that
  ends one event and starts the next, the next is timed from that chunk),
- and :class:`StreamEnded` ``(last_byte_ns)`` when the response is complete.

The body's framing (RFC 9112, section 6.3), in this order:

=================================  ========================================================
status 1xx                         an interim response: skipped (101 is refused)
status 204 or 304                  no body
``Transfer-Encoding: chunked``     chunks; extensions and trailers are read and dropped
``Content-Length: N``              N bytes
anything else                      until the connection closes (:meth:`feed_eof`), unless
                                   the reader is made with ``until_close=False``
=================================  ========================================================

The states, what each reads and where it goes next (every other transition is an error):

=============  ============================================  ==================================
state          reads                                         then
=============  ============================================  ==================================
HEAD           the status line and headers, to a blank line  LENGTH, CHUNK_SIZE, UNTIL_CLOSE;
                                                             HEAD (no body, interim response)
LENGTH         ``Content-Length`` bytes                      HEAD (the response ended)
CHUNK_SIZE     a chunk-size line                             CHUNK_DATA; TRAILER at size 0
CHUNK_DATA     the chunk's bytes                             CHUNK_END
CHUNK_END      the CRLF after them                           CHUNK_SIZE
TRAILER        trailer lines, to a blank line                HEAD (the response ended)
UNTIL_CLOSE    everything, to the connection's end           CLOSED (the response ended)
CLOSED         nothing: the connection is over               -
=============  ============================================  ==================================

Errors: :class:`~millimcp.errors.ResponseFramingError` (a bad status line, a bad
``Content-Length`` or chunk size, a body with no framing where one is required, bytes after
the end), :class:`~millimcp.errors.FrameTooLarge` (a head or a chunk-size line over
:data:`MAX_HEAD`, a body or an event over ``max_body``) and
:class:`~millimcp.errors.ConnectionLost` (the connection ended inside a response).
"""

from __future__ import annotations

from typing import Final, NamedTuple

from millimcp.codec import SseParser
from millimcp.errors import ConnectionLost, FrameTooLarge, ResponseFramingError

__all__ = [
    "DEFAULT_MAX_BODY",
    "MAX_HEAD",
    "Event",
    "EventReceived",
    "ResponseHead",
    "ResponseReader",
    "ResponseReceived",
    "StreamEnded",
    "StreamStarted",
    "parse_head",
]

MAX_HEAD: Final = 64 * 1024
"""The largest response head (and chunk-size or trailer line) the reader holds."""
DEFAULT_MAX_BODY: Final = 64 * 1024 * 1024

HEAD: Final = 0
LENGTH: Final = 1
CHUNK_SIZE: Final = 2
CHUNK_DATA: Final = 3
CHUNK_END: Final = 4
TRAILER: Final = 5
UNTIL_CLOSE: Final = 6
CLOSED: Final = 7
STATE_NAMES: Final = (
    "HEAD",
    "LENGTH",
    "CHUNK_SIZE",
    "CHUNK_DATA",
    "CHUNK_END",
    "TRAILER",
    "UNTIL_CLOSE",
    "CLOSED",
)

NO_BODY: Final = 0
BY_LENGTH: Final = 1
CHUNKED: Final = 2
BY_CLOSE: Final = 3
INTERIM: Final = 4

_END_OF_HEAD: Final = b"\r\n\r\n"
_HEADS_KEPT: Final = 16
_VERSIONS: Final = (b"HTTP/1.1 ", b"HTTP/1.0 ")
_AFTER_CODE: Final = (b" ", b"\r", b"")
_EVENT_STREAM: Final = b"text/event-stream"


class ResponseHead(NamedTuple):
    """A response's status line and headers as they came, and how its body is framed."""

    raw: bytes
    """The head's bytes, without the blank line that ends it."""
    status: int
    framing: int
    """How the body is framed: ``NO_BODY``, ``BY_LENGTH``, ``CHUNKED``, ``BY_CLOSE`` or
    ``INTERIM`` (a 1xx response)."""
    length: int
    """``Content-Length`` (``BY_LENGTH``), else -1."""
    close: bool
    """The server closes the connection after this response (``Connection: close``, or
    HTTP/1.0 without keep-alive)."""
    event_stream: bool
    """The body is ``text/event-stream``."""

    @property
    def headers(self) -> dict[str, str]:
        """Every header, names lower-cased, a repeated header's values joined with ``", "``
        (parsed from :attr:`raw` at each use)."""
        headers: dict[str, str] = {}
        for line in self.raw.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        return headers


def _header(lower: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (``b"\\r\\nname:"``) in a lower-cased head."""
    start = lower.find(name)
    if start < 0:
        return None
    start += len(name)
    end = lower.find(b"\r\n", start)
    return lower[start : end if end >= 0 else None].strip()


def parse_head(raw: bytes, max_body: int = DEFAULT_MAX_BODY) -> ResponseHead:
    """The :class:`ResponseHead` of a head's bytes (without the blank line after it).

    Raises :class:`~millimcp.errors.ResponseFramingError` for a bad status line or
    ``Content-Length``, :class:`~millimcp.errors.FrameTooLarge` for a ``Content-Length``
    above ``max_body``.
    """
    code = raw[9:12]
    if raw[:9] not in _VERSIONS or not code.isdigit() or raw[12:13] not in _AFTER_CODE:
        raise ResponseFramingError(f"bad status line: {raw[:60]!r}")
    status = int(code)
    lower = raw.lower()
    # membership first: a header that is not there costs one scan (the common case)
    connection = _header(lower, b"\r\nconnection:") if b"\r\nconnection:" in lower else None
    if raw[7] == 0x30:  # HTTP/1.0
        close = connection is None or b"keep-alive" not in connection
    else:
        close = connection is not None and b"close" in connection
    event_stream = _EVENT_STREAM in lower and (
        _header(lower, b"\r\ncontent-type:") or b""
    ).startswith(_EVENT_STREAM)
    length = -1
    if status < 200:
        if status == 101:
            raise ResponseFramingError("101 Switching Protocols: not an HTTP/1.1 response")
        framing = INTERIM
    elif status == 204 or status == 304:
        framing = NO_BODY
    elif b"\r\ntransfer-encoding:" in lower and (
        _header(lower, b"\r\ntransfer-encoding:") or b""
    ).endswith(b"chunked"):
        framing = CHUNKED
    elif (value := _header(lower, b"\r\ncontent-length:")) is not None:
        if not value.isdigit():
            raise ResponseFramingError(f"bad Content-Length: {value[:40]!r}")
        length = int(value)
        if length > max_body:
            raise FrameTooLarge(max_body)
        framing = BY_LENGTH
    else:
        framing = BY_CLOSE
    return ResponseHead(raw, status, framing, length, close, event_stream)


class ResponseReceived(NamedTuple):
    """A whole response whose body is not an event stream."""

    head: ResponseHead
    body: bytes
    first_byte_ns: int
    """When the response's first byte arrived."""
    last_byte_ns: int
    """When its last byte arrived."""


class StreamStarted(NamedTuple):
    """The head of a ``text/event-stream`` response arrived; its events follow."""

    head: ResponseHead
    first_byte_ns: int


class EventReceived(NamedTuple):
    """One event of an event stream: its data (the ``data:`` lines joined)."""

    data: bytes
    first_byte_ns: int
    last_byte_ns: int


class StreamEnded(NamedTuple):
    """The event stream's response is complete."""

    last_byte_ns: int


Event = ResponseReceived | StreamStarted | EventReceived | StreamEnded


class ResponseReader:
    """Reads HTTP/1.1 responses from the bytes of one connection (see the module docstring).

    ``max_body`` caps a body and an event's data; ``until_close=False`` refuses a body framed
    by the connection's end (:class:`~millimcp.errors.ResponseFramingError`), and
    ``streams=False`` reads an event stream's body like any other (one
    :class:`ResponseReceived`).
    """

    __slots__ = (
        "_buffer",
        "_chunk_left",
        "_event_since",
        "_first_ns",
        "_head",
        "_heads",
        "_left",
        "_parts",
        "_size",
        "_skip",
        "_sse",
        "_state",
        "max_body",
        "streams",
        "until_close",
    )

    def __init__(
        self, max_body: int = DEFAULT_MAX_BODY, *, until_close: bool = True, streams: bool = True
    ) -> None:
        self.max_body = max_body
        self.until_close = until_close
        self.streams = streams
        self._state = HEAD
        self._buffer = b""
        self._first_ns = -1
        self._head: ResponseHead | None = None
        self._heads: dict[bytes, ResponseHead] = {}
        self._left = 0
        self._chunk_left = 0
        self._parts: list[bytes] = []
        self._size = 0
        self._sse: SseParser | None = None
        self._event_since: int | None = None
        self._skip = False

    def __repr__(self) -> str:
        return f"<ResponseReader {STATE_NAMES[self._state]} buffered={len(self._buffer)}>"

    @property
    def state(self) -> str:
        """The state's name (see the module docstring's table)."""
        return STATE_NAMES[self._state]

    @property
    def buffered(self) -> int:
        """Bytes received and not read yet (after a response's end, or a partial line)."""
        return len(self._buffer)

    @property
    def in_response(self) -> bool:
        """Whether a response has begun and not ended."""
        return self._state != HEAD or bool(self._buffer)

    def skip_events(self) -> None:
        """Read the rest of the current event stream for its framing only (draining it after
        the event that was waited for): its remaining events are not parsed. Once the
        stream has ended (its :class:`StreamEnded` was among the events), nothing changes."""
        if self._sse is not None:
            self._skip = True

    def feed(self, data: bytes, now: int) -> list[Event]:
        """Read ``data`` (arrived at ``now``); the events it completes, at most one end of a
        response among them."""
        out: list[Event] = []
        pos = 0
        if self._state == HEAD and not self._buffer and (stop := data.find(_END_OF_HEAD)) >= 0:
            # a response's first bytes, with its whole head: the common case, read at once
            head = self._parse(data[:stop])
            pos = stop + 4
            if head.framing == BY_LENGTH and not (head.event_stream and self.streams):
                stop = pos + head.length
                if len(data) >= stop:  # and its whole body: one slice, no copies
                    if len(data) > stop:
                        self._buffer = data[stop:]
                        self._first_ns = now
                    return [ResponseReceived(head, data[pos:stop], now, now)]
            self._first_ns = now
            if head.framing != INTERIM and self._begin(head, now, out):
                return self._ended(data, pos, out, now)
            buf = data
        else:
            if self._state == CLOSED:
                if data:
                    raise ResponseFramingError("bytes after the connection's end")
                return []
            if self._first_ns < 0 and data and self._state == HEAD:
                self._first_ns = now
            buf = self._buffer + data if self._buffer else data
            self._buffer = b""
        end = len(buf)
        while True:
            state = self._state
            if state == HEAD:
                stop = buf.find(_END_OF_HEAD, pos)
                if stop < 0:
                    return self._keep(buf, pos, out)
                head = self._parse(buf[pos:stop])
                pos = stop + 4
                if head.framing == INTERIM:
                    continue
                if self._begin(head, now, out):
                    return self._ended(buf, pos, out, now)
            elif state == LENGTH:
                if pos >= end:
                    return out
                take = min(self._left, end - pos)
                self._content(buf[pos : pos + take], now, out)
                pos += take
                self._left -= take
                if self._left == 0:
                    self._finish(now, out)
                    return self._ended(buf, pos, out, now)
            elif state == CHUNK_DATA:
                if pos >= end:
                    return out
                take = min(self._chunk_left, end - pos)
                self._content(buf[pos : pos + take], now, out)
                pos += take
                self._chunk_left -= take
                if self._chunk_left == 0:
                    self._state = CHUNK_END
            elif state in (CHUNK_SIZE, TRAILER):
                stop = buf.find(b"\r\n", pos)
                if stop < 0:
                    return self._keep(buf, pos, out)
                line = buf[pos:stop]
                pos = stop + 2
                if state == TRAILER:
                    if not line:
                        self._finish(now, out)
                        return self._ended(buf, pos, out, now)
                    continue  # a trailer field: dropped
                semicolon = line.find(b";")  # chunk extensions: ignored
                size = (line[:semicolon] if semicolon >= 0 else line).strip()
                try:
                    if not size.isalnum() or b"x" in size or b"X" in size:
                        raise ValueError  # int() would take 0x1f, 1_0, +1
                    self._chunk_left = int(size, 16)
                except ValueError:
                    raise ResponseFramingError(f"bad chunk size: {size[:20]!r}") from None
                self._state = CHUNK_DATA if self._chunk_left else TRAILER
            elif state == CHUNK_END:
                if end - pos < 2:
                    return self._keep(buf, pos, out)
                if buf[pos : pos + 2] != b"\r\n":
                    raise ResponseFramingError("a chunk does not end with CRLF")
                pos += 2
                self._state = CHUNK_SIZE
            else:  # UNTIL_CLOSE
                if pos < end:
                    self._content(buf[pos:] if pos else buf, now, out)
                return out

    def feed_eof(self, now: int) -> list[Event]:
        """The connection ended (at ``now``): the events that completes (a body framed by the
        connection's end). Raises :class:`~millimcp.errors.ConnectionLost` inside any other
        response."""
        state = self._state
        self._state = CLOSED
        if state == UNTIL_CLOSE:
            out: list[Event] = []
            self._finish(now, out)
            self._state = CLOSED
            return out
        if state == CLOSED or (state == HEAD and not self._buffer):
            return []
        raise ConnectionLost("the connection closed inside a response")

    # -- the steps ------------------------------------------------------------------------

    def _parse(self, raw: bytes) -> ResponseHead:
        """``raw``'s head, parsed once: a kept-alive server repeats its heads (they differ
        by ``Date`` once a second and by the length), so a few are kept."""
        head = self._heads.get(raw)
        if head is None:
            head = parse_head(raw, self.max_body)
            if len(self._heads) >= _HEADS_KEPT:
                self._heads.clear()
            self._heads[raw] = head
        return head

    def _begin(self, head: ResponseHead, now: int, out: list[Event]) -> bool:
        """Start reading ``head``'s body; whether the response ended with its head."""
        self._head = head
        if self.streams and head.event_stream:
            self._sse = SseParser(self.max_body)
            out.append(StreamStarted(head, self._first_ns))
        framing = head.framing
        if framing == NO_BODY or (framing == BY_LENGTH and head.length == 0):
            self._finish(now, out)
            return True
        if framing == BY_LENGTH:
            self._left = head.length
            self._state = LENGTH
        elif framing == CHUNKED:
            self._state = CHUNK_SIZE
        elif self.until_close:
            self._state = UNTIL_CLOSE
        else:
            raise ResponseFramingError("response has neither Content-Length nor chunked framing")
        return False

    def _content(self, data: bytes, now: int, out: list[Event]) -> None:
        if not data:
            return
        sse = self._sse
        if sse is None:
            self._size += len(data)
            if self._size > self.max_body:
                raise FrameTooLarge(self.max_body)
            self._parts.append(data)
            return
        if self._skip:
            return
        since = now if self._event_since is None else self._event_since
        events = sse.feed(data)
        for data_of_event in events:
            out.append(EventReceived(data_of_event, since, now))
            since = now
        if data.endswith(b"\n\n") or data.endswith(b"\r\n\r\n"):
            self._event_since = None
        elif events or self._event_since is None:
            self._event_since = now

    def _finish(self, now: int, out: list[Event]) -> None:
        head = self._head
        assert head is not None
        if self._sse is not None:
            out.append(StreamEnded(now))
        else:
            parts = self._parts
            body = parts[0] if len(parts) == 1 else b"".join(parts)
            out.append(ResponseReceived(head, body, self._first_ns, now))
        self._reset()

    def _reset(self) -> None:
        self._state = HEAD
        self._head = None
        self._first_ns = -1
        self._parts = []
        self._size = 0
        self._sse = None
        self._event_since = None
        self._skip = False

    def _keep(self, buf: bytes, pos: int, out: list[Event]) -> list[Event]:
        """Hold the unfinished ``buf[pos:]`` (a head or a line) for the next feed."""
        rest = buf[pos:] if pos else buf
        if len(rest) > MAX_HEAD:
            raise FrameTooLarge(MAX_HEAD)
        self._buffer = rest
        return out

    def _ended(self, buf: bytes, pos: int, out: list[Event], now: int) -> list[Event]:
        """A response ended at ``buf[pos]``: hold what follows (arrived at ``now``)."""
        if pos < len(buf):
            self._buffer = buf[pos:]
            self._first_ns = now
        return out
