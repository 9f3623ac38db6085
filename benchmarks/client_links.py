"""The clients that ``client_overhead.py`` measures, and the server they call.

Each opener checks one answer in depth, then yields one ``Call`` per task (the same one when
the tasks share a client) and a function that says, after the run, what it negotiated:
``official`` (``mcp.Client``), ``millimcp`` (native link) and ``millimcp-aiohttp``, the raw
``aiohttp`` and ``streams`` loops, and ``lean`` (millimcp's client core over
:class:`StreamsLink`, a benchmark-only link).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from harness import (
    HOST,
    child_env,
)
from loadgen import ECHO_TEXT, ProtocolError, build_request, response_ok

PATH = "/mcp"
SERVER_MODULE = "millimcp_echo"


Call = Callable[[], Awaitable[bool]]
"""One ``tools/call``: True when the answer is a success carrying the echoed text."""


@dataclass(frozen=True)
class ClientSpec:
    name: str
    description: str


CLIENTS: dict[str, ClientSpec] = {
    c.name: c
    for c in (
        ClientSpec("official", "mcp 2.3.0 Client(url), defaults: mode='auto' (discover, modern)"),
        ClientSpec("millimcp", "millimcp Client.over_http(url), defaults: era='auto', native link"),
        ClientSpec("millimcp-aiohttp", "millimcp Client.over_http(url, http='aiohttp')"),
        ClientSpec("aiohttp", "raw aiohttp ClientSession, pre-serialized body and headers"),
        ClientSpec("streams", "raw asyncio streams, hand-written HTTP/1.1, one connection/task"),
        ClientSpec("lean", "millimcp's client core over StreamsLink (benchmark only, no aiohttp)"),
    )
}


async def echo_calls(client: Any, in_flight: int) -> list[Call]:
    """``in_flight`` copies of one ``echo`` call through ``client`` (the official SDK's or
    millimcp's: both have ``call_tool``), once a first call has answered as it should."""
    first = await client.call_tool("echo", {"text": ECHO_TEXT})
    text = getattr(first.content[0], "text", None) if first.content else None
    if first.is_error or text != ECHO_TEXT:
        raise RuntimeError(f"unexpected first answer: {first!r}")

    async def call() -> bool:
        result = await client.call_tool("echo", {"text": ECHO_TEXT})
        return not result.is_error

    return [call] * in_flight


@contextlib.asynccontextmanager
async def open_official(
    url: str, in_flight: int
) -> AsyncIterator[tuple[list[Call], Callable[[], str]]]:
    from mcp import Client  # the official SDK (mcp 2.3.0)

    async with Client(url) as client:
        calls = await echo_calls(client, in_flight)
        version = getattr(client.session, "protocol_version", None)
        yield calls, lambda: f"protocol {version}"


@contextlib.asynccontextmanager
async def open_millimcp(
    url: str, in_flight: int, http: Any = None
) -> AsyncIterator[tuple[list[Call], Callable[[], str]]]:
    from millimcp import Client

    async with Client.over_http(url, http=http) as client:
        yield (
            await echo_calls(client, in_flight),
            lambda: f"era {client.era}, {client.protocol_version}, {client.stats}",
        )


def split_request(request: bytes) -> tuple[dict[str, str], bytes]:
    """The MCP headers and body of :func:`loadgen.build_request`'s bytes (one source of truth)."""
    head, _, body = request.partition(b"\r\n\r\n")
    headers: dict[str, str] = {}
    for line in head.decode("ascii").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.lower() not in ("host", "content-length"):
            headers[name] = value.strip()
    return headers, body


@contextlib.asynccontextmanager
async def open_aiohttp(
    url: str, in_flight: int
) -> AsyncIterator[tuple[list[Call], Callable[[], str]]]:
    import aiohttp

    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    headers, body = split_request(build_request(HOST, port, PATH))
    marker = f'"{ECHO_TEXT}"'.encode()
    connector = aiohttp.TCPConnector(limit=in_flight)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def call() -> bool:
            async with session.post(url, data=body, headers=headers) as response:
                data = await response.read()
                return response_ok(response.status, data, marker)

        if not await call():
            raise RuntimeError("the first answer was not a success")
        yield [call] * in_flight, lambda: f"aiohttp {aiohttp.__version__}, limit={in_flight}"


class StreamConnection:
    """One kept-alive connection: write the request bytes, frame the answer by Content-Length."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes):
        self.reader = reader
        self.writer = writer
        self.request = request
        self.marker = f'"{ECHO_TEXT}"'.encode()

    async def call(self) -> bool:
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lower = head.lower()
        start = lower.find(b"\r\ncontent-length:")
        if start < 0:
            raise ProtocolError(f"no Content-Length: {head[:300]!r}")
        start += 17
        length = int(lower[start : lower.index(b"\r\n", start)])
        body = await self.reader.readexactly(length)
        return response_ok(int(head[9:12]), body, self.marker)


@contextlib.asynccontextmanager
async def open_streams(
    url: str, in_flight: int
) -> AsyncIterator[tuple[list[Call], Callable[[], str]]]:
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    request = build_request(HOST, port, PATH)
    conns: list[StreamConnection] = []
    try:
        for _ in range(in_flight):
            reader, writer = await asyncio.open_connection(HOST, port)
            conns.append(StreamConnection(reader, writer, request))
        if not await conns[0].call():
            raise RuntimeError("the first answer was not a success")
        yield [c.call for c in conns], lambda: f"{in_flight} connections"
    finally:
        for conn in conns:
            conn.writer.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                await conn.writer.wait_closed()


class StreamsLink:
    """A benchmark-only :class:`millimcp.client.link.Link`: HTTP/1.1 keep-alive over asyncio
    streams, replies framed by ``Content-Length`` (JSON only: no SSE, no compression, no
    session, no server-to-client messages). Under millimcp's client core it shows what the core
    would cost over a transport as lean as the ``streams`` loop."""

    kind = "http"
    session_id = None

    def __init__(self, url: str) -> None:
        from millimcp.client.link import Reply
        from millimcp.protocol import decode_message

        self.reply, self.decode = Reply, decode_message
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or HOST, parts.port or 80
        self.prefix = (
            f"POST {parts.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        ).encode()
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        idle, self.idle = self.idle, []
        for _, writer in idle:
            writer.close()

    async def request(
        self,
        request_id: int | str,
        body: bytes,
        *,
        headers: Any,
        on_message: Any,
        attachment: Any = None,
    ) -> Any:
        status, data = await self._exchange(body, headers)
        return self.reply(self.decode(data), status)

    async def send(self, body: bytes, *, headers: Any) -> None:
        await self._exchange(body, headers)

    async def _exchange(self, body: bytes, headers: Any) -> tuple[int, bytes]:
        conn = self.idle.pop() if self.idle else await asyncio.open_connection(self.host, self.port)
        reader, writer = conn
        try:
            extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            writer.write(
                b"%s%sContent-Length: %d\r\n\r\n%s" % (self.prefix, extra.encode(), len(body), body)
            )
            head = await reader.readuntil(b"\r\n\r\n")
            lower = head.lower()
            start = lower.find(b"\r\ncontent-length:")
            if start < 0:
                raise ProtocolError(f"no Content-Length: {head[:300]!r}")
            start += 17
            data = await reader.readexactly(int(lower[start : lower.index(b"\r\n", start)]))
        except BaseException:
            writer.close()  # a cancelled or broken exchange never goes back to the pool
            raise
        self.idle.append(conn)
        return int(head[9:12]), data

    async def unsolicited(self) -> AsyncIterator[Any]:
        return
        yield

    def reset_session(self) -> None:
        return None


@contextlib.asynccontextmanager
async def open_lean(
    url: str, in_flight: int
) -> AsyncIterator[tuple[list[Call], Callable[[], str]]]:
    from millimcp import Client

    async with Client(StreamsLink(url), key=url) as client:  # type: ignore[arg-type]
        calls = await echo_calls(client, in_flight)
        yield calls, lambda: f"era {client.era}, {client.protocol_version}"


def open_millimcp_aiohttp(
    url: str, in_flight: int
) -> contextlib.AbstractAsyncContextManager[tuple[list[Call], Callable[[], str]]]:
    return open_millimcp(url, in_flight, http="aiohttp")


OPENERS: dict[str, Callable[[str, int], contextlib.AbstractAsyncContextManager[Any]]] = {
    "official": open_official,
    "millimcp": open_millimcp,
    "millimcp-aiohttp": open_millimcp_aiohttp,
    "aiohttp": open_aiohttp,
    "streams": open_streams,
    "lean": open_lean,
}


def check_import(client: str) -> str | None:
    module = {
        "official": "mcp",
        "millimcp": "millimcp",
        "millimcp-aiohttp": "millimcp",
        "aiohttp": "aiohttp",
    }.get(client)
    if module is None:
        return None
    probe = (
        "import millimcp; millimcp.Client.over_http" if module == "millimcp" else f"import {module}"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], env=child_env(), capture_output=True, text=True, check=False
    )
    if proc.returncode == 0:
        return None
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"
