"""One MCP endpoint over Streamable HTTP, both eras: the transport's message handler.

The transport (:mod:`millimcp.transports.http`) hands over each POSTed body with its MCP
headers, each GET and each DELETE, with the :class:`~millimcp.transports.http.Exchange`
to answer through. The endpoint decides the era once per request (the rule of
:func:`millimcp.protocol.eras.classify_http`, applied by the same call that makes the modern
era's checks: :func:`~millimcp.protocol.eras.check_modern` with ``classify``) and hands the
request to that era's front:

- a POST naming a session goes to the handshake front as it is (the session decodes it:
  it may be a notification or the client's answer to a request of ours);
- any other POST is decoded here (-32700, -32600, -32601 / HTTP 404, -32602); a notification
  without a session gets 202 and nothing else; a request goes to the modern front
  (:mod:`millimcp.session.http_modern`) or, when it carries no modern version, to the
  handshake front (:mod:`millimcp.session.http_handshake`: ``initialize``, stateless
  handshake requests, or the refusal that says to send one of them);
- GET (a session's stream) and DELETE (the end of a session) are the handshake era's.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import msgspec

from millimcp.errors import ProtocolError
from millimcp.observe import TRACE, clock
from millimcp.protocol import MODERN_VERSIONS, McpHeaders
from millimcp.protocol.eras import check_modern
from millimcp.protocol.jsonrpc import check_nesting, check_utf8
from millimcp.session.disconnects import DisconnectSweeper
from millimcp.session.http_handshake import HandshakeHttp
from millimcp.session.http_modern import ModernHttp, refuse
from millimcp.session.router import Route, Router
from millimcp.session.sessions import SessionConfig, SessionStore
from millimcp.transports.http import Exchange

__all__ = ["HttpEndpoint"]


class HttpEndpoint:
    """Both eras on one endpoint: implements the transport's ``MessageHandler``."""

    __slots__ = ("handshake", "modern", "router", "sessions")

    def __init__(
        self,
        router: Router,
        sessions: SessionConfig | None = None,
        *,
        disconnect_sweep_s: float = 0.05,
    ) -> None:
        config = sessions or SessionConfig()
        sweeper = DisconnectSweeper(disconnect_sweep_s)
        self.router = router
        self.sessions = SessionStore(config)
        self.modern = ModernHttp(router, sweeper)
        self.handshake = HandshakeHttp(router, self.sessions, sweeper, config)

    def __repr__(self) -> str:
        return f"<HttpEndpoint {self.router!r} sessions={len(self.sessions)}>"

    def handle_http(self, body: bytes, headers: McpHeaders, exchange: Exchange) -> Awaitable[None]:
        """The awaitable that serves one POST. A plain function: each of its ends hands the
        request on, and the transport awaits the front's coroutine itself (one coroutine
        fewer per request on the hot path)."""
        if headers.session_id is not None:
            return self.handshake.post(body, headers, exchange)
        request_id: Any = None
        t0 = clock() if TRACE.active else 0  # observe: stage timings start (millimcp.observe)
        router = self.router
        method: str | None
        route: Route | None
        try:
            # Router.admit, its fast path inlined (the hot path): one typed decode, of the
            # type Mcp-Method names when the header agrees with the body.
            if not body.isascii():
                check_utf8(body)
            # RequestDecoder.decode's hinted path, inlined: the type Mcp-Method names.
            # No hint, or a body that disagrees with it: the union decides (decode()).
            hint = headers.method
            named = router.requests.named.get(hint)
            if named is not None:
                try:
                    request = named.decode(body)
                except (msgspec.DecodeError, RecursionError):
                    fast = router.requests.decode(body)
                else:
                    if request.method == hint and request.jsonrpc == "2.0":
                        # hint is a str here (only str keys have a decoder)
                        fast = hint, request.id, request.params  # type: ignore[assignment]
                    else:
                        fast = router.requests.decode(body)
            else:
                fast = router.requests.decode(body)
            if fast is not None:
                method, request_id, params = fast
                route = router.routes[method]
                if len(body) - len(method) > router.scan_above:
                    check_nesting(body, router.max_depth)
            else:
                method, request_id, params, route, _ = router.admit_slowly(
                    body, False, headers.protocol_version in MODERN_VERSIONS
                )
                if method is None or route is None:
                    return exchange.accepted()  # a notification: nothing to do without a session
            # The era (classify_http) and, when modern, its checks: one call.
            name_field = route.name_field
            modern = check_modern(
                method,
                params.meta,
                None if name_field is None else getattr(params, name_field),
                headers,
                True,
            )
        except ProtocolError as exc:
            return refuse(exchange, request_id, exc, t0)
        if modern is not None:
            return self.modern.serve(method, request_id, params, route, headers, exchange, t0)
        return self.handshake.open(method, request_id, params, route, headers, exchange)

    async def handle_get(
        self, headers: McpHeaders, last_event_id: str | None, exchange: Exchange
    ) -> None:
        await self.handshake.get(headers, last_event_id, exchange)

    async def handle_delete(self, headers: McpHeaders, exchange: Exchange) -> None:
        await self.handshake.delete(headers, exchange)

    def close(self) -> None:
        """End every handshake-era session."""
        self.sessions.close()
