"""The HTTP gate of a protected MCP endpoint (``Server(..., auth=ProtectedResource(...))``).

An ASGI app in front of :class:`~millimcp.transports.http.StreamableHTTPApp`; it is there only
when auth is configured, so an unprotected server pays nothing. For each request:

1. the Protected Resource Metadata paths (``/.well-known/oauth-protected-resource<path>`` and
   the root form) answer GET and OPTIONS with CORS, no token needed;
2. no bearer token: 401 ``WWW-Authenticate: Bearer resource_metadata="...", scope="..."``; a
   token the verifier refuses (cached while valid): 401 with ``error="invalid_token"``;
3. the scopes: ``required_scopes``, plus a tool's own ``scopes=`` for ``tools/call``. The
   tool is named by ``Mcp-Method``/``Mcp-Name`` (2026-07-28: before the body is read; the
   endpoint refuses a body that disagrees with them), else read from the body, which is then
   handed on unchanged. Missing ones: 403 ``error="insufficient_scope"`` naming every scope
   the operation needs;
4. a handshake session belongs to the principal that opened it: another gets 404;
5. the principal is :data:`~millimcp.auth.resource.CURRENT_PRINCIPAL` while the endpoint
   serves the request (``ctx.principal``).

A token is never logged, and never passed on: the endpoint sees the request's headers, not
a token to forward.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import msgspec

from millimcp.auth.challenge import bearer_challenge
from millimcp.auth.metadata import encode_document
from millimcp.auth.resource import CURRENT_PRINCIPAL, Principal, ProtectedResource, VerifiedTokens
from millimcp.auth.scopes import format_scope, union_scopes
from millimcp.errors import SessionNotFound
from millimcp.protocol import encode_error

__all__ = ["AuthGate"]

log: Final = logging.getLogger("millimcp.auth")

Scope = dict[str, Any]
App = Callable[[Any, Any, Any], Awaitable[None]]
ScopesFor = Callable[[str, str], Sequence[str]]
"""``scopes_for(method, name)``: the scopes an operation needs besides the required ones."""

_MAX_SESSIONS: Final = 100_000


class _PeekParams(msgspec.Struct):
    name: str | None = None


class _Peek(msgspec.Struct):
    method: str | None = None
    params: _PeekParams | None = None


_peek = msgspec.json.Decoder(_Peek)


class AuthGate:
    """See the module docstring."""

    def __init__(
        self,
        app: Any,
        resource: ProtectedResource,
        *,
        scopes_for: ScopesFor | None = None,
        max_body_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.app = app
        self.resource = resource
        self.verifier = (
            VerifiedTokens(resource.verifier, size=resource.cache_size, ttl_s=resource.cache_ttl_s)
            if resource.cache_size > 0
            else resource.verifier
        )
        self.scopes_for = scopes_for
        self.max_body_bytes = max_body_bytes
        self.metadata_paths = frozenset(resource.metadata_paths())
        self._metadata_url = resource.metadata_url()
        self._document = encode_document(resource.metadata())
        self._required = list(resource.required_scopes)
        challenged = self._required or list(resource.scopes_supported or ())
        self._scope_hint = format_scope(s for s in challenged if s != "offline_access")
        self._owners: OrderedDict[str, str] = OrderedDict()
        config = getattr(app, "config", None)
        self._path: str | None = getattr(config, "path", None)
        self.routes = getattr(app, "routes", None)

    def __repr__(self) -> str:
        return f"<AuthGate {self.resource.resource} {self.verifier!r}>"

    # -- the metadata document -----------------------------------------------------------

    async def metadata_endpoint(self, scope: Scope, receive: Any, send: Any) -> None:
        """The Protected Resource Metadata (GET, OPTIONS preflight), for a host app to route
        ``/.well-known/oauth-protected-resource...`` to when this app is mounted."""
        cors = [
            (b"access-control-allow-origin", self.resource.cors_origins.encode()),
            (b"access-control-allow-methods", b"GET, OPTIONS"),
            (b"access-control-allow-headers", b"mcp-protocol-version, authorization"),
        ]
        method = scope.get("method", "GET")
        if method == "OPTIONS":
            await _respond(send, 204, b"", [*cors, (b"access-control-max-age", b"86400")])
        elif method in ("GET", "HEAD"):
            headers = [
                (b"content-type", b"application/json"),
                (b"cache-control", b"public, max-age=3600"),
                *cors,
            ]
            await _respond(send, 200, b"" if method == "HEAD" else self._document, headers)
        else:
            await _respond(send, 405, b"", [(b"allow", b"GET, OPTIONS"), *cors])

    # -- the gate ------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path != self._path:  # the endpoint's own path is the hot one: nothing to check
            root = scope.get("root_path", "")
            relative = path[len(root) :] if root and path.startswith(root) else path
            if path in self.metadata_paths or relative in self.metadata_paths:
                await self.metadata_endpoint(scope, receive, send)
                return
            if self._path is not None and relative != self._path:
                await self.app(scope, receive, send)  # other routes (metrics, 404): not MCP
                return
        headers = dict(scope["headers"])
        token = _bearer(headers.get(b"authorization"))
        if token is None:
            await self._challenge(send, 401, None, self._scope_hint)
            return
        principal = await self.verifier.verify(token)
        if principal is None:
            await self._challenge(send, 401, "invalid_token", self._scope_hint)
            return
        method_header = headers.get(b"mcp-method")
        needed = self._required
        if self.scopes_for is not None and scope["method"] == "POST":
            if method_header is not None:
                name = headers.get(b"mcp-name")
                method = method_header.decode("latin-1")
                extra = self.scopes_for(method, "" if name is None else name.decode("latin-1"))
            else:
                receive, extra = await self._peek_body(receive)
            if extra:
                needed = union_scopes(self._required, extra)
        if needed and not principal.scopes.issuperset(needed):
            await self._challenge(send, 403, "insufficient_scope", format_scope(needed))
            return
        session_id = headers.get(b"mcp-session-id")
        if session_id is not None:
            owner = self._owners.get(session_id.decode("latin-1"))
            if owner is not None and owner != principal.key:
                error = SessionNotFound("session not found")
                await _respond(send, 404, encode_error(None, error), _JSON)
                return
            if scope["method"] == "DELETE":
                self._owners.pop(session_id.decode("latin-1"), None)
        elif method_header is None or method_header == b"initialize":
            send = self._recording(send, principal)  # a response that may open a session
        reset = CURRENT_PRINCIPAL.set(principal)
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT_PRINCIPAL.reset(reset)

    async def _peek_body(self, receive: Any) -> tuple[Any, Sequence[str]]:
        """Read the body to learn the operation; a ``receive`` that hands it on unchanged."""
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                chunks = []
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            more = message.get("more_body", False) and size <= self.max_body_bytes
        body = b"".join(chunks)
        extra: Sequence[str] = ()
        if self.scopes_for is not None and size <= self.max_body_bytes:
            try:
                peek = _peek.decode(body)
            except (msgspec.DecodeError, msgspec.ValidationError):
                peek = None
            if peek is not None and peek.method is not None:
                name = peek.params.name if peek.params is not None else None
                extra = self.scopes_for(peek.method, name or "")
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": more}
            return await receive()

        return replay, extra

    def _recording(self, send: Any, principal: Principal) -> Any:
        """A ``send`` that binds a session the response opens to ``principal``."""
        owners = self._owners

        async def recording(message: Any) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", ()):
                    if name.lower() == b"mcp-session-id":
                        owners[value.decode("latin-1")] = principal.key
                        if len(owners) > _MAX_SESSIONS:
                            owners.popitem(last=False)
            await send(message)

        return recording

    async def _challenge(
        self, send: Any, status: int, error: str | None, scope: str | None
    ) -> None:
        value = bearer_challenge(
            error=error, scope=scope, resource_metadata=self._metadata_url
        ).encode("latin-1")
        body = msgspec.json.encode(
            {"error": error or "invalid_request", "error_description": _DESCRIPTIONS[status, error]}
        )
        await _respond(send, status, body, [*_JSON, (b"www-authenticate", value)])


_JSON: Final = [(b"content-type", b"application/json")]
_DESCRIPTIONS: Final = {
    (401, None): "an access token is required",
    (401, "invalid_token"): "the access token is not valid for this resource",
    (403, "insufficient_scope"): "the access token lacks a scope this operation needs",
}


def _bearer(value: bytes | None) -> str | None:
    if value is None:
        return None
    if value.startswith(b"Bearer ") and b" " not in value[7:]:
        return value[7:].decode("latin-1") or None
    scheme, _, token = value.decode("latin-1").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


async def _respond(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
