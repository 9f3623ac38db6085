"""The native front's :class:`~millimcp.transports.http.Exchange`: answers written as bytes.

The session layer answers through an exchange (``reply``, ``accepted``, the SSE methods,
``wait_disconnect``). This one is the same struct with the same methods, but it writes HTTP/1.1
bytes straight to its connection instead of sending ASGI message dicts: a JSON response is one
``transport.write`` of the head and the body. An SSE stream is chunked (close-delimited for an
HTTP/1.0 client). When the connection's write buffer is over its high-water mark, each method
waits for it to drain before it returns (the connection stops reading meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Final, Protocol

from millimcp.codec import ATTACHMENT_MEDIA_TYPE, SSE_KEEPALIVE, sse_event
from millimcp.codec.attachment import frame
from millimcp.codec.compress import compress, negotiate
from millimcp.observe import RequestRecord, clock
from millimcp.transports.http import Exchange, HttpConfig, Message
from millimcp.transports.native.wire import CHUNK_END, CLOCK, chunk, head, plain_response

__all__ = ["NativeExchange", "Writer"]


class Writer(Protocol):
    """What an exchange needs of its connection."""

    write_paused: bool

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    async def wait_closed(self) -> None: ...


_JSON_LENGTH: Final = b"content-type: application/json\r\ncontent-length: "
_JSON_OK: Final = b"HTTP/1.1 200 OK\r\n"
_SSE: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_CHUNKED: Final = (b"transfer-encoding", b"chunked")
_ATTACHMENT: Final = ATTACHMENT_MEDIA_TYPE.encode()


async def _no_receive() -> Message:  # the ASGI fields of the base struct are not used here
    return {"type": "http.disconnect"}


async def _no_send(message: Message) -> None:
    raise RuntimeError("a native exchange sends no ASGI messages")


class NativeExchange(Exchange, eq=False):
    """One request/response on a native connection (see the module docstring)."""

    conn: Writer | None = None
    close: bool = False
    """Answer with ``Connection: close`` (the client asked for it, or the server drains)."""
    keep_alive_10: bool = False
    chunked: bool = True
    """Whether an SSE stream is chunked (HTTP/1.1) or close-delimited (HTTP/1.0)."""
    finished: bool = False
    owner: Callable[[list[tuple[bytes, bytes]]], None] | None = None
    """Called with the headers of the response (a protected endpoint records the session it
    opens: see :class:`~millimcp.transports.native.connection.Request`)."""

    @classmethod
    def on(
        cls,
        conn: Writer,
        config: HttpConfig,
        accept_encoding: bytes | None,
        close: bool,
        http10: bool,
        owner: Callable[[list[tuple[bytes, bytes]]], None] | None = None,
    ) -> NativeExchange:
        return cls(
            _no_receive,
            _no_send,
            config,
            accept_encoding,
            conn=conn,
            close=close,
            keep_alive_10=http10 and not close,
            chunked=not http10,
            owner=owner,
        )

    async def _write(self, data: bytes) -> None:
        conn = self.conn
        assert conn is not None
        conn.write(data)
        if conn.write_paused:
            await conn.drain()

    async def reply(
        self,
        status: int,
        body: bytes,
        headers: list[tuple[bytes, bytes]] | None = None,
        attachment: list[Any] | None = None,
        compressible: bool = True,
        trace: RequestRecord | None = None,
    ) -> None:
        self.started = True
        self.finished = True
        config = self.config
        if attachment is not None and body:
            parts = frame(body, attachment)
            size = sum(len(part) for part in parts)
            hdrs = [(b"content-type", _ATTACHMENT), (b"content-length", b"%d" % size)]
            if headers:
                hdrs += headers
                if self.owner is not None:
                    self.owner(headers)
            self._stamp(hdrs, trace)
            conn = self.conn
            assert conn is not None
            conn.write(head(status, hdrs, close=self.close, keep_alive_10=self.keep_alive_10))
            for part in parts:
                conn.write(part)
            if conn.write_paused:
                await conn.drain()
            return
        if (
            status == 200
            and not headers
            and trace is None
            and not self.close
            and not self.keep_alive_10
            and (len(body) < config.compress_min_bytes or not config.compression)
            and body
        ):
            # The hot path: a small JSON result. One bytes object, one write.
            conn = self.conn
            assert conn is not None
            conn.write(
                b"%s%s%s%d\r\n\r\n%s" % (_JSON_OK, CLOCK.line, _JSON_LENGTH, len(body), body)
            )
            if conn.write_paused:
                await conn.drain()
            return
        if not body:
            hdrs = [(b"content-length", b"0")]
        elif len(body) < config.compress_min_bytes or not config.compression or not compressible:
            hdrs = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        else:
            coding = negotiate(self.accept_encoding, config.compression)
            hdrs = [(b"content-type", b"application/json"), (b"vary", b"accept-encoding")]
            if coding is not None:
                body = compress(body, coding)
                hdrs.append((b"content-encoding", coding.encode()))
            hdrs.append((b"content-length", b"%d" % len(body)))
        if headers:
            hdrs += headers
            if self.owner is not None:
                self.owner(headers)
        self._stamp(hdrs, trace)
        await self._write(
            head(status, hdrs, close=self.close, keep_alive_10=self.keep_alive_10) + body
        )

    def _stamp(self, hdrs: list[tuple[bytes, bytes]], trace: RequestRecord | None) -> None:
        if trace is not None:  # the request is timed up to here; compression included
            trace.sent_at = clock()
            if self.config.server_timing:
                hdrs.append((b"server-timing", trace.server_timing()))

    async def method_not_allowed(self) -> None:
        self.started = True
        self.finished = True
        await self._write(
            plain_response(
                405, b"Method Not Allowed", [(b"allow", b"GET, POST, DELETE")], close=self.close
            )
        )

    async def accepted(self) -> None:
        self.started = True
        self.finished = True
        await self._write(
            head(
                202,
                [(b"content-length", b"0")],
                close=self.close,
                keep_alive_10=self.keep_alive_10,
            )
        )

    async def start_stream(self, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        if self.streaming:
            return
        self.started = True
        self.streaming = True
        hdrs = [*_SSE, *(headers or ())]
        if headers and self.owner is not None:
            self.owner(headers)
        if self.chunked:
            hdrs.append(_CHUNKED)
        else:
            self.close = True  # close-delimited: the end of the stream is the end of the body
        await self._write(head(200, hdrs, close=self.close))
        if self.config.sse_keepalive_s > 0:
            self._keepalive = asyncio.ensure_future(self._pings())

    async def emit(self, message: bytes) -> None:
        if not self.streaming:
            await self.start_stream()
        await self.send_raw(sse_event(message))

    async def send_event(self, message: bytes, event_id: str | None = None) -> None:
        await self.send_raw(sse_event(message, event_id))

    async def send_raw(self, chunk_bytes: bytes) -> None:
        if self.finished:
            return
        await self._write(chunk(chunk_bytes) if self.chunked else chunk_bytes)

    async def end_stream(self) -> None:
        self.stop_keepalive()
        if self.finished:
            return
        self.finished = True
        if self.chunked:
            await self._write(CHUNK_END)

    async def wait_disconnect(self) -> None:
        conn = self.conn
        assert conn is not None
        await conn.wait_closed()

    async def _pings(self) -> None:
        interval = self.config.sse_keepalive_s
        with contextlib.suppress(OSError, RuntimeError):
            while not self.finished:
                await asyncio.sleep(interval)
                await self.send_raw(SSE_KEEPALIVE)
