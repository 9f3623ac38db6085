"""The ASGI gate of a protected MCP endpoint (``Server(..., auth=ProtectedResource(...))``).

An ASGI app in front of :class:`~millimcp.transports.http.StreamableHTTPApp`; it is there only
when auth is configured, so an unprotected server pays nothing. The rules (the token, the
scopes, who owns a session) are :class:`~millimcp.transports.auth_core.AuthCore`'s; this module
only moves them into ASGI: the Protected Resource Metadata paths
(``/.well-known/oauth-protected-resource<path>`` and the root form) answer GET and OPTIONS
with CORS, no token needed; other paths of the app (metrics, 404) are not MCP and pass; on
the endpoint's path the core judges the request (reading the body first when the headers do
not name the operation, then handing it on unchanged), a refusal is sent as it is, and the
endpoint serves the rest with the principal in
:data:`~millimcp.auth.resource.CURRENT_PRINCIPAL`. The native front serves a protected
endpoint without this gate (it calls the same core: :mod:`millimcp.transports.native.guarded`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from millimcp.auth.resource import CURRENT_PRINCIPAL, Principal, ProtectedResource
from millimcp.transports.auth_core import Answer, AuthCore, Opening, ScopesFor
from millimcp.transports.http import StreamableHTTPApp

__all__ = ["AuthGate"]

Scope = dict[str, Any]


class AuthGate:
    """See the module docstring."""

    def __init__(
        self,
        app: Any,
        resource: ProtectedResource,
        *,
        scopes_for: ScopesFor | None = None,
        any_scopes: Callable[[], Sequence[str]] | None = None,
        max_body_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.app = app
        self._serve: Callable[..., Awaitable[None]] | None = (
            type(app).__call__ if isinstance(app, StreamableHTTPApp) else None
        )
        """The endpoint's own ``__call__``, called with the headers dict the gate built (no
        second one per request); None for any other ASGI app."""
        self.core = AuthCore(
            resource, scopes_for=scopes_for, any_scopes=any_scopes, max_body_bytes=max_body_bytes
        )
        config = getattr(app, "config", None)
        self._path: str | None = getattr(config, "path", None)
        self.routes = getattr(app, "routes", None)

    def __repr__(self) -> str:
        return f"<AuthGate {self.core!r}>"

    def forget_scopes(self) -> None:
        """The operations changed (a tool, prompt or resource added or removed)."""
        self.core.forget_scopes()

    async def metadata_endpoint(self, scope: Scope, receive: Any, send: Any) -> None:
        """The Protected Resource Metadata (GET, OPTIONS preflight), for a host app to route
        ``/.well-known/oauth-protected-resource...`` to when this app is mounted."""
        await _respond(send, self.core.metadata(scope.get("method", "GET")))

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path != self._path:  # the endpoint's own path is the hot one: nothing to check
            root = scope.get("root_path", "")
            relative = path[len(root) :] if root and path.startswith(root) else path
            paths = self.core.metadata_paths
            if path in paths or relative in paths:
                await self.metadata_endpoint(scope, receive, send)
                return
            if self._path is not None and relative != self._path:
                await self.app(scope, receive, send)  # other routes (metrics, 404): not MCP
                return
        core = self.core
        headers = dict(scope["headers"])
        authorization = headers.get(b"authorization")
        method = scope["method"]
        verdict = core.judge(authorization, method, headers)
        if verdict is None:
            body = _Body(receive, core.max_body_bytes)
            verdict = await core.settle(authorization, method, headers, body.read)
            receive = body.receive
        if type(verdict) is Answer:
            await _respond(send, verdict)
            return
        principal: Principal = verdict.principal  # type: ignore[union-attr]
        if type(verdict) is Opening:
            send = _recording(send, core, principal)
        reset = CURRENT_PRINCIPAL.set(principal)
        try:
            if self._serve is not None:
                await self._serve(self.app, scope, receive, send, headers)
            else:
                await self.app(scope, receive, send)
        finally:
            CURRENT_PRINCIPAL.reset(reset)


class _Body:
    """The request's body read for the core, once, up to ``limit`` bytes; :attr:`receive`
    then hands it on unchanged (or is the request's own when the body was not read)."""

    def __init__(self, receive: Any, limit: int) -> None:
        self.receive = receive
        self._limit = limit

    async def read(self) -> bytes | None:
        """The body; None past the limit, or when the client left."""
        receive = self.receive
        chunks: list[bytes] = []
        size = 0
        more = True
        left = False
        while more:
            message = await receive()
            if message["type"] != "http.request":
                chunks = []
                left = True
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            more = message.get("more_body", False) and size <= self._limit
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": more}
            return await receive()

        self.receive = replay
        return None if left or size > self._limit else body


def _recording(send: Any, core: AuthCore, principal: Principal) -> Any:
    """A ``send`` that binds a session the response opens to ``principal``."""

    async def recording(message: Any) -> None:
        if message["type"] == "http.response.start":
            core.record(message.get("headers", ()), principal)
        await send(message)

    return recording


async def _respond(send: Any, answer: Answer) -> None:
    await send({"type": "http.response.start", "status": answer.status, "headers": answer.headers})
    await send({"type": "http.response.body", "body": answer.body})
