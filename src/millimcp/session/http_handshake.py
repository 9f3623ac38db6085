"""The handshake era (2025-11-25 and earlier) over Streamable HTTP.

``initialize`` opens a session and its reply carries ``Mcp-Session-Id``; later requests
name it. A request answers as JSON unless its handler sends something first (progress, a
log message, a request to the client), then as SSE: a priming event with an id and a
``retry`` field, then numbered events, the answer last. GET opens the session's stream
for messages the server starts (list changes, resource updates); ``Last-Event-ID``
replays what a lost connection missed, from any of the session's streams. DELETE ends
the session. A client that disconnects cancels its request, as in the modern era, and
``notifications/cancelled`` cancels one too (it then gets no answer).

With ``SessionConfig(stateless=True)`` nothing is remembered: ``initialize`` gets no
session id, every request stands alone and is answered as JSON.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import msgspec

from millimcp.codec import sse_priming
from millimcp.errors import (
    InvalidRequest,
    MethodNotFound,
    ProtocolError,
    SessionRequired,
    TooManySessions,
)
from millimcp.observe import TRACE, RequestRecord, clock
from millimcp.protocol import LEGACY_VERSIONS, METHODS, McpHeaders, encode_error
from millimcp.protocol.eras import check_handshake_version, negotiate_handshake
from millimcp.protocol.types import ClientCapabilities, InputRequest, RequestMeta
from millimcp.session.context import Context
from millimcp.session.disconnects import DisconnectSweeper
from millimcp.session.inflight import Call
from millimcp.session.router import Route, Router
from millimcp.session.sessions import EventStream, Session, SessionConfig, SessionStore
from millimcp.transports.http import Exchange

__all__ = ["HandshakeHttp"]

_OLDEST: Final = LEGACY_VERSIONS[-1]
"""The version assumed when a sessionless request names none (the spec's rule)."""


class HandshakeHttp:
    """Handshake-era requests over HTTP, for the endpoint (:mod:`millimcp.session.http`)."""

    def __init__(
        self,
        router: Router,
        store: SessionStore,
        sweeper: DisconnectSweeper,
        config: SessionConfig,
    ) -> None:
        self.router = router
        self.store = store
        self.sweeper = sweeper
        self.config = config

    def __repr__(self) -> str:
        return f"<HandshakeHttp {self.store!r}>"

    # -- POST without a session: initialize, or the stateless option -------------------------

    async def open(
        self,
        method: str,
        request_id: Any,
        params: Any,
        route: Route,
        headers: McpHeaders,
        exchange: Exchange,
    ) -> None:
        config = self.config
        extra: list[tuple[bytes, bytes]] | None = None
        session: Session | None = None
        try:
            if METHODS[method].era == "modern":
                raise MethodNotFound(f"Method not found: {method}")
            if method == "initialize":
                version = negotiate_handshake(params.protocol_version, config.enabled)
                if not config.stateless:
                    session = self.store.create(version, params.capabilities, params.client_info)
                    assert session.id is not None
                    extra = [(b"mcp-session-id", session.id.encode())]
                    meta = session.meta_for(params.meta)
                else:
                    meta = _stateless_meta(version, params.capabilities, params.meta)
            elif config.stateless and config.enabled:
                version = headers.protocol_version or _OLDEST
                check_handshake_version(version)
                meta = _stateless_meta(version, ClientCapabilities(), params.meta)
            else:
                raise SessionRequired(
                    "Bad Request: no Mcp-Session-Id; send initialize first (handshake era), "
                    "or _meta with io.modelcontextprotocol/protocolVersion (2026-07-28)"
                )
        except TooManySessions as exc:
            retry = str(max(1, min(int(config.idle_timeout_s), 30))).encode()
            body = encode_error(request_id, exc)
            await exchange.reply(exc.http_status, body, [(b"retry-after", retry)])
            return
        except ProtocolError as exc:
            await exchange.reply(exc.http_status, encode_error(request_id, exc))
            return
        ctx = Context(
            request_id,
            method,
            meta,
            headers=headers,
            session=session,
            _source=exchange,
        )
        call = await self._serve(route, params, ctx, exchange, extra)
        if session is not None and call.disconnected:
            self.store.end(session.id or "")

    # -- POST within a session --------------------------------------------------------------

    async def post(self, body: bytes, headers: McpHeaders, exchange: Exchange) -> None:
        request_id: Any = None
        t0 = clock() if TRACE.active else 0  # observe: stage timings start
        try:
            session = self.store.get(headers.session_id or "")
            check_handshake_version(headers.protocol_version)
            method, request_id, params, route, message = self.router.admit(body)
            if route is None:
                assert message is not None
                if method is None:
                    session.resolve(message)
                else:
                    session.on_notification(method, message)
                await exchange.accepted()
                return
            assert method is not None
            if method == "initialize":
                raise InvalidRequest("Invalid request: this session is initialized already")
            if METHODS[method].era == "modern":
                raise MethodNotFound(f"Method not found: {method} (not in the handshake era)")
        except ProtocolError as exc:
            if t0:  # observe
                TRACE.event("rejected", (str(exc.http_status),))
            await exchange.reply(exc.http_status, encode_error(request_id, exc))
            return
        reply = _StreamReply(session, exchange, self.config.retry_ms)
        ctx = session.context(request_id, method, params, reply.emit, reply.ask)
        ctx.headers = headers
        ctx._source = exchange
        record = TRACE.begin(t0, method, params, request_id, headers) if t0 else None
        await self._serve(route, params, ctx, exchange, None, reply, record)

    async def _serve(
        self,
        route: Route,
        params: Any,
        ctx: Context,
        exchange: Exchange,
        extra: list[tuple[bytes, bytes]] | None,
        reply: _StreamReply | None = None,
        record: RequestRecord | None = None,
    ) -> Call:
        """Run one request and answer it, unless the client cancelled it or went away."""
        request_id: Any = ctx.request_id
        session: Session | None = ctx.session
        call = Call(asyncio.current_task(), False, False, exchange)
        sweeper = self.sweeper
        sweeper.enter(call)
        if session is not None:
            session.inflight.add(request_id, call)
        try:
            outcome = await self.router.run(route, params, ctx, call, record)
        finally:
            sweeper.leave(call)
            if exchange.streaming:
                exchange.stop_keepalive()
            if session is not None:
                session.inflight.discard(request_id, call)
                session.touch()
        if outcome is None:
            if record is not None:  # observe: 499, the client closed or cancelled the request
                record.status = 499
                TRACE.end(record)
            if not call.disconnected:
                await _end_unanswered(exchange)
            return call
        status, body, more, attachment, compressible = outcome
        if record is not None:  # observe: the encode stage ends
            record.encoded_at = clock()
            record.status = status
        if reply is not None and reply.stream is not None:
            stream = reply.stream
            seq = stream.push(body)
            stream.close()
            await exchange.send_event(body, stream.event_id(seq))
            await exchange.end_stream()
        else:
            await exchange.reply(
                status, body, more if extra is None else extra, attachment, compressible, record
            )
        if record is not None:  # observe: the request is done
            TRACE.end(record)
        return call

    # -- GET: the session's stream, or a resumed one ------------------------------------------

    async def get(self, headers: McpHeaders, last_event_id: str | None, exchange: Exchange) -> None:
        if headers.session_id is None:
            await exchange.method_not_allowed()  # the modern era has no GET stream
            return
        try:
            session = self.store.get(headers.session_id)
            if last_event_id is not None:
                found = session.find_event(last_event_id)
                if found is None:
                    raise InvalidRequest(
                        "Bad Request: Last-Event-ID names no event of this session's streams"
                    )
                stream, after = found
            else:
                current = session.standalone
                if current is not None and current.sink is not None:
                    await exchange.reply(
                        409,
                        encode_error(
                            None, InvalidRequest("Conflict: this session has a GET stream open")
                        ),
                    )
                    return
                stream = session.open_stream(standalone=True)
                after = 0
        except ProtocolError as exc:
            await exchange.reply(exc.http_status, encode_error(None, exc))
            return
        await self._pump(session, stream, after, exchange)

    async def _pump(
        self, session: Session, stream: EventStream, after: int, exchange: Exchange
    ) -> None:
        """Serve a stream's events after ``after`` on this connection, until it ends."""
        stream.sink = exchange
        disconnect = asyncio.ensure_future(exchange.wait_disconnect())
        sent = after
        try:
            await exchange.start_stream()
            await exchange.send_raw(sse_priming(stream.event_id(sent), self.config.retry_ms))
            while stream.sink is exchange and not session.closed:
                for seq, data in stream.after(sent):
                    await exchange.send_event(data, stream.event_id(seq))
                    sent = seq
                if stream.closed:
                    break
                stream.wakeup.clear()
                if stream.seq > sent:
                    continue  # pushed while we were sending
                waiter = asyncio.ensure_future(stream.wakeup.wait())
                done, _ = await asyncio.wait(
                    (waiter, disconnect), return_when=asyncio.FIRST_COMPLETED
                )
                if disconnect in done:
                    waiter.cancel()
                    return
            await exchange.end_stream()
        except OSError:
            return
        finally:
            disconnect.cancel()
            if stream.sink is exchange:
                stream.sink = None
            session.touch()

    # -- DELETE -------------------------------------------------------------------------------

    async def delete(self, headers: McpHeaders, exchange: Exchange) -> None:
        if headers.session_id is None:
            await exchange.method_not_allowed()
            return
        try:
            self.store.end(headers.session_id)
        except ProtocolError as exc:
            await exchange.reply(exc.http_status, encode_error(None, exc))
            return
        await exchange.reply(200, b"")


class _StreamReply:
    """How one handshake-era request talks back over HTTP before its answer."""

    __slots__ = ("exchange", "retry_ms", "session", "stream")

    def __init__(self, session: Session, exchange: Exchange, retry_ms: int) -> None:
        self.session = session
        self.exchange = exchange
        self.retry_ms = retry_ms
        self.stream: EventStream | None = None

    async def emit(self, message: bytes) -> None:
        """Send a message ahead of the answer; the first one turns the reply into SSE."""
        stream = self.stream
        if stream is None:
            stream = self.stream = self.session.open_stream()
            await self.exchange.start_stream()
            await self.exchange.send_raw(sse_priming(stream.event_id(0), self.retry_ms))
        seq = stream.push(message)
        await self.exchange.send_event(message, stream.event_id(seq))

    async def ask(self, request: InputRequest) -> msgspec.Raw:
        return await self.session.request(request, self.emit)


async def _end_unanswered(exchange: Exchange) -> None:
    """A request the client cancelled gets no answer; its HTTP exchange still ends."""
    if exchange.streaming:
        exchange.stop_keepalive()
        await exchange.end_stream()
    else:
        await exchange.accepted()


def _stateless_meta(
    version: str, capabilities: ClientCapabilities, meta: RequestMeta | None
) -> RequestMeta:
    base = meta or RequestMeta()
    return msgspec.structs.replace(
        base, protocol_version=version, client_capabilities=capabilities, log_level=None
    )
