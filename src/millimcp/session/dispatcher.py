"""Dispatch: one decoded request in, one reply (or a stream) out, in either era.

The dispatcher owns the order of checks for a modern-era request over HTTP:

1. decode the envelope (-32700 / -32600),
2. find the method (-32601, HTTP 404),
3. check ``Mcp-Method`` against the body (-32020),
4. decode params into the method's type (-32602) and check ``Mcp-Name`` (-32020),
5. check the per-request ``_meta`` fields (-32602),
6. check ``MCP-Protocol-Version`` against ``_meta`` (-32020), then that it is served (-32022),
7. run the handler with a :class:`Context`; if it runs past a short grace period, a
   watcher cancels it when the client disconnects (closing the stream is cancellation;
   see :mod:`millimcp.session.disconnects`).

The era is chosen per request, as the versioning page of the spec says: a request with an
``Mcp-Session-Id``, an ``initialize``, or one without modern ``_meta`` that names no modern
version is the handshake era's (:mod:`millimcp.session.handshake`); the rest is modern.
Line-framed peers (stdio) go through :mod:`millimcp.session.lines`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec

from millimcp.codec import DEFAULT_MAX_DEPTH
from millimcp.errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    Overloaded,
    ParseError,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from millimcp.observe import TRACE, clock
from millimcp.protocol import (
    LEGACY_ONLY,
    LEGACY_VERSIONS,
    METHODS,
    MODERN_VERSIONS,
    McpHeaders,
    Message,
    RequestStateSealer,
    SealedState,
    decode_message,
    encode_error,
    encode_result,
)
from millimcp.protocol.jsonrpc import RequestDecoder, check_nesting, check_utf8
from millimcp.protocol.types import (
    InputRequiredResult,
    LegacyEmptyResult,
    RequestMeta,
    RequestParams,
    SetLevelParams,
)
from millimcp.session.context import Attachments, Context, Emit, InputRequired
from millimcp.session.disconnects import DisconnectSweeper
from millimcp.session.handshake import HandshakeHttp
from millimcp.session.sessions import SessionConfig, SessionStore
from millimcp.transports.http import Exchange

__all__ = ["Dispatcher", "RequestHandler", "Route"]

log: Final = logging.getLogger("millimcp.session")

RequestHandler = Callable[[Any, Context], Awaitable[Any]]
"""``handler(params, ctx) -> result struct`` for one method."""

_EMPTY_PARAMS: Final = b"{}"
Route = tuple[RequestHandler, Any, str | None, bool]
"""(handler, params decoder, Mcp-Name field, may answer input_required)."""
Admitted = tuple[str | None, Any, Any, Route | None, Message | None]
"""(method, id, params, route, message): route None for a notification or response
(method None), message set only when the general path decoded it."""


class Dispatcher:
    """Routes requests to handlers by method; implements the transport's MessageHandler."""

    def __init__(
        self,
        handlers: dict[str, RequestHandler],
        sealer: RequestStateSealer,
        *,
        sessions: SessionConfig | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
        disconnect_sweep_s: float = 0.05,
    ) -> None:
        self.handlers = {"ping": _ping, "logging/setLevel": _set_level, **handlers}
        self.sealer = sealer
        self.max_depth = max_depth
        # A body of n bytes nests at most n / 2 deep: shorter bodies need no depth scan.
        self._scan_above = 2 * max_depth
        self._routes: dict[str, Route] = {
            method: (
                handler,
                msgspec.json.Decoder(METHODS[method].params),
                METHODS[method].name_field,
                METHODS[method].input_required,
            )
            for method, handler in self.handlers.items()
        }
        self._requests = RequestDecoder({m: METHODS[m].params for m in self.handlers})
        self.sweeper = DisconnectSweeper(disconnect_sweep_s)
        self.session_config = sessions or SessionConfig()
        self.sessions = SessionStore(self.session_config)
        self.handshake = HandshakeHttp(self)

    def __repr__(self) -> str:
        return f"<Dispatcher methods={len(self.handlers)} sessions={len(self.sessions)}>"

    # -- HTTP -------------------------------------------------------------------------------

    async def handle_http(self, body: bytes, headers: McpHeaders, exchange: Exchange) -> None:
        if headers.session_id is not None:
            await self.handshake.post(body, headers, exchange)
            return
        request_id: Any = None
        t0 = clock() if TRACE.active else 0  # observe: stage timings start (millimcp.observe)
        try:
            check_utf8(body)
            fast = self._requests.decode(body)
            route: Route | None
            method: str | None
            if fast is not None:
                if len(body) > self._scan_above:
                    check_nesting(body, self.max_depth)
                method, request_id, params = fast
                route = self._routes[method]
            else:
                method, request_id, params, route, _ = self.admit_slowly(
                    body, modern=headers.protocol_version in MODERN_VERSIONS
                )
            if route is None:
                await exchange.accepted()  # a notification: nothing to do without a session
                return
            assert method is not None
            meta = params.meta
            if (
                meta is None or meta.protocol_version is None
            ) and headers.protocol_version not in MODERN_VERSIONS:
                await self.handshake.open(method, request_id, params, route, headers, exchange)
                return
            if method in LEGACY_ONLY:
                raise MethodNotFound(f"Method not found: {method}", request_id=request_id)
            _, _, name_field, _ = route
            if headers.method != method:
                headers.check_method(method)
            if name_field is not None:
                name = getattr(params, name_field)
                if headers.name != name:
                    headers.check_name(name)
            check_modern_meta(meta)
            version = meta.protocol_version
            if headers.protocol_version != version:
                headers.check_version(version)
            check_modern_version(version)
            ctx = self.modern_context(request_id, method, params, route, exchange.emit, headers)
            ctx.attachments = Attachments(exchange.attachment, _reply=exchange)
            if t0:  # observe: decode ends, the handler's stages begin
                exchange.trace = TRACE.begin(t0, method, params, request_id, headers)
        except ProtocolError as exc:
            if t0:  # observe
                TRACE.event("rejected", (str(exc.http_status),))
            await exchange.reply(exc.http_status, encode_error(request_id, exc))
            return
        await self.serve(route, params, ctx, exchange)

    async def handle_get(
        self, headers: McpHeaders, last_event_id: str | None, exchange: Exchange
    ) -> None:
        await self.handshake.get(headers, last_event_id, exchange)

    async def handle_delete(self, headers: McpHeaders, exchange: Exchange) -> None:
        await self.handshake.delete(headers, exchange)

    async def serve(self, route: Route, params: Any, ctx: Context, exchange: Exchange) -> None:
        """Run a handler for one HTTP request and answer it; a disconnect cancels it."""
        exchange.task = task = asyncio.current_task()
        record = exchange.trace
        sweeper = self.sweeper
        sweeper.active.add(exchange)
        if sweeper.task is None:
            sweeper.ensure_running()
        try:
            status, data, extra = await self.run(route, params, ctx, record)
        except asyncio.CancelledError:
            if not exchange.disconnected:
                raise
            if task is not None:
                task.uncancel()
            if record is not None:  # observe: 499, the client closed the request
                record.status = 499
                TRACE.end(record)
            return  # the client went away; the request was cancelled
        finally:
            sweeper.leave(exchange)
            if exchange.streaming:
                exchange.stop_keepalive()
        if record is not None:  # observe: the encode stage ends
            record.encoded_at = clock()
            record.status = status
        if exchange.streaming:
            await exchange.send_event(data)
            await exchange.end_stream()
        else:
            attachments = ctx.attachments
            if attachments is not None:
                exchange.reply_attachment = attachments.reply
                exchange.incompressible = not attachments.compressible
            await exchange.reply(status, data, extra)
        if record is not None:  # observe: the request is done
            TRACE.end(record)

    # -- shared by every transport and era --------------------------------------------------

    def admit(self, body: bytes) -> Admitted:
        """Decode any inbound message: the fast path for a request, else the general one."""
        check_utf8(body)
        fast = self._requests.decode(body)
        if fast is None:
            return self.admit_slowly(body, responses=True)
        if len(body) > self._scan_above:
            check_nesting(body, self.max_depth)
        method, request_id, params = fast
        return method, request_id, params, self._routes[method], None

    def admit_slowly(
        self, body: bytes, *, responses: bool = False, modern: bool = False
    ) -> Admitted:
        """The general path: every kind of message, with a precise error for what is wrong.

        ``modern``: the transport knows the request is modern, so the handshake era's own
        methods are not found (before their params are looked at).
        """
        message = decode_message(body, self.max_depth)
        method = message.method
        if method is msgspec.UNSET:
            if responses:
                return None, message.id, None, None, message
            raise InvalidRequest(
                "Invalid request: clients must not send responses here",
                request_id=message.id if isinstance(message.id, int | str) else None,
            )
        if message.id is msgspec.UNSET:
            return method, None, None, None, message
        request_id = message.id
        route = self._routes.get(method)
        if route is None or (modern and method in LEGACY_ONLY):
            raise MethodNotFound(f"Method not found: {method}", request_id=request_id)
        try:
            params = route[1].decode(message.params or _EMPTY_PARAMS)
        except msgspec.DecodeError as exc:
            raise InvalidParams(f"Invalid params: {exc}", request_id=request_id) from None
        except RecursionError:
            raise ParseError("Parse error: JSON nested too deeply", request_id=request_id) from None
        return method, request_id, params, route, message

    def modern_context(
        self,
        request_id: Any,
        method: str,
        params: Any,
        route: Route,
        emit: Emit | None,
        headers: McpHeaders | None = None,
    ) -> Context:
        """The context of a checked modern-era request, with its MRTR answers so far."""
        meta = params.meta
        if route[3] and (params.request_state or params.input_responses):
            answers, state = self._gather(method, params)
            return Context(request_id, method, meta, emit, answers, state, headers)
        return Context(request_id, method, meta, emit, None, None, headers)

    async def run(
        self, route: Route, params: Any, ctx: Context, record: Any = None
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]] | None]:
        """Run a handler: (HTTP status, encoded reply, extra HTTP headers).

        Cancellation propagates. ``record`` is the observe hook's record of the request.
        """
        handler, _, _, input_required = route
        request_id: Any = ctx.request_id
        try:
            result = await handler(params, ctx)
            if record is not None:  # observe: the handler is done, encoding starts
                record.handled_at = clock()
            data = encode_result(request_id, result)
            meta = ctx.meta
            if meta is not None and meta.protocol_version in _HANDSHAKE_VERSIONS:
                data = _without_result_type(data)
            return 200, data, None
        except InputRequired as need:
            if input_required and ctx.session is None:
                result = self._input_required(need, params, ctx)
                return 200, encode_result(request_id, result), None
            log.error("%s asked for client input, which the method does not allow", ctx.method)
            return 500, encode_error(request_id, InternalError("Internal error")), None
        except ProtocolError as exc:
            extra = None
            if isinstance(exc, Overloaded):  # issue 4: backpressure refusals say when to retry
                extra = [(b"retry-after", b"%d" % (exc.retry_after_s or 1))]
            return exc.http_status, encode_error(request_id, exc), extra
        except Exception:
            log.exception("handler for %s failed", ctx.method)
            return 500, encode_error(request_id, InternalError("Internal error")), None

    def close(self) -> None:
        """End every handshake-era session."""
        self.sessions.close()

    def _gather(self, method: str, params: Any) -> tuple[dict[str, msgspec.Raw], Any]:
        """Answers so far (sealed state + this round's responses) and the handler's state."""
        answers: dict[str, msgspec.Raw] = {}
        state: Any = None
        if params.request_state:
            sealed = self.sealer.open(
                params.request_state, request_binding(method, params), time.time()
            )
            answers.update(sealed.answers)
            state = sealed.user
        if params.input_responses:
            answers.update(params.input_responses)
        return answers, state

    def _input_required(self, need: InputRequired, params: Any, ctx: Context) -> Any:
        binding = request_binding(ctx.method, params)
        state = SealedState(binding, time.time() + self.sealer.ttl, ctx.answers, need.state)
        return InputRequiredResult(
            input_requests=need.requests, request_state=self.sealer.seal(state)
        )


_HANDSHAKE_VERSIONS: Final = frozenset(LEGACY_VERSIONS)
_RESULT_TYPE: Final = b'"result":{"resultType":"complete",'


def _without_result_type(data: bytes) -> bytes:
    """Drop ``resultType`` from a reply to a handshake-era client, which does not know it.

    It is the results' struct tag, so msgspec always writes it first: it is found within
    the first bytes of the reply or not at all.
    """
    at = data.find(_RESULT_TYPE, 0, 256)
    if at < 0:
        return data
    return data[:at] + b'"result":{' + data[at + len(_RESULT_TYPE) :]


def check_modern_meta(meta: RequestMeta | None) -> None:
    if meta is None or meta.protocol_version is None or meta.client_capabilities is None:
        raise InvalidParams(
            "Invalid params: _meta must carry io.modelcontextprotocol/protocolVersion "
            "and io.modelcontextprotocol/clientCapabilities"
        )


def check_modern_version(version: str | None) -> None:
    if version not in MODERN_VERSIONS:
        raise UnsupportedProtocolVersion(
            "Unsupported protocol version",
            {"supported": list(MODERN_VERSIONS), "requested": version},
        )


async def _ping(params: RequestParams, ctx: Context) -> LegacyEmptyResult:
    return LegacyEmptyResult()


async def _set_level(params: SetLevelParams, ctx: Context) -> LegacyEmptyResult:
    if ctx.session is not None:
        ctx.session.set_log_level(params.level)
    return LegacyEmptyResult()


def request_binding(method: str, params: Any) -> str:
    """What a request state is bound to: the method, the target and its arguments."""
    if method == "tools/call":
        return RequestStateSealer.binding(method, params.name, bytes(params.arguments))
    if method == "prompts/get":
        arguments = b"" if params.arguments is None else msgspec.json.encode(params.arguments)
        return RequestStateSealer.binding(method, params.name, arguments)
    return RequestStateSealer.binding(method, getattr(params, "uri", ""), b"")
