"""The native front under malformed, slow and hostile HTTP/1.1 input (raw sockets)."""

from __future__ import annotations

import json
import select
import time
from typing import Any

import pytest

from tests.integration.native.conftest import Reader, Running, config, native, post, tool


def text_of(body: bytes) -> str:
    reply: dict[str, Any] = json.loads(body)
    return str(reply["result"]["content"][0]["text"])


def exchange(served: Running, data: bytes) -> tuple[int, dict[str, str], bytes, Reader]:
    sock = served.connect()
    sock.sendall(data)
    reader = Reader(sock)
    status, headers, body = reader.response()
    return status, headers, body, reader


def test_keep_alive_serves_many_requests_on_one_connection(served: Running) -> None:
    sock = served.connect()
    reader = Reader(sock)
    for i in range(5):
        sock.sendall(tool("echo", i, text=f"n{i}"))
        status, headers, body = reader.response()
        assert status == 200
        assert "connection" not in headers
        assert text_of(body) == f"n{i}"


def test_pipelined_requests_are_answered_in_order_around_a_slow_one(served: Running) -> None:
    sock = served.connect()
    sock.sendall(
        tool("echo", 1, text="first")
        + tool("slow", 2, seconds=0.3, tag="pipelined")
        + tool("echo", 3, text="third")
    )
    reader = Reader(sock)
    answers = [reader.response() for _ in range(3)]
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert [json.loads(body)["id"] for _, _, body in answers] == [1, 2, 3]
    assert text_of(answers[0][2]) == "first"
    assert text_of(answers[1][2]) == "done"
    assert text_of(answers[2][2]) == "third"


def test_chunked_request_body(served: Running) -> None:
    request = tool("echo", 7, text="chunked")
    head, _, body = request.partition(b"\r\n\r\n")
    head = b"\r\n".join(
        line for line in head.split(b"\r\n") if not line.lower().startswith(b"content-length")
    )
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + 5]), body[i : i + 5]) for i in range(0, len(body), 5)
    )
    data = head + b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    status, _, reply, _ = exchange(served, data)
    assert status == 200
    assert text_of(reply) == "chunked"


@pytest.mark.parametrize(
    ("name", "data"),
    [
        (
            "content-length and transfer-encoding",
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        ),
        (
            "two content-lengths",
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
        ),
        (
            "obs-fold",
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"X-Folded: a\r\n  b\r\nContent-Length: 2\r\n\r\n{}",
        ),
        (
            "bad chunk size",
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        ),
        (
            "chunk size overflow",
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
        ),
        (
            "transfer-encoding other than chunked",
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: gzip\r\n\r\n{}",
        ),
        ("bare LF", b"POST /mcp HTTP/1.1\nHost: 127.0.0.1\nContent-Length: 2\n\n{}"),
        ("space before colon", b"GET /mcp HTTP/1.1\r\nHost : 127.0.0.1\r\n\r\n"),
    ],
)
def test_malformed_framing_gets_400_and_a_close(served: Running, name: str, data: bytes) -> None:
    status, headers, body, reader = exchange(served, data)
    assert status == 400, name
    assert headers["connection"] == "close"
    assert json.loads(body)["error"]["code"] == -32600
    assert reader.closed()


def test_oversize_request_line_gets_414(served: Running) -> None:
    data = b"GET /mcp?" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    status, headers, _, reader = exchange(served, data)
    assert status == 414
    assert headers["connection"] == "close"
    assert reader.closed()


def test_oversize_header_block_gets_431(served: Running) -> None:
    filler = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"v" * 1000) for i in range(80))
    data = b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + filler + b"\r\n"
    status, _, _, reader = exchange(served, data)
    assert status == 431
    assert reader.closed()


def test_http_1_0_is_answered_with_a_length_then_closed(served: Running) -> None:
    status, headers, body, reader = exchange(
        served, post("tools/call", {"name": "echo", "arguments": {"text": "old"}}, version=b"1.0")
    )
    assert status == 200
    assert headers["content-length"] == str(len(body))
    assert text_of(body) == "old"
    assert reader.closed()


def test_http_0_9_is_refused(served: Running) -> None:
    status, _, _, reader = exchange(served, b"GET /mcp\r\n\r\n")
    assert status in (400, 505)
    assert reader.closed()


def test_expect_100_continue(served: Running) -> None:
    request = tool("echo", 1, text="after continue")
    head, _, body = request.partition(b"\r\n\r\n")
    sock = served.connect()
    sock.sendall(head + b"\r\nExpect: 100-continue\r\n\r\n")
    reader = Reader(sock)
    status, _, _ = reader.response()
    assert status == 100
    sock.sendall(body)
    status, _, reply = reader.response()
    assert status == 200
    assert text_of(reply) == "after continue"


def test_expect_100_continue_with_a_body_over_the_limit_gets_413_not_100(
    served: Running,
) -> None:
    data = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nContent-Length: 99999999\r\n\r\n"
    )
    status, headers, _, reader = exchange(served, data)
    assert status == 413
    assert headers["connection"] == "close"
    assert reader.closed()


@pytest.mark.parametrize("close", [False, True])
def test_413_is_read_by_a_client_that_sends_the_whole_body(served: Running, close: bool) -> None:
    size = 5 * 1024 * 1024 + 1
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + (b"Connection: close\r\n" if close else b"")
        + b"Content-Length: %d\r\n\r\n" % size
    )
    sock = served.connect()
    sock.sendall(head)
    sent = 0
    block = b"x" * 65536
    try:  # the server discards the body (lingering close) while the client sends it
        while sent < size:
            sent += sock.send(block[: size - sent])
    except (BrokenPipeError, ConnectionResetError):
        pass
    status, headers, _ = Reader(sock).response()
    assert status == 413
    assert headers["connection"] == "close"


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (b"Host: evil.example\r\nContent-Type: application/json\r\n", 403),
        (
            b"Host: 127.0.0.1\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\n",
            403,
        ),
        (b"Host: 127.0.0.1\r\nContent-Type: text/plain\r\n", 415),
        (b"Content-Type: application/json\r\n", 403),
    ],
)
def test_the_asgi_apps_gates_apply(served: Running, headers: bytes, status: int) -> None:
    data = b"POST /mcp HTTP/1.1\r\n" + headers + b"Content-Length: 2\r\n\r\n{}"
    got, _, body, _ = exchange(served, data)
    assert got == status
    assert json.loads(body)["error"]["code"] == -32600


def test_another_path_gets_404_and_the_connection_stays_open(served: Running) -> None:
    sock = served.connect()
    reader = Reader(sock)
    sock.sendall(b"GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    status, _, _ = reader.response()
    assert status == 404
    sock.sendall(tool("echo", 2, text="next"))
    status, _, body = reader.response()
    assert status == 200
    assert text_of(body) == "next"


def test_sse_stream_is_chunked(served: Running) -> None:
    status, headers, body, _ = exchange(
        served,
        post(
            "tools/call",
            {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": "p"}},
            3,
        ),
    )
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert headers["transfer-encoding"] == "chunked"
    events = [
        json.loads(line[5:]) for line in body.decode().splitlines() if line.startswith("data:")
    ]
    assert events[-1]["id"] == 3
    assert events[-1]["result"]["content"][0]["text"] == "2 steps"
    assert any(event.get("method") == "notifications/progress" for event in events)


def test_header_timeout_gets_408() -> None:
    with native(config(header_timeout_s=0.3)) as served:
        sock = served.connect()
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        status, headers, _ = Reader(sock).response()
        assert status == 408
        assert headers["connection"] == "close"


def test_a_head_trickled_in_pieces_is_timed_from_its_first_byte() -> None:
    # A header line every 0.1 s, each well within the timeout; the whole head is not: the
    # deadline is set once, when the first piece is read, and no later piece pushes it back.
    with native(config(header_timeout_s=0.4)) as served:
        sock = served.connect()
        started = time.monotonic()
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        while not select.select([sock], [], [], 0.1)[0] and time.monotonic() - started < 5:
            sock.sendall(b"X-Slow: 1\r\n")
        status, headers, _ = Reader(sock).response()
        assert status == 408
        assert headers["connection"] == "close"
        assert time.monotonic() - started < 2.0  # 0.4 s and a sweep, not 5 s of pieces


def test_a_body_below_the_minimum_rate_gets_408() -> None:
    with native(config(body_min_rate=1000, body_timeout_s=5.0)) as served:
        sock = served.connect()
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{"
        )
        status, _, _ = Reader(sock).response()
        assert status == 408


def test_an_idle_kept_alive_connection_is_closed() -> None:
    with native(config(keepalive_timeout_s=0.3)) as served:
        sock = served.connect()
        reader = Reader(sock)
        sock.sendall(tool("echo", 1, text="then idle"))
        assert reader.response()[0] == 200
        assert reader.closed()  # without a request, within the test's socket timeout


def test_connections_beyond_the_cap_get_503() -> None:
    with native(config(max_connections=2)) as served:
        kept = [served.connect(), served.connect()]
        for sock in kept:
            sock.sendall(tool("echo", 1, text="in"))
            assert Reader(sock).response()[0] == 200
        status, headers, _ = Reader(served.connect()).response()
        assert status == 503
        assert headers["retry-after"] == "1"


def test_a_client_that_stops_reading_stops_being_read_and_is_dropped() -> None:
    with native(config(keepalive_timeout_s=1.0)) as served:
        sock = served.connect()
        sock.setblocking(False)
        request = tool("echo", 1, text="x" * 50_000)  # each answer is about 50 kB
        limit = 64 * 1024 * 1024
        sent = 0
        pending = memoryview(request)
        stuck_since: float | None = None
        stuck = False
        deadline = time.monotonic() + 20
        while sent < limit and time.monotonic() < deadline:
            try:
                count = sock.send(pending)
            except BlockingIOError:  # the server stopped reading: its buffers are full
                stuck = True
                stuck_since = stuck_since or time.monotonic()
                if time.monotonic() - stuck_since > 0.5:
                    break
                time.sleep(0.05)
                continue
            except ConnectionResetError:
                # On a loaded machine the server's 1 s deadline may pass before the 0.5 s here
                # does: it dropped the connection it had stopped reading (what is tested).
                assert stuck, f"reset before the server stopped reading ({sent} bytes sent)"
                stuck_since = stuck_since or time.monotonic()
                break
            stuck_since = None
            sent += count
            pending = pending[count:] if count < len(pending) else memoryview(request)
        assert stuck_since is not None, f"the server kept reading ({sent} bytes sent)"
        assert sent < limit
        deadline = time.monotonic() + 5
        while served.connections() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert served.connections() == 0  # aborted after keepalive_timeout_s without reading


def test_health_is_200_then_503_while_draining() -> None:
    with native(config(health_path="/healthz")) as served:
        status, _, body, _ = exchange(served, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (status, body) == (200, b"ok\n")
        busy = served.connect()
        busy.sendall(tool("slow", 1, seconds=0.5, tag="drain"))
        time.sleep(0.1)

        async def begin() -> None:
            assert served.native.front is not None
            served.native.front.begin_drain()

        served.call(begin)
        status, _, _, _ = exchange(served, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 503
        status, headers, _, _ = exchange(served, tool("echo", 2, text="late"))
        assert status == 503
        assert headers["retry-after"] == "1"
        status, headers, body = Reader(busy).response()  # the call in flight finishes
        assert status == 200
        assert text_of(body) == "done"
        assert headers["connection"] == "close"


def test_drain_lets_in_flight_calls_finish_and_stops_accepting() -> None:
    with native() as served:
        socks = [served.connect() for _ in range(5)]
        for i, sock in enumerate(socks):
            sock.sendall(tool("slow", i, seconds=0.3, tag="graceful"))
        time.sleep(0.1)
        started = time.monotonic()
        served.call(lambda: served.native.drain(5.0))
        assert time.monotonic() - started < 3
        for sock in socks:
            status, _, body = Reader(sock).response()
            assert status == 200
            assert text_of(body) == "done"
        with pytest.raises(ConnectionRefusedError):
            served.connect()
