"""``MCPServer.middleware`` (mcp 2.x): ``(ctx, call_next) -> result`` around every request.

A middleware sees ``ctx.method`` and the raw ``ctx.params`` (a mapping, before validation),
may answer itself, raise the SDK's ``MCPError(code, message)`` (a JSON-RPC error with that
code) or call ``call_next(ctx)``, possibly with ``dataclasses.replace(ctx, params=...)``.
Listed outermost-first, as the SDK lists them. Unlike the SDK's, they wrap requests only, not
notifications, and a middleware that returns a value answers with it as the result.

:class:`MiddlewareServer` is the millimcp ``Server`` a compat server registers on: with an
empty list its method table is the plain one, so a server without middleware pays nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import msgspec

from millimcp.errors import ProtocolError
from millimcp.protocol.types import CallToolResult
from millimcp.server import Server
from millimcp.session import Context, RequestHandler

__all__ = ["MiddlewareServer", "RequestContext"]

_JSON: Final = msgspec.json.Decoder()
_JSON_OUT: Final = msgspec.json.Encoder()
_TOOL_RESULT: Final = msgspec.json.Decoder(CallToolResult)
Middleware = Callable[["RequestContext", Callable[["RequestContext"], Awaitable[Any]]], Any]


@dataclasses.dataclass(kw_only=True)
class RequestContext:
    """What a middleware is handed: the fields of the SDK's ``ServerRequestContext``."""

    method: str
    params: Mapping[str, Any] | None
    request_id: int | str | None
    protocol_version: str | None
    lifespan_context: Any
    meta: Any = None
    session: Any = None
    request: Any = None


class MiddlewareServer(Server):
    """A ``Server`` whose requests pass through ``middleware`` first."""

    middleware: list[Middleware]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.middleware = []

    def handlers(self) -> dict[str, RequestHandler]:
        handlers = super().handlers()
        if not self.middleware:
            return handlers
        chain = tuple(self.middleware)
        return {method: _wrapped(handler, chain) for method, handler in handlers.items()}


def _wrapped(handler: RequestHandler, chain: tuple[Middleware, ...]) -> RequestHandler:
    async def handle(params: Any, ctx: Context) -> Any:
        raw = _JSON.decode(_JSON_OUT.encode(params)) if params is not None else None
        request = RequestContext(
            method=ctx.method,
            params=raw,
            request_id=ctx.request_id,
            protocol_version=ctx.protocol_version,
            lifespan_context=ctx.lifespan,
            meta=ctx.meta,
            session=ctx.session,
        )

        async def innermost(seen: RequestContext) -> Any:
            given = params
            if seen.params is not raw:  # rewritten by a middleware: validated again
                given = msgspec.json.decode(_JSON_OUT.encode(seen.params), type=type(params))
            result = await handler(given, ctx)
            if type(result) is msgspec.Raw:  # a pre-encoded tools/call result: a struct here
                return _TOOL_RESULT.decode(result)
            return result

        call_next: Callable[[RequestContext], Awaitable[Any]] = innermost
        for middleware in reversed(chain):
            call_next = _link(middleware, call_next)
        try:
            return await call_next(request)
        except ProtocolError:
            raise
        except Exception as exc:
            error = _protocol_error(exc)
            if error is None:
                raise
            raise error from exc

    return handle


def _link(
    middleware: Middleware, call_next: Callable[[RequestContext], Awaitable[Any]]
) -> Callable[[RequestContext], Awaitable[Any]]:
    async def step(ctx: RequestContext) -> Any:
        return await middleware(ctx, call_next)

    return step


def _protocol_error(exc: Exception) -> ProtocolError | None:
    """The SDK's ``MCPError`` (duck-typed: ``.error`` with ``code``/``message``/``data``) as
    millimcp's JSON-RPC error with the same code; None for anything else."""
    data = getattr(exc, "error", None)
    code = getattr(data, "code", None)
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    kind = _BY_CODE.get(code, ProtocolError)
    error = kind(str(getattr(data, "message", "")), getattr(data, "data", None))
    error.code = code
    return error


def _subclasses(cls: type[ProtocolError]) -> list[type[ProtocolError]]:
    return [sub for child in cls.__subclasses__() for sub in (child, *_subclasses(child))]


_BY_CODE: dict[int, type[ProtocolError]] = {}
"""The code's own class (``InvalidParams`` for -32602), for its HTTP status."""
for _kind in reversed(_subclasses(ProtocolError)):
    _BY_CODE[_kind.code] = _kind
