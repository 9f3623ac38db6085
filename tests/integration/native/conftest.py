"""An in-process native front (its own event loop in a thread) and raw-socket helpers.

The attack tests speak bytes to it, so that what the parser and the connection do with
malformed, slow or hostile input is seen exactly; the server runs in this process so that
its coverage counts and its state (connections, held body bytes) can be read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

from millimcp.transports.http import HttpConfig
from millimcp.transports.native import NativeServer
from tests.integration.http.conftest import request_for
from tests.servers.basic_server import server as basic_server

T = TypeVar("T")


class Running:
    """A native server on its own loop: ``port``, ``call`` (run a coroutine there)."""

    def __init__(self, native: NativeServer, loop: asyncio.AbstractEventLoop) -> None:
        self.native = native
        self.loop = loop
        self.sockets: list[socket.socket] = []

    @property
    def port(self) -> int:
        return self.native.port

    def call(self, make: Callable[[], Any], timeout: float = 30) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(make(), self.loop)
        return future.result(timeout)

    def connections(self) -> int:
        async def count() -> int:
            return self.native.connections

        return int(self.call(count))

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sockets.append(sock)
        return sock

    def close_sockets(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()


@contextmanager
def native(config: HttpConfig | None = None) -> Iterator[Running]:
    """Serve tests/servers/basic_server.py on the native front with ``config``."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    app = basic_server.asgi(http=config or HttpConfig())
    server = NativeServer(app, port=0)
    running = Running(server, loop)
    running.call(server.start)
    try:
        yield running
    finally:
        running.close_sockets()
        running.call(lambda: server.drain(0.5))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture(scope="module")
def served() -> Iterator[Running]:
    with native() as running:
        yield running


@pytest.fixture(autouse=True)
def _close_sockets(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "served" in request.fixturenames:
        request.getfixturevalue("served").close_sockets()


def config(**changes: Any) -> HttpConfig:
    return dataclasses.replace(HttpConfig(), **changes)


def post(
    method: str,
    params: dict[str, Any] | None = None,
    request_id: int = 1,
    extra: bytes = b"",
    version: bytes = b"1.1",
) -> bytes:
    """A whole POST /mcp request as bytes."""
    body, headers = request_for(method, params, request_id)
    lines = [b"POST /mcp HTTP/" + version, b"Host: 127.0.0.1"]
    lines += [f"{name}: {value}".encode() for name, value in headers.items()]
    lines.append(b"Content-Length: %d" % len(body))
    head = b"\r\n".join(lines) + b"\r\n" + extra + b"\r\n"
    return head + body


def tool(name: str, request_id: int = 1, **arguments: Any) -> bytes:
    return post("tools/call", {"name": name, "arguments": arguments}, request_id)


class Reader:
    """Reads HTTP/1.1 responses off a socket (Content-Length or chunked bodies)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            if not self._fill():
                raise EOFError(self.buffer)
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self._fill():
                raise EOFError(self.buffer)
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def response(self) -> tuple[int, dict[str, str], bytes]:
        status_line = self._line()
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while line := self._line():
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if status == 100 or status == 204:
            return status, headers, b""
        if headers.get("transfer-encoding") == "chunked":
            parts = []
            while size := int(self._line().split(b";")[0], 16):
                parts.append(self._exactly(size))
                self._exactly(2)
            self._exactly(2)
            return status, headers, b"".join(parts)
        if "content-length" in headers:
            return status, headers, self._exactly(int(headers["content-length"]))
        while self._fill():
            pass
        body, self.buffer = self.buffer, b""
        return status, headers, body

    def closed(self) -> bool:
        """Whether the peer closed (EOF or reset) with nothing more to read."""
        try:
            return not self.buffer and not self._fill()
        except ConnectionResetError:
            return True
