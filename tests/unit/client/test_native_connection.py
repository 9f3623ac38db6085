"""The native link's HTTP/1.1 connection and pool against hand-written server bytes on a real
127.0.0.1 socket: framing by length, chunks and close, interim responses, keep-alive, caps,
malformed and cut responses, pool caps, keep-alive expiry and hand-over."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from millimcp.client.native.connection import Connection
from millimcp.client.native.pool import Pool
from millimcp.codec.attachment import ATTACHMENT_MEDIA_TYPE
from millimcp.errors import ConnectionLost, FrameTooLarge, NotSent
from tests.conftest import free_port

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


async def read_request(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


def replying(*responses: bytes, close: bool = False) -> Answer:
    """A server that answers each request on a connection with the next of ``responses``."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            for response in responses:
                await read_request(reader)
                writer.write(response)
                await writer.drain()
            if close:
                writer.close()
                return
            await reader.read()  # until the client closes
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    return answer


@asynccontextmanager
async def serving(answer: Answer) -> AsyncIterator[tuple[int, list[int]]]:
    """A server on a free port; the list counts the connections it accepted."""
    accepted: list[int] = []
    tasks: list[asyncio.Task[None]] = []
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writers.append(writer)
        await answer(reader, writer)

    def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.append(asyncio.ensure_future(handle(reader, writer)))

    port = free_port()
    server = await asyncio.start_server(connected, "127.0.0.1", port)
    try:
        yield port, accepted
    finally:
        server.close()
        for writer in writers:
            writer.close()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


def pool(port: int, limit: int | None = 4, keepalive: int = 4, expiry_s: float = 30.0) -> Pool:
    return Pool(
        "127.0.0.1",
        port,
        ssl=None,
        limit=limit,
        keepalive=keepalive,
        expiry_s=expiry_s,
        connect_timeout_s=5.0,
    )


async def exchange(conns: Pool, *, limit: int = 1 << 20) -> tuple[Connection, bytes]:
    conn = await conns.acquire()
    conn.send([REQUEST], limit=limit, framed_limit=1 << 20)
    await conn.head()
    return conn, await conn.body()


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\nX-A: 2\r\n\r\nok"


async def test_keep_alive_reuses_one_connection() -> None:
    async with serving(replying(OK, OK, OK)) as (port, accepted):
        conns = pool(port)
        for _ in range(3):
            conn, body = await exchange(conns)
            assert (conn.status, conn.reason, body) == (200, "OK", b"ok")
            assert conn.headers["x-a"] == "1, 2"
            assert conn.reusable
            conns.release(conn)
        assert (conns.opened, conns.reused, len(accepted)) == (1, 2, 1)
        conns.close()


async def test_chunked_and_interim_responses() -> None:
    chunked = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    async with serving(replying(chunked)) as (port, _):
        conns = pool(port)
        conn, body = await exchange(conns)
        assert (conn.status, body) == (201, b"abcde")
        conns.close()


async def test_a_body_delimited_by_close_and_connection_close() -> None:
    until_close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it"
    async with serving(replying(until_close, close=True)) as (port, _):
        conns = pool(port)
        conn, body = await exchange(conns)
        assert body == b"all of it"
        assert not conn.reusable
        conns.release(conn)
        conn, body = await exchange(conns)  # the closed one is not reused
        assert conns.opened == 2
        conns.close()


@pytest.mark.parametrize(
    "response",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",  # cut mid-body
        b"NOT HTTP AT ALL\r\n\r\n",  # malformed
        b"",  # closed before any byte
    ],
    ids=["cut", "malformed", "nothing"],
)
async def test_broken_responses_are_connection_lost(response: bytes) -> None:
    async with serving(replying(response, close=True)) as (port, _):
        conns = pool(port)
        with pytest.raises(ConnectionLost):
            await exchange(conns)
        conns.close()


async def test_a_body_past_the_cap_is_frame_too_large() -> None:
    declared = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 100
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + b"y" * 64 + b"\r\n"
    for response in (declared, chunked):
        async with serving(replying(response)) as (port, _):
            conns = pool(port)
            with pytest.raises(FrameTooLarge):
                await exchange(conns, limit=50)
            conns.close()


async def test_framed_bodies_land_in_one_buffer_and_streams_are_chunked() -> None:
    framed = (
        f"HTTP/1.1 200 OK\r\nContent-Type: {ATTACHMENT_MEDIA_TYPE}\r\nContent-Length: 6\r\n\r\n"
    ).encode() + b"abcdef"
    stream = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    )
    async with serving(replying(framed, stream)) as (port, _):
        conns = pool(port)
        conn = await conns.acquire()
        conn.send([REQUEST], limit=1, framed_limit=100)  # the framed cap applies, not 1
        await conn.head()
        buffer = await conn.framed()
        assert buffer == bytearray(b"abcdef")
        assert buffer is conn.sink
        conns.release(conn)
        conn = await conns.acquire()
        conn.send([REQUEST], limit=1, framed_limit=100)  # a stream has no total cap
        await conn.head()
        assert [chunk async for chunk in conn.chunks()] == [b"hello"]
        assert conn.complete
        assert conn.reusable
        conns.release(conn)
        assert conns.reused == 1
        conns.close()


async def test_bytes_outside_an_exchange_close_the_connection() -> None:
    async def chatty(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK)
        await asyncio.sleep(0.05)
        writer.write(b"unasked")
        await reader.read()
        writer.close()

    async with serving(chatty) as (port, _):
        conns = pool(port)
        conn, _ = await exchange(conns)
        conns.release(conn)
        for _ in range(100):
            if conn.closed:
                break
            await asyncio.sleep(0.01)
        assert conn.closed
        conn, _ = await exchange(conns)
        assert conns.opened == 2
        conns.close()


async def test_the_cap_makes_callers_wait_and_hands_connections_on() -> None:
    async with serving(replying(OK, OK, OK)) as (port, accepted):
        conns = pool(port, limit=1)
        first = await conns.acquire()
        waiting = asyncio.ensure_future(conns.acquire())
        await asyncio.sleep(0.01)
        assert not waiting.done()
        first.send([REQUEST], limit=100, framed_limit=100)
        await first.head()
        await first.body()
        conns.release(first)
        assert await waiting is first  # handed over, not reconnected
        conns.release(first)
        assert len(accepted) == 1
        assert conns.reused == 1
        conns.close()
        with pytest.raises(NotSent):
            await conns.acquire()


async def test_expired_or_unkept_connections_are_not_reused() -> None:
    async with serving(replying(OK, OK)) as (port, _):
        conns = pool(port, expiry_s=0.01)
        conn, _ = await exchange(conns)
        conns.release(conn)
        await asyncio.sleep(0.05)
        conn, _ = await exchange(conns)
        assert (conns.opened, conns.reused) == (2, 0)
        conns.close()
    async with serving(replying(OK)) as (port, _):
        conns = pool(port, keepalive=0)
        conn, _ = await exchange(conns)
        conns.release(conn)
        assert conn.closed
        conns.close()


async def test_nothing_listening_is_not_sent() -> None:
    conns = pool(free_port())
    with pytest.raises(NotSent):
        await conns.acquire()
    assert conns.opened == 1


async def test_a_stream_read_slowly_pauses_the_socket_and_loses_nothing() -> None:
    size = 4 << 20
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % size
    )
    async with serving(replying(head + b"z" * size)) as (port, _):
        conns = pool(port)
        conn = await conns.acquire()
        conn.send([REQUEST], limit=1, framed_limit=1)
        await conn.head()
        await asyncio.sleep(0.2)  # the server writes it all meanwhile: the client must pause
        paused = conn._paused_reading
        total = 0
        async for chunk in conn.chunks():
            total += len(chunk)
        assert paused
        assert total == size
        assert not conn._paused_reading
        conns.release(conn)
        assert conns.reused == 0
        assert conn.reusable
        conns.close()


async def test_a_cancelled_waiter_passes_its_turn_on() -> None:
    async with serving(replying(OK, OK)) as (port, _accepted):
        conns = pool(port, limit=1)
        first = await conns.acquire()
        gone = asyncio.ensure_future(conns.acquire())
        after = asyncio.ensure_future(conns.acquire())
        await asyncio.sleep(0.01)
        first.close()
        conns.release(first)  # a free slot for `gone`, which is cancelled before it runs
        gone.cancel()
        second = await after  # the slot went on to the next waiter
        assert second is not first
        conns.release(second)
        conns.close()
        assert conns.opened == 2


def test_the_connection_runs_on_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop")

    async def main() -> tuple[int, int]:
        async with serving(replying(OK, OK)) as (port, _):
            conns = pool(port)
            for _ in range(2):
                conn, body = await exchange(conns)
                assert body == b"ok"
                conns.release(conn)
            conns.close()
            return conns.opened, conns.reused

    assert uvloop.run(main()) == (1, 1)


async def test_a_connection_the_server_closed_unseen_is_not_reused() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    closed = threading.Event()

    def serve() -> None:  # in a thread: it runs while the client's loop is blocked
        for _ in range(2):
            sock, _ = listener.accept()
            with contextlib.suppress(OSError), sock:
                sock.recv(65536)
                sock.sendall(OK)
                sock.recv(65536)
                sock.sendall(OK)
            closed.set()  # after its second answer, as a keep-alive timeout would

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        conns = pool(port)
        conns.check_after_s = 0.0
        conn, _ = await exchange(conns)
        conns.release(conn)
        second, _ = await exchange(conns)  # polled, still open: reused
        assert second is conn
        conns.release(conn)
        assert closed.wait(10)
        time.sleep(0.1)  # noqa: ASYNC251 (the loop must not run: the close stays unseen)
        assert not conn.closed
        assert conn.stale()
        third, body = await exchange(conns)
        assert third is not conn
        assert body == b"ok"
        assert (conns.opened, conns.reused) == (2, 1)
        conns.release(third)
        conns.close()
    finally:
        listener.close()
        thread.join(10)
