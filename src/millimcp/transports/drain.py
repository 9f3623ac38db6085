"""Draining an HTTP app for a graceful shutdown: readiness false, new work 503.

:meth:`StreamableHTTPApp.drain <millimcp.transports.http.StreamableHTTPApp.drain>` swaps
the app's handler for a :class:`DrainingHandler`, so the hot path checks no flag: each
new POST or GET gets ``503 Service Unavailable`` with ``Retry-After`` and
``Connection: close`` (a load balancer or client retries elsewhere), a DELETE still ends
its session. The readiness route (``HttpConfig.health_path``) answers 200 until then and
503 after.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final, Protocol

from millimcp.protocol import McpHeaders
from millimcp.transports.body import error

__all__ = ["DrainingHandler", "health_route"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Route = Callable[[Scope, Receive, Send], Awaitable[None]]


class Exchange(Protocol):
    """What is used here of :class:`millimcp.transports.http.Exchange`."""

    started: bool

    @property
    def _send(self) -> Send: ...


class Deleter(Protocol):
    """The part of a :class:`~millimcp.transports.http.MessageHandler` still served."""

    async def handle_delete(self, headers: McpHeaders, exchange: Any) -> None: ...


class Drainable(Protocol):
    @property
    def draining(self) -> bool: ...


_DRAINING: Final = [(b"retry-after", b"1"), (b"connection", b"close")]
_TEXT: Final = (b"content-type", b"text/plain; charset=utf-8")


class DrainingHandler:
    """The handler of an app that is shutting down (wraps the one it had)."""

    def __init__(self, inner: Deleter) -> None:
        self.inner = inner

    async def handle_http(self, body: bytes, headers: McpHeaders, exchange: Exchange) -> None:
        exchange.started = True
        await error(exchange._send, 503, "Service Unavailable: shutting down", _DRAINING)

    async def handle_get(
        self, headers: McpHeaders, last_event_id: str | None, exchange: Exchange
    ) -> None:
        await self.handle_http(b"", headers, exchange)

    async def handle_delete(self, headers: McpHeaders, exchange: Exchange) -> None:
        await self.inner.handle_delete(headers, exchange)


def health_route(app: Drainable) -> Route:
    """The readiness endpoint of ``app``: 200 ``ok`` while it serves, 503 once draining."""

    async def health(scope: Scope, receive: Receive, send: Send) -> None:
        if app.draining:
            status, body, extra = 503, b"draining\n", _DRAINING
        else:
            status, body, extra = 200, b"ok\n", []
        headers = [_TEXT, (b"content-length", b"%d" % len(body)), *extra]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return health
