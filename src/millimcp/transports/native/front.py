"""What the native front does with a parsed request: judge its head, then answer it.

The checks are the ASGI app's own (:class:`~millimcp.transports.http.StreamableHTTPApp`):
the same endpoint path, the same memoized Host/Origin/Content-Type/method verdicts (the app's
``verdicts``, a :class:`~millimcp.transports.verdicts.HeadVerdicts`), the same body limits and
request decompression, the same refusal bodies. They run once a request's headers are
complete, so a refusal is sent before its body arrives. The request then goes to the same
message handler (the session layer's endpoint) with a :class:`NativeExchange`: no ASGI scope or
message dicts on the way.

Other paths of the app (``app.routes``, such as ``/metrics``) are plain ASGI callables and are
run through a small bridge: they are not on the MCP path. ``HttpConfig.health_path`` answers
200 while serving and 503 once draining (no Host check: load balancers probe by address).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final
from urllib.parse import unquote

from millimcp.codec import ATTACHMENT_MEDIA_TYPE
from millimcp.codec.attachment import AttachmentFramingError, split
from millimcp.protocol import McpHeaders
from millimcp.transports.body import Undecodable, decoded
from millimcp.transports.drain import DRAINING_BODY, HEALTH_DRAINING, HEALTH_OK
from millimcp.transports.http import StreamableHTTPApp, mcp_headers
from millimcp.transports.native.buffers import settle_allocator
from millimcp.transports.native.connection import HttpConnection, Request, refusal_closes
from millimcp.transports.native.exchange import NativeExchange
from millimcp.transports.native.wire import error_response, head, plain_response

__all__ = ["NativeFront"]

logger = logging.getLogger("millimcp.native")

_POST, _OTHER, _FRAMED, _HEALTH, _ROUTE = range(1, 6)
_ATTACHMENT: Final = ATTACHMENT_MEDIA_TYPE.encode()
_ALLOW: Final = [(b"allow", b"GET, POST, DELETE")]
_RETRY: Final = [(b"retry-after", b"1")]
_DRAINING_HEAD: Final = [
    (b"content-type", b"application/json"),
    (b"content-length", b"%d" % len(DRAINING_BODY)),
    *_RETRY,
]


class NativeFront:
    """The state the connections of one listener share."""

    def __init__(self, app: StreamableHTTPApp, loop: asyncio.AbstractEventLoop) -> None:
        import httptools

        self.httptools: Any = httptools
        self.app = app
        self.handler = app.handler
        self.config = app.config
        self.loop = loop
        self.connections: set[HttpConnection] = set()
        self.held = 0
        """Body bytes held across connections (``max_body_bytes_in_flight``)."""
        self.draining = False
        self.emptied = asyncio.Event()
        """Set when the last connection closes while draining."""
        self.failures = 0
        settle_allocator()  # large bodies from the heap: no fresh pages to fault (.buffers)
        self._limit_digits = len(str(self.config.max_body_bytes))

    def sweep(self) -> None:
        """Act on the connections whose deadline passed (the server calls this on a tick)."""
        now = self.loop.time()
        for conn in tuple(self.connections):
            if conn.deadline <= now:
                conn.expired(now)

    @property
    def tick_s(self) -> float:
        """How often :meth:`sweep` must run: a quarter of the shortest deadline, at most 1 s."""
        config = self.config
        shortest = min(
            config.header_timeout_s,
            config.body_timeout_s,
            config.keepalive_timeout_s,
            config.linger_s,
            4.0,
        )
        return max(0.01, shortest / 4)

    def begin_drain(self) -> None:
        """From now on: health 503, new requests 503, answers in flight say ``close``."""
        self.draining = True
        if not self.connections:
            self.emptied.set()
        for conn in self.connections:
            if conn.exchange is not None:
                conn.exchange.close = True

    # -- the head ------------------------------------------------------------------------

    def judge(self, request: Request) -> None:
        """Classify a request whose headers are complete; set ``refusal`` when refused."""
        config = self.config
        path = request.path = _PATHS.get(request.url) or _path_of(request.url)
        if path == config.health_path:
            request.kind = _HEALTH
            request.limit = 0
            return
        if self.draining:
            request.refusal = head(503, _DRAINING_HEAD, close=True) + DRAINING_BODY
            return
        if config.path is not None and path != config.path:
            if path in self.app.routes:
                request.kind = _ROUTE
                request.limit = config.max_body_bytes
                return
            request.refusal = plain_response(404, b"Not Found", close=refusal_closes(request))
            return
        fields = request.fields = dict(request.headers)
        get = fields.get
        method = request.method
        gate = (get(b"host"), get(b"origin"), get(b"content-type"), method)
        verdict = self.app.verdicts[gate]
        if verdict is not None:
            status, text = verdict
            if status == 405:
                request.refusal = plain_response(
                    405, b"Method Not Allowed", _ALLOW, close=refusal_closes(request)
                )
            else:
                request.refusal = error_response(status, text, close=refusal_closes(request))
            return
        if method != "POST":
            request.kind = _OTHER
            request.limit = config.max_body_bytes
            return
        content_type = gate[2]
        if content_type is not None and content_type.startswith(_ATTACHMENT):
            coding = get(b"content-encoding")
            if coding is not None and coding.strip().lower() != b"identity":
                request.refusal = error_response(
                    415,
                    "Unsupported Media Type: a body with an attachment is sent "
                    "without Content-Encoding",
                    close=True,
                )
                return
            request.kind = _FRAMED
            request.body = bytearray()
            limit = config.max_attachment_bytes
        else:
            request.kind = _POST
            limit = config.max_body_bytes
        request.limit = limit
        declared = get(b"content-length")
        if (
            declared is not None
            and (request.kind == _FRAMED or len(declared) >= self._limit_digits)
            and (not declared.isdigit() or int(declared) > limit)
        ):
            request.refusal = error_response(
                413, f"Request body larger than {limit} bytes", close=True
            )
            return
        expect = get(b"expect")
        if expect is not None and expect.lower() == b"100-continue" and not request.http10:
            request.expect = True

    # -- the answer ----------------------------------------------------------------------

    async def serve(self, conn: HttpConnection, request: Request) -> None:
        """Answer one complete request (a task per request)."""
        try:
            await self._serve(conn, request)
        except Exception as exc:
            self.log_failure(exc)
            exchange = conn.exchange
            if exchange is None or not exchange.started:
                conn.write(error_response(500, "Internal Server Error", close=True))
            conn.close()

    async def _serve(self, conn: HttpConnection, request: Request) -> None:
        kind = request.kind
        close = not request.keep_alive or self.draining
        if kind == _POST:
            chunks = request.chunks
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            headers = request.headers
            get = request.fields.get
            coding = get(b"content-encoding")
            config = self.config
            if coding is not None and config.decompress_requests:
                plain = decoded(body, coding, config.max_body_bytes)
                if isinstance(plain, Undecodable):
                    conn.write(error_response(*plain))
                    return
                body = plain
            exchange = NativeExchange.on(
                conn, self.config, get(b"accept-encoding"), close, request.http10, request.owner
            )
            conn.exchange = exchange
            await self.handler.handle_http(body, mcp_headers(headers, get), exchange)
        elif kind == _OTHER:
            await self._serve_other(conn, request, close)
        elif kind == _FRAMED:
            await self._serve_framed(conn, request, close)
        elif kind == _HEALTH:
            if self.draining:
                conn.write(plain_response(503, HEALTH_DRAINING, _RETRY, close=True))
            else:
                conn.write(plain_response(200, HEALTH_OK, close=close))
            return
        else:
            await self._serve_route(conn, request, close)
            return
        answered = conn.exchange
        if answered is not None and not answered.started:
            conn.write(error_response(500, "Internal Server Error: no response", close=True))
            answered.close = True

    async def _serve_other(self, conn: HttpConnection, request: Request, close: bool) -> None:
        """GET (open or resume a stream) and DELETE (end a session)."""
        get = request.fields.get
        version = get(b"mcp-protocol-version")
        session = get(b"mcp-session-id")
        mcp = McpHeaders(
            None if version is None else version.decode("latin-1"),
            session_id=None if session is None else session.decode("latin-1"),
        )
        exchange = NativeExchange.on(conn, self.config, None, close, request.http10)
        conn.exchange = exchange
        if request.method == "DELETE":
            await self.handler.handle_delete(mcp, exchange)
            return
        accept = get(b"accept")
        if accept is not None and b"text/event-stream" not in accept and b"*/*" not in accept:
            exchange.started = exchange.finished = True
            conn.write(
                error_response(406, "Not Acceptable: GET opens a text/event-stream", close=close)
            )
            return
        last_event_id = get(b"last-event-id")
        await self.handler.handle_get(
            mcp, None if last_event_id is None else last_event_id.decode("latin-1"), exchange
        )

    async def _serve_framed(self, conn: HttpConnection, request: Request, close: bool) -> None:
        body, request.body = request.body, None
        try:
            message, attachment = split(
                bytearray() if body is None else body, self.config.max_body_bytes
            )
        except AttachmentFramingError as exc:
            conn.write(error_response(400, f"Invalid request: {exc}", close=close))
            return
        get = request.fields.get
        exchange = NativeExchange.on(
            conn, self.config, get(b"accept-encoding"), close, request.http10, request.owner
        )
        exchange.attachment = attachment
        conn.exchange = exchange
        await self.handler.handle_http(message, mcp_headers(request.headers, get), exchange)

    async def _serve_route(self, conn: HttpConnection, request: Request, close: bool) -> None:
        """Another path of the app (``/metrics``): a plain ASGI callable, bridged."""
        route = self.app.routes[request.path]
        body = b"".join(request.chunks)
        url = request.url
        received = False

        async def receive() -> dict[str, Any]:
            nonlocal received
            if not received:
                received = True
                return {"type": "http.request", "body": body, "more_body": False}
            await conn.wait_closed()
            return {"type": "http.disconnect"}

        status = 500
        out_headers: list[tuple[bytes, bytes]] = []
        parts: list[bytes] = []

        async def send(message: Any) -> None:
            nonlocal status, out_headers
            if message["type"] == "http.response.start":
                status = message["status"]
                out_headers = [tuple(pair) for pair in message.get("headers", ())]
            else:
                parts.append(message.get("body", b""))

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.0" if request.http10 else "1.1",
            "method": request.method,
            "scheme": "http",
            "path": request.path,
            "raw_path": url.partition(b"?")[0],
            "query_string": url.partition(b"?")[2],
            "root_path": "",
            "headers": request.headers,
            "server": None,
            "client": None,
        }
        await route(scope, receive, send)
        payload = b"".join(parts)
        hdrs = [pair for pair in out_headers if pair[0].lower() != b"content-length"]
        hdrs.append((b"content-length", b"%d" % len(payload)))
        conn.write(head(status, hdrs, close=close) + payload)

    def log_failure(self, exc: BaseException | None) -> None:
        self.failures += 1
        logger.error("request failed", exc_info=exc)


_PATHS: Final[dict[bytes, str]] = {}
"""Request targets seen before, and their paths: a client asks for the same one or two."""
_PATHS_SIZE: Final = 256
_PATHS_LONGEST: Final = 512


def _path_of(url: bytes) -> str:
    """The decoded path of a request target (origin- or absolute-form, the query dropped),
    remembered in ``_PATHS`` when short (emptied when full: a client that makes up targets
    pays a parse each, nothing more)."""
    end = url.find(b"?")
    raw = url if end < 0 else url[:end]
    if raw[:1] != b"/" and b"://" in raw:  # absolute-form target
        raw = b"/" + raw.partition(b"://")[2].partition(b"/")[2]
    path = raw.decode("latin-1")
    if "%" in path:
        path = unquote(path, "latin-1")
    if len(url) <= _PATHS_LONGEST:
        if len(_PATHS) >= _PATHS_SIZE:
            _PATHS.clear()
        _PATHS[url] = path
    return path
