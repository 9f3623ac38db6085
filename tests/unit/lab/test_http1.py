"""millimcp.lab.http1: the sans-I/O HTTP/1.1 response reader, fed by hand."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millimcp.errors import ConnectionLost, FrameTooLarge, ResponseFramingError
from millimcp.lab.http1 import (
    Event,
    EventReceived,
    ResponseReader,
    ResponseReceived,
    StreamEnded,
    StreamStarted,
    parse_head,
)

BODY = b'{"jsonrpc":"2.0","id":7,"result":{"content":[]}}'


def sized(body: bytes, *headers: bytes) -> bytes:
    extra = b"".join(header + b"\r\n" for header in headers)
    return b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (extra, len(body), body)


def chunked(body: bytes, *, split: int = 5, trailer: bytes = b"", headers: bytes = b"") -> bytes:
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + split]), body[i : i + split])
        for i in range(0, len(body), split)
    )
    head = b"HTTP/1.1 200 OK\r\n" + headers + b"Transfer-Encoding: chunked\r\n\r\n"
    return head + chunks + b"0\r\n" + trailer + b"\r\n"


def stream(*events: bytes, framing: str = "chunked") -> bytes:
    content = b"".join(b"event: message\ndata: " + event + b"\n\n" for event in events)
    if framing == "chunked":
        return chunked(content, split=7, headers=b"Content-Type: text/event-stream\r\n")
    return sized(content, b"Content-Type: text/event-stream")


def feed_all(reader: ResponseReader, data: bytes, now: int = 0) -> list[Event]:
    """Feed ``data`` whole, then go on with what stays buffered after each response."""
    events = reader.feed(data, now)
    while reader.buffered and events and isinstance(events[-1], ResponseReceived | StreamEnded):
        more = reader.feed(b"", now)
        if not more:
            break
        events += more
    return events


def test_a_sized_response_at_every_cut_arrives_once_with_its_times() -> None:
    data = sized(BODY, b"Server-Timing: total;dur=0.1")
    for cut in range(1, len(data)):
        reader = ResponseReader()
        first = reader.feed(data[:cut], 1)
        second = reader.feed(data[cut:], 2)
        assert first == []
        (event,) = second
        assert isinstance(event, ResponseReceived)
        assert (event.body, event.first_byte_ns, event.last_byte_ns) == (BODY, 1, 2)
        assert event.head.status == 200
        assert event.head.headers["server-timing"] == "total;dur=0.1"
        assert reader.state == "HEAD"
        assert not reader.in_response


def test_a_chunked_body_fed_byte_by_byte_ends_exactly_at_its_last_byte() -> None:
    data = chunked(BODY, split=3)
    reader = ResponseReader()
    ended = []
    for i in range(len(data)):
        for event in reader.feed(data[i : i + 1], i):
            assert isinstance(event, ResponseReceived)
            assert event.body == BODY
            assert event.first_byte_ns == 0
            ended.append(i)
    assert ended == [len(data) - 1]


def test_chunk_extensions_and_trailers_are_read_and_dropped() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunks = b"%x;name=value\r\n%s\r\n%x ; x\r\n%s\r\n" % (3, BODY[:3], len(BODY) - 3, BODY[3:])
    data = head + chunks + b"0;last\r\nExpires: never\r\nX-Trace: 1\r\n\r\n"
    (event,) = ResponseReader().feed(data, 0)
    assert isinstance(event, ResponseReceived)
    assert event.body == BODY


def test_an_event_stream_comes_as_events_timed_from_their_first_chunk() -> None:
    note = b'{"jsonrpc":"2.0","method":"notifications/progress"}'
    data = stream(note, BODY, framing="length")
    head_end = data.index(b"\r\n\r\n") + 4
    split = data.index(BODY) + 5  # inside the second event
    reader = ResponseReader()
    started = reader.feed(data[:head_end], 10)
    assert [type(event) for event in started] == [StreamStarted]
    assert isinstance(started[0], StreamStarted)
    assert started[0].head.event_stream
    assert started[0].first_byte_ns == 10
    assert reader.feed(data[head_end : head_end + 9], 15) == []  # half a line
    first = reader.feed(data[head_end + 9 : split], 20)
    assert first == [EventReceived(note, 15, 20)]
    rest = reader.feed(data[split:], 30)
    assert rest == [EventReceived(BODY, 20, 30), StreamEnded(30)]


def test_a_stream_with_a_length_and_an_empty_one() -> None:
    events = ResponseReader().feed(stream(BODY, framing="length"), 5)
    assert [type(event) for event in events] == [StreamStarted, EventReceived, StreamEnded]
    empty = sized(b"", b"Content-Type: text/event-stream")
    assert [type(event) for event in ResponseReader().feed(empty, 5)] == [
        StreamStarted,
        StreamEnded,
    ]


def test_skipped_events_are_read_for_framing_only() -> None:
    reader = ResponseReader()
    data = stream(BODY, b'{"late":1}', b'{"later":2}')
    cut = data.index(b"late") - 20
    events = reader.feed(data[:cut], 1)
    assert [type(event) for event in events] == [StreamStarted, EventReceived]
    reader.skip_events()
    assert reader.feed(data[cut:], 2) == [StreamEnded(2)]
    (after,) = reader.feed(sized(BODY), 3)
    assert isinstance(after, ResponseReceived)
    assert after.body == BODY
    # asked too late (the stream's end came in the same feed): the next stream is read whole
    assert [type(event) for event in reader.feed(data, 4)][-2:] == [EventReceived, StreamEnded]
    reader.skip_events()
    assert [type(event) for event in reader.feed(data, 5)].count(EventReceived) == 3


def test_a_kept_alive_connection_reads_one_response_per_feed() -> None:
    reader = ResponseReader()
    data = sized(BODY) + chunked(b"second") + b"HTTP/1.1 2"
    (first,) = reader.feed(data, 1)
    assert isinstance(first, ResponseReceived)
    assert first.body == BODY
    assert reader.buffered == len(data) - len(sized(BODY))
    (second,) = reader.feed(b"", 2)
    assert isinstance(second, ResponseReceived)
    assert (second.body, second.first_byte_ns) == (b"second", 1)
    assert reader.feed(b"", 3) == []
    assert reader.in_response
    (third,) = reader.feed(b"04 No Content\r\n\r\n", 4)
    assert isinstance(third, ResponseReceived)
    assert (third.head.status, third.body, third.first_byte_ns) == (204, b"", 2)


def test_interim_responses_are_skipped_and_304_has_no_body() -> None:
    data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n"
    (event,) = ResponseReader().feed(data, 0)
    assert isinstance(event, ResponseReceived)
    assert (event.head.status, event.body) == (304, b"")
    with pytest.raises(ResponseFramingError, match="101"):
        ResponseReader().feed(b"HTTP/1.1 101 Switching Protocols\r\n\r\n", 0)


def test_a_body_framed_by_the_connections_end() -> None:
    reader = ResponseReader()
    assert reader.feed(b"HTTP/1.0 200 OK\r\n\r\nhello ", 1) == []
    assert reader.feed(b"world", 2) == []
    (event,) = reader.feed_eof(3)
    assert isinstance(event, ResponseReceived)
    assert (event.body, event.first_byte_ns, event.last_byte_ns) == (b"hello world", 1, 3)
    assert event.head.close  # HTTP/1.0 without keep-alive
    assert reader.state == "CLOSED"
    with pytest.raises(ResponseFramingError, match="after the connection"):
        reader.feed(b"x", 4)
    refusing = ResponseReader(until_close=False)
    with pytest.raises(ResponseFramingError, match="neither"):
        refusing.feed(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nabc", 0)


def test_the_end_of_the_connection_between_and_inside_responses() -> None:
    idle = ResponseReader()
    idle.feed(sized(BODY), 0)
    assert idle.feed_eof(1) == []
    for data in (b"HTTP/1.1 200", sized(BODY)[:-3], chunked(BODY)[:-2]):
        reader = ResponseReader()
        reader.feed(data, 0)
        with pytest.raises(ConnectionLost, match="inside a response"):
            reader.feed_eof(1)


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (b"HTTP/1.1 2xx OK\r\nContent-Length: 0\r\n\r\n", ResponseFramingError, "status line"),
        (b"HTTP/2 200 OK\r\n\r\n", ResponseFramingError, "status line"),
        (b"HTTP/1.1 2000\r\n\r\n", ResponseFramingError, "status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", ResponseFramingError, "Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\n", ResponseFramingError, "Length"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x1\r\n",
            ResponseFramingError,
            "chunk size",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc",
            ResponseFramingError,
            "CRLF",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", FrameTooLarge, "10 bytes"),
        (b"HTTP/1.1 200 OK\r\n" + b"x" * 70_000, FrameTooLarge, "65536"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 70_000,
            FrameTooLarge,
            "65536",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n123456\r\n6\r\n123456",
            FrameTooLarge,
            "10 bytes",
        ),
        (stream(b"x" * 11, framing="length"), FrameTooLarge, "10 bytes"),
    ],
)
def test_what_cannot_be_framed_is_refused(
    data: bytes, error: type[Exception], message: str
) -> None:
    reader = ResponseReader(max_body=10)
    with pytest.raises(error, match=message):
        reader.feed(data, 0)


def test_the_head_says_how_the_connection_goes_on() -> None:
    head = parse_head(
        b"HTTP/1.1 503 Busy\r\nConnection: close\r\nX-A: 1\r\nx-a: 2\r\nRetry-After: 3"
    )
    assert (head.status, head.close, head.event_stream) == (503, True, False)
    assert head.headers == {"connection": "close", "x-a": "1, 2", "retry-after": "3"}
    assert not parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 0").close
    assert not parse_head(b"HTTP/1.0 200 OK\r\nConnection: keep-alive").close
    assert "503" in repr(head)


def test_a_stream_can_be_read_as_a_plain_body() -> None:
    data = stream(BODY, framing="length")
    (event,) = ResponseReader(streams=False).feed(data, 0)
    assert isinstance(event, ResponseReceived)
    assert event.body.startswith(b"event: message\ndata: ")


RESPONSES = [
    sized(BODY),
    chunked(BODY, split=4),
    chunked(b"", trailer=b"A: b\r\n"),
    stream(BODY, b"{}"),
    stream(BODY, framing="length"),
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
]


def _shape(events: list[Event]) -> list[tuple[str, bytes, int]]:
    """What happened, without the times."""
    shape = []
    for event in events:
        if isinstance(event, ResponseReceived):
            shape.append(("response", event.body, event.head.status))
        elif isinstance(event, StreamStarted):
            shape.append(("started", b"", event.head.status))
        elif isinstance(event, EventReceived):
            shape.append(("event", event.data, 0))
        else:
            shape.append(("ended", b"", 0))
    return shape


@given(
    st.lists(st.sampled_from(range(len(RESPONSES))), min_size=1, max_size=5),
    st.lists(st.integers(min_value=0, max_value=2000), max_size=12),
)
def test_any_split_of_a_connections_bytes_reads_the_same(picks: list[int], cuts: list[int]) -> None:
    data = b"".join(RESPONSES[pick] for pick in picks)
    whole: list[Event] = []
    reader = ResponseReader()
    while True:
        events = reader.feed(b"", 0) if whole else reader.feed(data, 0)
        if not events:
            break
        whole += events
    pieces: list[Event] = []
    reader = ResponseReader()
    points = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    for start, stop in itertools.pairwise(points):
        pieces += feed_all(reader, data[start:stop])
    pieces += feed_all(reader, b"")
    assert _shape(pieces) == _shape(whole)
    assert sum(isinstance(event, ResponseReceived | StreamEnded) for event in whole) == len(picks)
    assert reader.feed_eof(0) == []
