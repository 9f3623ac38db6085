"""The router: one decoded request in, one :class:`Outcome` out, whatever the era or transport.

Every front (HTTP in either era, stdio lines) does the same three things with a message:

1. :meth:`Router.admit` decodes it: the fast path reads a well-formed request's envelope and
   typed params in one pass (:class:`~millimcp.protocol.jsonrpc.RequestDecoder`); anything
   else takes the general path, which says precisely what is wrong (-32700, -32600, -32601,
   -32602) or hands back a notification or a response;
2. the front checks what its era and binding require and builds the :class:`Context`;
3. :meth:`Router.run` runs the method's handler and returns the outcome as a value (status,
   encoded reply, extra headers, the reply's attachment) for the front to send; ``None`` when
   the peer gave up on the request (see :mod:`millimcp.session.inflight`).

The router knows the method table and nothing of eras, sessions or HTTP.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, NamedTuple

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
)
from millimcp.observe import clock
from millimcp.protocol import LEGACY_ONLY, METHODS, Message, decode_message, encode_error
from millimcp.protocol.eras import without_result_type
from millimcp.protocol.jsonrpc import (
    ENVELOPE_TEXT,
    RequestDecoder,
    check_nesting,
    check_utf8,
    encode_result,
)
from millimcp.protocol.versions import LEGACY_VERSIONS, MODERN_VERSIONS
from millimcp.session.context import Context, InputRequired
from millimcp.session.inflight import Call
from millimcp.session.mrtr import Mrtr

__all__ = ["Admitted", "Outcome", "RequestHandler", "Route", "Router"]

log: Final = logging.getLogger("millimcp.session")

RequestHandler = Callable[[Any, Context], Awaitable[Any]]
"""``handler(params, ctx) -> result struct`` for one method."""

_EMPTY_PARAMS: Final = b"{}"
_HANDSHAKE_VERSIONS: Final = LEGACY_VERSIONS


class Route(NamedTuple):
    """How one method is served."""

    handler: RequestHandler
    params: msgspec.json.Decoder[Any]
    """Decodes the method's params (the general path)."""
    name_field: str | None
    """The params field mirrored in ``Mcp-Name``."""
    input_required: bool
    """May answer with an ``InputRequiredResult`` (MRTR)."""


Admitted = tuple[str | None, Any, Any, Route | None, Message | None]
"""A decoded inbound message: (method, id, params, route, message). ``method`` is None for a
response, ``id`` for a notification, ``route`` for both; ``message`` is set when the general
path decoded it (always for notifications and responses). A plain tuple: one per request."""


Outcome = tuple[int, bytes, "list[tuple[bytes, bytes]] | None", "list[Any] | None", bool]
"""What the front sends for one request, a value (not flags on shared state):
``(status, body, headers, attachment, compressible)``.

- ``status``: the HTTP status (stdio ignores it);
- ``body``: the encoded JSON-RPC reply;
- ``headers``: extra HTTP headers (``Retry-After`` of a refusal), or None;
- ``attachment``: buffers the reply carries after its JSON (``dev.millimcp/tensor``), or None;
- ``compressible``: False for a reply that will not compress (base64 of binary tensors).

A plain tuple: one is made per request, and a tuple costs least.
"""


class Router:
    """The method table of one server, and how a request is decoded and run."""

    __slots__ = ("max_depth", "mrtr", "requests", "routes", "scan_above")

    def __init__(
        self, handlers: dict[str, RequestHandler], mrtr: Mrtr, *, max_depth: int = DEFAULT_MAX_DEPTH
    ) -> None:
        self.mrtr = mrtr
        self.max_depth = max_depth
        # A request of n bytes nests at most (n - its envelope's text) / 2 deep: a body with
        # len(body) - len(method) up to this needs no depth scan (ENVELOPE_TEXT).
        self.scan_above = 2 * max_depth + ENVELOPE_TEXT
        self.routes: dict[str, Route] = {
            method: Route(
                handler,
                msgspec.json.Decoder(METHODS[method].params),
                METHODS[method].name_field,
                METHODS[method].input_required,
            )
            for method, handler in handlers.items()
        }
        self.requests = RequestDecoder({m: METHODS[m].params for m in handlers})
        """The fast path's decoder (a front on the hot path may call it itself)."""

    def __repr__(self) -> str:
        return f"<Router methods={len(self.routes)}>"

    @property
    def methods(self) -> frozenset[str]:
        return frozenset(self.routes)

    # -- decoding ---------------------------------------------------------------------------

    def admit(self, body: bytes, responses: bool = True, version: str | None = None) -> Admitted:
        """Decode any inbound message: the fast path for a request, else the general one.

        ``responses``: a response is admitted (a session answering our request); else it is
        refused (-32600). ``version``: the binding already names the request's version (the
        ``MCP-Protocol-Version`` header); a modern one makes the handshake era's own methods
        not found, before their params are looked at.
        """
        check_utf8(body)
        fast = self.requests.decode(body)
        if fast is None:
            return self.admit_slowly(body, responses, version in MODERN_VERSIONS)
        method, request_id, params = fast
        if len(body) - len(method) > self.scan_above:
            check_nesting(body, self.max_depth)
        return method, request_id, params, self.routes[method], None

    def admit_slowly(self, body: bytes, responses: bool = True, modern: bool = False) -> Admitted:
        """The general path: every kind of message, with a precise error for what is wrong.

        ``modern``: the request is known to be modern (the handshake era's methods are not
        found)."""
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
        route = self.routes.get(method)
        if route is None or (modern and method in LEGACY_ONLY):
            raise MethodNotFound(f"Method not found: {method}", request_id=request_id)
        try:
            params = route.params.decode(message.params or _EMPTY_PARAMS)
        except msgspec.DecodeError as exc:
            raise InvalidParams(f"Invalid params: {exc}", request_id=request_id) from None
        except RecursionError:
            raise ParseError("Parse error: JSON nested too deeply", request_id=request_id) from None
        return method, request_id, params, route, message

    # -- running ----------------------------------------------------------------------------

    async def run(
        self, route: Route, params: Any, ctx: Context, call: Call | None = None, record: Any = None
    ) -> Outcome | None:
        """Run a handler to its outcome; None when the peer gave up on it (``call``).

        Any other cancellation propagates. ``record`` is the trace record of the request
        (:mod:`millimcp.observe`), stamped when the handler returns. A front on the hot path
        may await the handler itself and hand what came of it to :meth:`outcome` or
        :meth:`failed`, as this does (one coroutine fewer).
        """
        try:
            result = await route.handler(params, ctx)
        except BaseException as exc:
            return self.failed(exc, route, params, ctx, call)
        return self.outcome(result, ctx, record)

    def outcome(self, result: Any, ctx: Context, record: Any = None) -> Outcome | None:
        """The outcome of a handler that returned ``result``."""
        try:
            if record is not None:  # observe: the handler is done, encoding starts
                record.handled_at = clock()
            data = encode_result(ctx.request_id, result)  # type: ignore[arg-type]
            meta = ctx.meta
            if meta is not None and meta.protocol_version in _HANDSHAKE_VERSIONS:
                data = without_result_type(data)
            attachments = ctx._attachments  # only if the handler looked at them
            if attachments is not None and (
                attachments.reply is not None or not attachments.compressible
            ):
                return 200, data, None, attachments.reply, attachments.compressible
            return 200, data, None, None, True
        except Exception as exc:
            return self.failed(exc, None, None, ctx, None)

    def failed(
        self,
        exc: BaseException,
        route: Route | None,
        params: Any,
        ctx: Context,
        call: Call | None = None,
    ) -> Outcome | None:
        """The outcome of a handler that raised ``exc`` (``route`` None: encoding its result
        did): None when it was cancelled because the peer gave up (``call``); any other
        cancellation, and anything not an ``Exception``, is raised again."""
        request_id: Any = ctx.request_id
        if isinstance(exc, asyncio.CancelledError):
            if call is None or not (call.cancelled or call.disconnected):
                raise exc
            if call.task is not None:
                call.task.uncancel()
            return None
        if isinstance(exc, InputRequired):
            if route is not None and route.input_required and ctx.session is None:
                result = self.mrtr.input_required(exc, params, ctx)
                return 200, encode_result(request_id, result), None, None, True
            log.error("%s asked for client input, which the method does not allow", ctx.method)
            return 500, encode_error(request_id, InternalError("Internal error")), None, None, True
        if isinstance(exc, ProtocolError):
            return (
                exc.http_status,
                encode_error(request_id, exc),
                refusal_headers(exc),
                None,
                True,
            )
        if not isinstance(exc, Exception):
            raise exc
        log.error("handler for %s failed", ctx.method, exc_info=exc)
        return 500, encode_error(request_id, InternalError("Internal error")), None, None, True


def refusal_headers(error: ProtocolError) -> list[tuple[bytes, bytes]] | None:
    """Extra HTTP headers of an error reply: ``Retry-After`` when the server is overloaded."""
    if isinstance(error, Overloaded):
        return [(b"retry-after", b"%d" % (error.retry_after_s or 1))]
    return None
