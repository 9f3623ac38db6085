"""Dispatch: one decoded request in, one reply (or a stream) out.

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
    METHODS,
    MODERN_VERSIONS,
    McpHeaders,
    RequestStateSealer,
    SealedState,
    decode_message,
    encode_error,
    encode_result,
)
from millimcp.protocol.jsonrpc import RequestDecoder, check_nesting, check_utf8
from millimcp.protocol.types import InputRequiredResult
from millimcp.session.context import Context, InputRequired
from millimcp.session.disconnects import DisconnectSweeper
from millimcp.transports.http import Exchange

__all__ = ["Dispatcher", "RequestHandler"]

log: Final = logging.getLogger("millimcp.session")

RequestHandler = Callable[[Any, Context], Awaitable[Any]]
"""``handler(params, ctx) -> result struct`` for one method."""

_EMPTY_PARAMS: Final = b"{}"
_Route = tuple[RequestHandler, Any, str | None, bool]
"""(handler, params decoder, Mcp-Name field, may answer input_required)."""


class Dispatcher:
    """Routes requests to handlers by method; implements the transport's MessageHandler."""

    def __init__(
        self,
        handlers: dict[str, RequestHandler],
        sealer: RequestStateSealer,
        *,
        max_depth: int = DEFAULT_MAX_DEPTH,
        disconnect_sweep_s: float = 0.05,
    ) -> None:
        self.handlers = handlers
        self.sealer = sealer
        self.max_depth = max_depth
        # A body of n bytes nests at most n / 2 deep: shorter bodies need no depth scan.
        self._scan_above = 2 * max_depth
        self._routes: dict[str, _Route] = {
            method: (
                handler,
                msgspec.json.Decoder(METHODS[method].params),
                METHODS[method].name_field,
                METHODS[method].input_required,
            )
            for method, handler in handlers.items()
        }
        self._requests = RequestDecoder({m: METHODS[m].params for m in handlers})
        self._sweeper = DisconnectSweeper(disconnect_sweep_s)

    def __repr__(self) -> str:
        return f"<Dispatcher methods={len(self.handlers)}>"

    async def handle_http(self, body: bytes, headers: McpHeaders, exchange: Exchange) -> None:
        request_id: Any = None
        t0 = clock() if TRACE.active else 0  # observe: stage timings start (millimcp.observe)
        record = None
        try:
            check_utf8(body)
            fast = self._requests.decode(body)
            route: _Route | None
            if fast is not None:
                if len(body) > self._scan_above:
                    check_nesting(body, self.max_depth)
                method, request_id, params = fast
                route = self._routes[method]
            else:
                method, request_id, params, route = self._admit_slowly(body)
            if route is None:
                await exchange.accepted()  # a notification: nothing to do in this era
                return
            handler, _, name_field, input_required = route
            if headers.method != method:
                headers.check_method(method)
            if name_field is not None:
                name = getattr(params, name_field)
                if headers.name != name:
                    headers.check_name(name)
            meta = params.meta
            if meta is None or meta.protocol_version is None or meta.client_capabilities is None:
                raise InvalidParams(
                    "Invalid params: _meta must carry io.modelcontextprotocol/protocolVersion "
                    "and io.modelcontextprotocol/clientCapabilities"
                )
            version = meta.protocol_version
            if headers.protocol_version != version:
                headers.check_version(version)
            if version not in MODERN_VERSIONS:
                raise UnsupportedProtocolVersion(
                    "Unsupported protocol version",
                    {"supported": list(MODERN_VERSIONS), "requested": version},
                )
            if input_required and (params.request_state or params.input_responses):
                answers, state = self._gather(method, params)
                ctx = Context(request_id, method, meta, exchange.emit, answers, state, headers)
            else:
                ctx = Context(request_id, method, meta, exchange.emit, None, None, headers)
            ctx.exchange = exchange  # issue 7: tools reach the request/reply attachments
            if t0:  # observe: decode ends, the handler's stages begin
                record = exchange.trace = TRACE.begin(t0, method, params, request_id, headers)
        except ProtocolError as exc:
            if t0:  # observe
                TRACE.event("rejected", (str(exc.http_status),))
            await exchange.reply(exc.http_status, encode_error(request_id, exc))
            return
        # Run the handler. A client that disconnects cancels it (see session.disconnects).
        exchange.task = task = asyncio.current_task()
        sweeper = self._sweeper
        sweeper.active.add(exchange)
        if sweeper.task is None:
            sweeper.ensure_running()
        status = 200
        extra: list[tuple[bytes, bytes]] | None = None  # issue 4: Retry-After on a 503
        try:
            result = await handler(params, ctx)
            if record is not None:  # observe: the handler is done, encoding starts
                record.handled()
            data = encode_result(request_id, result)
        except InputRequired as need:
            if input_required:
                data = encode_result(request_id, self._input_required(need, params, ctx))
            else:
                log.error("%s asked for client input, which the method does not allow", method)
                status, data = 500, encode_error(request_id, InternalError("Internal error"))
        except ProtocolError as exc:
            status, data = exc.http_status, encode_error(request_id, exc)
            if isinstance(exc, Overloaded):  # issue 4: backpressure refusals say when to retry
                extra = [(b"retry-after", b"%d" % exc.retry_after_s)]
        except asyncio.CancelledError:
            if not exchange.disconnected:
                raise
            if task is not None:
                task.uncancel()
            if record is not None:  # observe: 499, the client closed the request
                record.status = 499
                TRACE.end(record)
            return  # the client went away; the request was cancelled
        except Exception:
            log.exception("handler for %s failed", method)
            status, data = 500, encode_error(request_id, InternalError("Internal error"))
        finally:
            sweeper.leave(exchange)
            if exchange.streaming:
                exchange.stop_keepalive()
        if record is not None:  # observe: the encode stage ends
            record.encoded(status)
        if exchange.streaming:
            await exchange.send_event(data)
            await exchange.end_stream()
        else:
            await exchange.reply(status, data, extra)
        if record is not None:  # observe: the request is done
            TRACE.end(record)

    def _admit_slowly(self, body: bytes) -> tuple[str, Any, Any, _Route | None]:
        """The general path: every kind of message, with a precise error for what is wrong.

        Returns (method, id, params, route); route is None for a notification.
        """
        message = decode_message(body, self.max_depth)
        method = message.method
        if method is msgspec.UNSET:
            raise InvalidRequest(
                "Invalid request: clients must not send responses here",
                request_id=message.id if isinstance(message.id, int | str) else None,
            )
        if message.id is msgspec.UNSET:
            return method, None, None, None
        request_id = message.id
        route = self._routes.get(method)
        if route is None:
            raise MethodNotFound(f"Method not found: {method}", request_id=request_id)
        try:
            params = route[1].decode(message.params or _EMPTY_PARAMS)
        except msgspec.DecodeError as exc:
            raise InvalidParams(f"Invalid params: {exc}", request_id=request_id) from None
        except RecursionError:
            raise ParseError("Parse error: JSON nested too deeply", request_id=request_id) from None
        return method, request_id, params, route

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


def request_binding(method: str, params: Any) -> str:
    """What a request state is bound to: the method, the target and its arguments."""
    if method == "tools/call":
        return RequestStateSealer.binding(method, params.name, bytes(params.arguments))
    if method == "prompts/get":
        arguments = b"" if params.arguments is None else msgspec.json.encode(params.arguments)
        return RequestStateSealer.binding(method, params.name, arguments)
    return RequestStateSealer.binding(method, getattr(params, "uri", ""), b"")
