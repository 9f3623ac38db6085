"""Streamable HTTP, server side, as a plain ASGI app.

The app checks what HTTP alone can check (path, method, Host and Origin, content type,
body size), reads the body, and hands the bytes with the MCP headers to a
:class:`MessageHandler` together with an :class:`Exchange` through which the handler
answers: one JSON body, ``202 Accepted``, or an SSE stream of events. It never decodes
JSON-RPC itself. GET (a handshake-era session's stream) and DELETE (the end of a session)
go to the handler too; which of them it serves is the handler's business.

A body in the ``dev.millimcp/tensor`` framing (:mod:`millimcp.codec.attachment`: a JSON
message and one binary attachment) is split here: the handler gets the JSON part as the body
and the attachment, not copied, as ``exchange.attachment`` (a view of a writable buffer). A
reply sent with ``attachment=`` is framed the same way. What the attachment means is not the
transport's business.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import msgspec

from millimcp.codec import ATTACHMENT_MEDIA_TYPE, SSE_KEEPALIVE, sse_event
from millimcp.codec.attachment import AttachmentFramingError, frame, split
from millimcp.codec.compress import compress, negotiate
from millimcp.observe import SERVER_TIMING, TRACE, RequestRecord, clock
from millimcp.protocol import McpHeaders
from millimcp.transports.body import (
    BodyBudget,
    Refusal,
    Undecodable,
    decoded,
    read_more,
    read_writable,
    refuse,
)
from millimcp.transports.body import error as _error
from millimcp.transports.body import plain as _plain
from millimcp.transports.drain import DrainingHandler, health_route
from millimcp.transports.verdicts import LOOPBACK_HOSTS, HeadVerdicts

__all__ = ["Exchange", "HttpConfig", "MessageHandler", "StreamableHTTPApp", "mcp_headers"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_JSON: Final = b"application/json"
_JSON_TYPE: Final = (b"content-type", _JSON)
_JSON_HEADERS: Final = [_JSON_TYPE]
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_ALLOW: Final = [(b"allow", b"GET, POST, DELETE")]
_ATTACHMENT: Final = ATTACHMENT_MEDIA_TYPE.encode()
_ATTACHMENT_HEADERS: Final = [(b"content-type", _ATTACHMENT)]
_VARY: Final = (b"vary", b"accept-encoding")


@dataclass(frozen=True, slots=True)
class HttpConfig:
    """Settings of the HTTP binding. Defaults are safe for a server bound to loopback."""

    path: str | None = "/mcp"
    """Endpoint path; ``None`` answers on any path (useful when mounted)."""
    max_body_bytes: int = 4 * 1024 * 1024
    allowed_hosts: tuple[str, ...] | None = LOOPBACK_HOSTS
    """Host header names accepted (port ignored); ``None`` accepts any (DNS-rebinding risk)."""
    allowed_origins: tuple[str, ...] | None = None
    """Origins accepted besides loopback ones; ``("*",)`` accepts any."""
    sse_keepalive_s: float = 15.0
    """Seconds between keep-alive comments on a quiet SSE stream."""
    compression: tuple[str, ...] = ("zstd", "gzip")
    """Codings offered for JSON responses, preferred first (negotiated with the client's
    ``Accept-Encoding``); ``()`` turns response compression off. ``zstd`` needs the
    ``compress`` extra. SSE streams are never compressed (see docs/serving.md)."""
    compress_min_bytes: int = 1024
    """Responses shorter than this are sent as they are: compressing them gains nothing."""
    decompress_requests: bool = True
    """Accept request bodies with ``Content-Encoding`` zstd, gzip or deflate; the decoded body
    is held to ``max_body_bytes`` (413 past it), an unknown coding gets 415."""
    server_timing: bool = False
    """Send a ``Server-Timing`` header with the stage timings of each JSON response."""
    max_attachment_bytes: int = 64 * 1024 * 1024
    """Size limit of a body with a binary attachment (``dev.millimcp/tensor``); its JSON part
    is still held to ``max_body_bytes``."""
    # Limits against slow and hostile clients, and shutdown. Every HTTP front (the ASGI app
    # under uvicorn/granian where the server lets it, the native front always) honours them.
    header_timeout_s: float = 10.0
    """Seconds to receive a request's line and headers once its first byte arrived."""
    body_timeout_s: float = 30.0
    """Seconds to receive a whole request body, unless it keeps ``body_min_rate`` or better."""
    body_min_rate: int = 64 * 1024
    """Bytes per second a body must keep after its first second (slower: 408 and close)."""
    keepalive_timeout_s: float = 60.0
    """Seconds an idle kept-alive connection stays open."""
    max_connections: int = 1024
    """Open connections per process; beyond it a new one gets 503 with ``Retry-After``."""
    max_body_bytes_in_flight: int = 256 * 1024 * 1024
    """Body bytes held across all connections at once; beyond it, 503 with ``Retry-After``."""
    linger_bytes: int = 64 * 1024 * 1024
    """After an early refusal (413, 415, 403...) with a body still coming, up to this many bytes
    are read and discarded so that the client reads the answer before the connection closes."""
    linger_s: float = 5.0
    """Seconds the discard after an early refusal may take, at most."""
    graceful_timeout_s: float = 30.0
    """On SIGTERM/SIGINT, seconds in-flight calls get to finish before the process exits."""
    health_path: str | None = None
    """Readiness endpoint (``"/healthz"``): 200 while serving, 503 once draining; off by
    default."""


class Exchange(msgspec.Struct, eq=False):
    """One HTTP request/response: how a handler answers. Created by the transport.

    A struct, not a plain class: one is built per request and msgspec builds it in C. Its
    fields are the transport's own; the session reads :attr:`attachment` and
    :attr:`streaming`, and answers through the methods.
    """

    _receive: Receive
    _send: Send
    config: HttpConfig
    accept_encoding: bytes | None = None
    """The request's ``Accept-Encoding``: responses above the threshold are compressed."""
    started: bool = False
    streaming: bool = False
    _keepalive: asyncio.Task[None] | None = None
    attachment: memoryview | None = None
    """The request's binary attachment (``dev.millimcp/tensor`` framing), writable, not copied."""

    async def reply(
        self,
        status: int,
        body: bytes,
        headers: list[tuple[bytes, bytes]] | None = None,
        attachment: list[Any] | None = None,
        compressible: bool = True,
        trace: RequestRecord | None = None,
    ) -> None:
        """Send the whole response: a JSON body (or none when ``body`` is empty).

        A body of ``compress_min_bytes`` or more is compressed with the coding negotiated from
        ``Accept-Encoding`` and carries ``Vary: Accept-Encoding`` either way, unless it is not
        ``compressible``. With an ``attachment`` (buffers) the body is framed with it
        (``dev.millimcp/tensor``) and sent uncompressed. ``trace``: the request's record, whose
        send time is stamped here (and sent as ``Server-Timing`` when configured).
        """
        self.started = True
        config = self.config
        size = len(body)
        if (
            size
            and attachment is None
            and headers is None
            and trace is None
            and size < config.compress_min_bytes
        ):  # the common answer: a short JSON body, nothing else to add
            await self._send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [_JSON_TYPE, (b"content-length", b"%d" % size)],
                }
            )
            await self._send({"type": "http.response.body", "body": body})
            return
        if attachment is not None and body:
            await self._reply_framed(status, body, attachment, headers, trace)
            return
        if not body:
            hdrs = []
        elif (
            len(body) < self.config.compress_min_bytes
            or not self.config.compression
            or not compressible
        ):
            hdrs = [*_JSON_HEADERS, (b"content-length", b"%d" % len(body))]
        else:
            coding = negotiate(self.accept_encoding, self.config.compression)
            hdrs = [*_JSON_HEADERS, _VARY]
            if coding is not None:
                body = compress(body, coding)
                hdrs.append((b"content-encoding", coding.encode()))
            hdrs.append((b"content-length", b"%d" % len(body)))
        if headers:
            hdrs += headers
        if trace is not None:  # the request is timed up to here; compression included
            trace.sent_at = clock()
            if self.config.server_timing:
                hdrs.append((b"server-timing", trace.server_timing()))
        await self._send({"type": "http.response.start", "status": status, "headers": hdrs})
        await self._send({"type": "http.response.body", "body": body})

    async def method_not_allowed(self) -> None:
        """405: no GET stream or DELETE outside a handshake-era session."""
        self.started = True
        await _plain(self._send, 405, b"Method Not Allowed", _ALLOW)

    async def _reply_framed(
        self,
        status: int,
        body: bytes,
        attachment: list[Any],
        headers: list[tuple[bytes, bytes]] | None,
        trace: RequestRecord | None,
    ) -> None:
        parts = frame(body, attachment)
        size = sum(len(part) for part in parts)
        hdrs = [*_ATTACHMENT_HEADERS, (b"content-length", b"%d" % size), *(headers or [])]
        if trace is not None:
            trace.sent_at = clock()
            if self.config.server_timing:
                hdrs.append((b"server-timing", trace.server_timing()))
        send = self._send
        await send({"type": "http.response.start", "status": status, "headers": hdrs})
        last = len(parts) - 1
        for i, part in enumerate(parts):
            await send({"type": "http.response.body", "body": part, "more_body": i < last})

    async def accepted(self) -> None:
        self.started = True
        await self._send({"type": "http.response.start", "status": 202, "headers": []})
        await self._send({"type": "http.response.body", "body": b""})

    async def start_stream(self, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        """Switch to an SSE response; from here on, messages go out as events."""
        if self.streaming:
            return
        self.started = True
        self.streaming = True
        hdrs = _SSE_HEADERS if headers is None else [*_SSE_HEADERS, *headers]
        await self._send({"type": "http.response.start", "status": 200, "headers": hdrs})
        if self.config.sse_keepalive_s > 0:
            self._keepalive = asyncio.create_task(self._send_keepalives())

    async def emit(self, message: bytes) -> None:
        """Send a message ahead of the response, switching to SSE on the first one."""
        if not self.streaming:
            await self.start_stream()
        await self._send(
            {"type": "http.response.body", "body": sse_event(message), "more_body": True}
        )

    async def send_event(self, message: bytes, event_id: str | None = None) -> None:
        await self._send(
            {"type": "http.response.body", "body": sse_event(message, event_id), "more_body": True}
        )

    async def send_raw(self, chunk: bytes) -> None:
        """Send already-framed SSE bytes (a priming event, a comment)."""
        await self._send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def end_stream(self) -> None:
        self.stop_keepalive()
        await self._send({"type": "http.response.body", "body": b""})

    def stop_keepalive(self) -> None:
        """Stop the keep-alive comments (the stream ended, or the client left)."""
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None

    async def wait_disconnect(self) -> None:
        """Return when the client goes away (the body has been read already)."""
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                return

    async def _send_keepalives(self) -> None:
        interval = self.config.sse_keepalive_s
        with contextlib.suppress(OSError, RuntimeError):
            while True:
                await asyncio.sleep(interval)
                await self._send(
                    {"type": "http.response.body", "body": SSE_KEEPALIVE, "more_body": True}
                )


class MessageHandler(Protocol):
    """What the transport calls with each POSTed message, GET and DELETE."""

    def handle_http(self, body: bytes, headers: McpHeaders, exchange: Exchange) -> Awaitable[None]:
        """Serve one POSTed message (an ``async def`` does; so does a function that returns
        the awaitable that does)."""

    async def handle_get(
        self, headers: McpHeaders, last_event_id: str | None, exchange: Exchange
    ) -> None: ...

    async def handle_delete(self, headers: McpHeaders, exchange: Exchange) -> None: ...


class StreamableHTTPApp:
    """The ASGI application for one MCP endpoint."""

    def __init__(
        self,
        handler: MessageHandler,
        config: HttpConfig | None = None,
        lifespan: Callable[[], contextlib.AbstractAsyncContextManager[None]] | None = None,
    ) -> None:
        self.handler = handler
        self.config = config or HttpConfig()
        self._lifespan = lifespan
        self.verdicts = HeadVerdicts(self.config.allowed_hosts, self.config.allowed_origins)
        """What each (Host, Origin, Content-Type, method) gets, remembered (both fronts)."""
        self._limit_digits = len(str(self.config.max_body_bytes))
        self.routes: dict[str, Callable[[Scope, Receive, Send], Awaitable[None]]] = {}
        """Other paths answered next to the endpoint (``/metrics``), relative to the mount:
        looked up only when the path is not the endpoint's, so they cost MCP calls nothing."""
        if self.config.server_timing:
            TRACE.add(SERVER_TIMING)
        self.budget = BodyBudget(self.config.max_body_bytes_in_flight)
        """Body bytes held across this app's connections (``max_body_bytes_in_flight``)."""
        self.draining = False
        self.on_drain: list[Callable[[], None]] = []
        """Called once when :meth:`drain` starts (the server ends its streams there)."""
        if self.config.health_path is not None:
            self.routes[self.config.health_path] = health_route(self)

    def drain(self) -> None:
        """Stop taking new work (SIGTERM): readiness turns 503, new requests get 503 with
        ``Retry-After``, streams end cleanly; requests already in the handler finish."""
        if self.draining:
            return
        self.draining = True
        self.handler = DrainingHandler(self.handler)
        for callback in self.on_drain:
            callback()

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes] | None = None
    ) -> None:
        """The ASGI application. ``headers``: ``dict(scope["headers"])``, when the caller in
        front of the app has built it already (the auth gate does: one dict per request)."""
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self._run_lifespan(receive, send)
            return
        config = self.config
        if config.path is not None and scope["path"] != config.path:
            root = scope.get("root_path", "")  # mounted: the path is relative to the mount
            if not (root and scope["path"] == root + config.path):
                route = self._route(scope["path"], root)
                if route is None:
                    await _plain(send, 404, b"Not Found")
                else:
                    await route(scope, receive, send)
                return
        raw_headers = scope["headers"]
        if headers is None:
            headers = dict(raw_headers)  # names are lower-case in ASGI
        get = headers.get
        content_type = get(b"content-type")
        method = scope["method"]
        refusal = self.verdicts[(get(b"host"), get(b"origin"), content_type, method)]
        if refusal is not None:
            status, text = refusal
            if status == 405:
                await _plain(send, 405, b"Method Not Allowed", _ALLOW)
            else:
                await refuse(receive, send, status, text, headers, config=config)
            return
        if method != "POST":
            await self._serve_other(scope, get, receive, send)
            return
        if (
            content_type is not None
            and content_type != _JSON
            and content_type.startswith(_ATTACHMENT)
        ):
            await self._handle_framed(scope, receive, send, headers)
            return
        declared = get(b"content-length")
        if (
            declared is not None
            and len(declared) >= self._limit_digits  # shorter numbers are under the limit
            and (not declared.isdigit() or int(declared) > config.max_body_bytes)
        ):
            limit = config.max_body_bytes
            await refuse(
                receive,
                send,
                413,
                f"Request body larger than {limit} bytes",
                headers,
                config=config,
            )
            return
        message = await receive()
        if message.get("more_body"):
            await self._handle_long(scope, receive, send, headers, message["body"])
            return
        body = message.get("body", b"")
        if len(body) > config.max_body_bytes:
            await _error(send, 413, f"Request body larger than {config.max_body_bytes} bytes")
            return
        coding = get(b"content-encoding")
        if coding is not None and config.decompress_requests:
            plain = decoded(body, coding, config.max_body_bytes)
            if isinstance(plain, Undecodable):
                await _error(send, *plain)
                return
            body = plain
        # mcp_headers, inlined: this is the hot path. The values recur (a few versions,
        # methods and names): each is decoded once and remembered (_TEXT).
        version = get(b"mcp-protocol-version")
        mcp_method = get(b"mcp-method")
        name = get(b"mcp-name")
        session = get(b"mcp-session-id")
        mcp = McpHeaders(
            None if version is None else _TEXT.get(version) or _text(version),
            None if mcp_method is None else _TEXT.get(mcp_method) or _text(mcp_method),
            None if name is None else _TEXT.get(name) or _text(name),
            raw_headers,
            None if session is None else session.decode("latin-1"),
        )
        await self.handler.handle_http(
            body, mcp, Exchange(receive, send, config, get(b"accept-encoding"))
        )

    async def _handle_long(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes], first: bytes
    ) -> None:
        """A body that comes in several chunks: read within the limits, held in the budget
        until the handler is done with it."""
        config = self.config
        body = await read_more(receive, first, config.max_body_bytes, self.budget, config)
        if isinstance(body, Refusal):
            await body.send(receive, send, headers, config)
            return
        held = len(body)
        try:
            coding = headers.get(b"content-encoding")
            if coding is not None and config.decompress_requests:
                plain = decoded(body, coding, config.max_body_bytes)
                if isinstance(plain, Undecodable):
                    await _error(send, *plain)
                    return
                body = plain
            exchange = Exchange(receive, send, config, headers.get(b"accept-encoding"))
            mcp = mcp_headers(scope["headers"], headers.get)
            await self.handler.handle_http(body, mcp, exchange)
        finally:
            self.budget.give(held)

    async def _serve_other(
        self, scope: Scope, get: Callable[[bytes], bytes | None], receive: Receive, send: Send
    ) -> None:
        """GET (open or resume a stream) and DELETE (end a session)."""
        version = get(b"mcp-protocol-version")
        session = get(b"mcp-session-id")
        mcp = McpHeaders(
            None if version is None else version.decode("latin-1"),
            session_id=None if session is None else session.decode("latin-1"),
        )
        exchange = Exchange(receive, send, self.config)
        if scope["method"] == "DELETE":
            await self.handler.handle_delete(mcp, exchange)
            return
        accept = get(b"accept")
        if accept is not None and b"text/event-stream" not in accept and b"*/*" not in accept:
            await _error(send, 406, "Not Acceptable: GET opens a text/event-stream")
            return
        last_event_id = get(b"last-event-id")
        await self.handler.handle_get(
            mcp, None if last_event_id is None else last_event_id.decode("latin-1"), exchange
        )

    async def _handle_framed(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]
    ) -> None:
        """A body with a binary attachment: read it into one writable buffer and split it."""
        config = self.config
        coding = headers.get(b"content-encoding")
        if coding is not None and coding.strip().lower() != b"identity":
            text = (
                "Unsupported Media Type: a body with an attachment is sent without Content-Encoding"
            )
            await refuse(receive, send, 415, text, headers, config=config)
            return
        limit = config.max_attachment_bytes
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            text = f"Request body larger than {limit} bytes"
            await refuse(receive, send, 413, text, headers, config=config)
            return
        size = None if declared is None else int(declared)
        body = await read_writable(receive, limit, size, self.budget, config)
        if isinstance(body, Refusal):
            await body.send(receive, send, headers, config)
            return
        held = len(body)
        try:
            try:
                message, attachment = split(body, config.max_body_bytes)
            except AttachmentFramingError as exc:
                await _error(send, 400, f"Invalid request: {exc}")
                return
            exchange = Exchange(receive, send, config, headers.get(b"accept-encoding"))
            exchange.attachment = attachment
            mcp = mcp_headers(scope["headers"], headers.get)
            await self.handler.handle_http(message, mcp, exchange)
        finally:
            self.budget.give(held)

    def _route(
        self, path: str, root: str
    ) -> Callable[[Scope, Receive, Send], Awaitable[None]] | None:
        routes = self.routes
        if not routes:
            return None
        route = routes.get(path)
        if route is None and root and path.startswith(root):
            route = routes.get(path[len(root) :])
        return route

    async def _run_lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        if self._lifespan is None:
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        started = False
        try:
            async with self._lifespan():
                await send({"type": "lifespan.startup.complete"})
                started = True
                await receive()
        except Exception as exc:
            kind = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
            await send({"type": kind, "message": repr(exc)})
            return
        await send({"type": "lifespan.shutdown.complete"})


_TEXT: Final[dict[bytes, str]] = {}
"""MCP header values (versions, methods, names) decoded before: ``_TEXT.get(value)``."""
_TEXT_SIZE: Final = 1024
_TEXT_LONGEST: Final = 256


def _text(value: bytes) -> str:
    """``value`` decoded (latin-1, as every header value here) and remembered in ``_TEXT``
    when short: at most ``_TEXT_SIZE`` values of ``_TEXT_LONGEST`` bytes (a client that makes
    up values costs a decode each; the memo starts again when full)."""
    text = value.decode("latin-1")
    if len(value) <= _TEXT_LONGEST:
        if len(_TEXT) >= _TEXT_SIZE:
            _TEXT.clear()
        _TEXT[value] = text
    return text


def mcp_headers(raw_headers: Any, get: Callable[[bytes], bytes | None]) -> McpHeaders:
    """The MCP headers of a request (``get``: its header dict's ``get``), their values
    decoded once and remembered (``_TEXT``); both fronts read them here, the ASGI app's hot
    path inline."""
    version = get(b"mcp-protocol-version")
    method = get(b"mcp-method")
    name = get(b"mcp-name")
    session = get(b"mcp-session-id")
    return McpHeaders(
        None if version is None else _TEXT.get(version) or _text(version),
        None if method is None else _TEXT.get(method) or _text(method),
        None if name is None else _TEXT.get(name) or _text(name),
        raw_headers,
        None if session is None else session.decode("latin-1"),
    )
