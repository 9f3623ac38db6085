"""Draining an HTTP app for a graceful shutdown: readiness false, new work 503.

:meth:`StreamableHTTPApp.drain <millimcp.transports.http.StreamableHTTPApp.drain>` swaps
the app's handler for a :class:`DrainingHandler`, so the hot path checks no flag: each
new POST or GET gets ``503 Service Unavailable`` with ``Retry-After`` and
``Connection: close`` (a load balancer or client retries elsewhere), a DELETE still ends
its session. The readiness route (``HttpConfig.health_path``) answers 200 until then and
503 after.

The 503's body (:data:`DRAINING_BODY`, both fronts send it) is the JSON-RPC error
``-32050`` (:class:`~millimcp.errors.Overloaded`, ``data.retryAfterMs``): the code that says
"refused before it ran, try again later", which a client may retry even for a call that is
not idempotent (millimcp's does, :mod:`millimcp.resilience.retry`). A shutting-down server
is, for a caller, one that has no room for the call now.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final, Protocol

from millimcp.errors import Overloaded
from millimcp.protocol import McpHeaders, encode_error

__all__ = ["DRAINING_BODY", "HEALTH_DRAINING", "HEALTH_OK", "DrainingHandler", "health_route"]

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
HEALTH_OK: Final = b"ok\n"
"""The readiness endpoint's body while serving (both fronts send it, as text/plain)."""
HEALTH_DRAINING: Final = b"draining\n"
"""The readiness endpoint's body once draining (with 503 and ``Retry-After: 1``)."""

DRAINING_BODY: Final = encode_error(
    None,
    Overloaded(
        "Service Unavailable: the server is shutting down; the call did not run, retry it",
        {"retryAfterMs": 1000},
    ),
)
"""The body of the 503 a draining server answers a new request with (``Retry-After: 1``)."""
_DRAINING_HEAD: Final = [
    (b"content-type", b"application/json"),
    (b"content-length", b"%d" % len(DRAINING_BODY)),
    *_DRAINING,
]


class DrainingHandler:
    """The handler of an app that is shutting down (wraps the one it had)."""

    def __init__(self, inner: Deleter) -> None:
        self.inner = inner

    async def handle_http(self, body: bytes, headers: McpHeaders, exchange: Exchange) -> None:
        exchange.started = True
        send = exchange._send
        await send({"type": "http.response.start", "status": 503, "headers": _DRAINING_HEAD})
        await send({"type": "http.response.body", "body": DRAINING_BODY})

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
            status, body, extra = 503, HEALTH_DRAINING, _DRAINING
        else:
            status, body, extra = 200, HEALTH_OK, []
        headers = [_TEXT, (b"content-length", b"%d" % len(body)), *extra]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return health
