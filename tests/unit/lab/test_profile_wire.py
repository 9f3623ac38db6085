"""The profile's wire parsing, fed by hand: HTTP/1.1 responses cut at every byte, SSE replies,
``Server-Timing``."""

from __future__ import annotations

import io
import re

import pytest

from millimcp.errors import ConnectionLost, FrameTooLarge, RequestRejected
from millimcp.lab._table import Table, duration
from millimcp.lab.stages import parse_server_timing, stage_order, summarize
from millimcp.lab.timed_http import Endpoint, ExchangeReader

BODY = b'{"jsonrpc":"2.0","id":7,"result":{"content":[]}}'


def feed_bytewise(reader: ExchangeReader, data: bytes) -> list[int]:
    """Feed one byte at a time (time = the byte's index); when the message became ready."""
    ready: list[int] = []
    for i in range(len(data)):
        reader.feed(data[i : i + 1], i)
        if reader.exchange_ready and not ready:
            ready.append(i)
    return ready


def test_content_length_body_at_every_cut() -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
    data = head % len(BODY) + b"server-timing: total;dur=0.1\r\n\r\n" + BODY
    for cut in range(1, len(data)):
        reader = ExchangeReader(7, 1 << 20)
        reader.feed(data[:cut], 1)
        reader.feed(data[cut:], 2)
        assert reader.finished
        assert reader.exchange.body == BODY
        assert reader.exchange.headers["server-timing"] == "total;dur=0.1"
        assert reader.exchange.first_byte_ns == 1
        assert reader.exchange.last_byte_ns == 2


def test_chunked_body_bytewise() -> None:
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (BODY[:10], BODY[10:]))
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    reader = ExchangeReader(7, 1 << 20)
    ready = feed_bytewise(reader, data)
    assert reader.finished
    assert reader.exchange.body == BODY
    assert ready == [len(data) - 1]
    assert reader.exchange.first_byte_ns == 0
    assert reader.exchange.last_byte_ns == len(data) - 1


def test_sse_reply_times_the_answering_event() -> None:
    note = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}'
    stream = b"".join(
        [
            b": keep-alive\n\n",
            b"event: message\ndata: " + note + b"\n\n",
            b"event: message\ndata: " + BODY + b"\n\n",
        ]
    )
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(stream), stream)
    data = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    reader = ExchangeReader(7, 1 << 20)
    reader.feed(data, 10)
    reader.feed(chunked[:30], 20)  # the comment and the start of the notification
    reader.feed(chunked[30 : chunked.index(b'event: message\ndata: {"jsonrpc":"2.0","id"')], 30)
    ready_before = reader.exchange_ready
    assert not ready_before
    rest = chunked[chunked.index(b'event: message\ndata: {"jsonrpc":"2.0","id"') :]
    reader.feed(rest[:25], 40)
    reader.feed(rest[25:], 50)
    exchange = reader.exchange
    assert reader.exchange_ready
    assert reader.finished
    assert exchange.sse
    assert exchange.body == BODY
    assert exchange.events_before == 1
    assert exchange.first_byte_ns == 40
    assert exchange.last_byte_ns == 50


def test_a_stream_that_ends_without_the_answer_fails() -> None:
    data = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 0\r\n\r\n"
    reader = ExchangeReader(7, 1 << 20)
    with pytest.raises(ConnectionLost, match="before the response"):
        reader.feed(data, 1)


def test_a_refusal_as_an_empty_stream_keeps_its_status() -> None:
    data = b"HTTP/1.1 503 Busy\r\ncontent-type: text/event-stream\r\ncontent-length: 0\r\n\r\n"
    reader = ExchangeReader(7, 1 << 20)
    with pytest.raises(RequestRejected, match="HTTP 503") as caught:
        reader.feed(data, 1)
    assert caught.value.status == 503


def test_a_body_framed_by_the_end_of_the_connection() -> None:
    reader = ExchangeReader(7, 1 << 20)
    reader.feed(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n" + BODY[:9], 1)
    reader.feed(BODY[9:], 2)
    assert not reader.exchange_ready
    reader.feed_eof(3)
    assert reader.finished
    assert (reader.exchange.body, reader.exchange.last_byte_ns) == (BODY, 3)
    cut = ExchangeReader(7, 1 << 20)
    cut.feed(b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n{", 1)
    with pytest.raises(ConnectionLost, match="inside a response"):
        cut.feed_eof(2)


def test_caps() -> None:
    reader = ExchangeReader(7, 10)
    with pytest.raises(FrameTooLarge):
        reader.feed(b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n", 1)
    reader = ExchangeReader(7, 10)
    with pytest.raises(FrameTooLarge):
        reader.feed(b"HTTP/1.1 200 OK\r\n" + b"x" * 70_000, 1)


def test_endpoint_parsing() -> None:
    plain = Endpoint.parse("http://127.0.0.1:8000/mcp?x=1")
    assert (plain.host, plain.port, plain.path, plain.tls) == ("127.0.0.1", 8000, "/mcp?x=1", False)
    assert plain.authority == "127.0.0.1:8000"
    tls = Endpoint.parse("https://[::1]/")
    assert (tls.port, tls.tls, tls.authority) == (443, True, "[::1]")
    with pytest.raises(ValueError, match="not an http"):
        Endpoint.parse("ftp://x/")


def test_server_timing_parsing() -> None:
    value = (
        'decode;dur=0.012, validate;dur=0.001, cache;dur=0.000;desc="hit, fresh", '
        "handler;dur=1.5, db;desc=nodur, encode;dur=0.004, total;dur=1.6"
    )
    assert parse_server_timing(value) == [
        ("decode", 0.012),
        ("validate", 0.001),
        ("cache", 0.0),
        ("handler", 1.5),
        ("encode", 0.004),
        ("total", 1.6),
    ]
    assert parse_server_timing("") == []
    assert parse_server_timing("app;dur=abc") == []


def test_stage_order_and_summary() -> None:
    cold = {"dns": 5, "connect": 10, "request encode": 1, "server": 20, "response decode": 2}
    warm = {"request encode": 1, "server downstream": 7, "server handler": 3, "network/wait": 4}
    assert stage_order([cold, warm]) == [
        "dns",
        "connect",
        "request encode",
        "server downstream",
        "server handler",
        "server",
        "network/wait",
        "response decode",
    ]
    stages, total = summarize([warm, {**warm, "server handler": 13}])
    assert total.mean_ms == pytest.approx(20e-6)
    assert stages["server handler"].mean_ms == pytest.approx(8e-6)
    assert stages["server handler"].p95_ms == pytest.approx(13e-6)
    assert stages["server handler"].share == pytest.approx(40.0)
    assert summarize([]) == ({}, summarize([])[1])


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_tables_are_plain_off_a_terminal_and_rich_on_one() -> None:
    table = Table([("stage", "left"), ("mean", "right")])
    table.add(["decode", "1.5 µs"])
    table.add(["total", "2 ms"], "bold", rule=True)
    plain = io.StringIO()
    table.print(plain)
    assert plain.getvalue() == (
        "stage     mean\n------  ------\ndecode  1.5 µs\n------  ------\ntotal     2 ms\n"
    )
    terminal = _Terminal()
    table.print(terminal)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())  # colours off
    assert "┃ stage  ┃   mean ┃" in shown
    assert "│ total  │   2 ms │" in shown


def test_durations_keep_three_digits() -> None:
    assert [duration(x) for x in (0.0123, 0.5, 1.234, 12.34, 123.4, 1234.0)] == [
        "12.3 µs",
        "500.0 µs",
        "1.23 ms",
        "12.3 ms",
        "123.4 ms",
        "1.23 s",
    ]
