"""The HTTP gate of a protected MCP endpoint (``Server(..., auth=ProtectedResource(...))``).

An ASGI app in front of :class:`~millimcp.transports.http.StreamableHTTPApp`; it is there only
when auth is configured, so an unprotected server pays nothing. For each request:

1. the Protected Resource Metadata paths (``/.well-known/oauth-protected-resource<path>`` and
   the root form) answer GET and OPTIONS with CORS, no token needed;
2. no bearer token: 401 ``WWW-Authenticate: Bearer resource_metadata="...", scope="..."``; a
   token the verifier refuses: 401 with ``error="invalid_token"``. Verified tokens are cached
   (:class:`~millimcp.auth.resource.VerifiedTokens`, by digest) and, in front of that, the
   last ``Authorization`` values seen map to their principal until the cached entry expires:
   a request with a known token costs a dict lookup and a clock read;
3. the scopes: ``required_scopes``, plus the ``scopes=`` of the tool called, the resource
   read or the prompt got. On 2026-07-28 the operation is named by ``Mcp-Method``/``Mcp-Name``
   (before the body is read: the endpoint refuses a body that disagrees with them); otherwise
   (the handshake era, whose endpoint does not compare them) it is read from the body, which
   is then handed on unchanged, and a body the gate cannot read (compressed, framed, too
   large) needs every scope any operation declares. Missing ones: 403
   ``error="insufficient_scope"`` naming every scope the operation needs;
4. a handshake session belongs to the principal that opened it: another gets 404;
5. the principal is :data:`~millimcp.auth.resource.CURRENT_PRINCIPAL` while the endpoint
   serves the request (``ctx.principal``).

A token is never logged, and never passed on: the endpoint sees the request's headers, not
a token to forward.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import msgspec

from millimcp.auth.challenge import bearer_challenge
from millimcp.auth.metadata import encode_document
from millimcp.auth.resource import (
    CURRENT_PRINCIPAL,
    Principal,
    ProtectedResource,
    TokenVerifier,
    VerifiedTokens,
)
from millimcp.auth.scopes import format_scope, union_scopes
from millimcp.errors import HeaderMismatch, SessionNotFound
from millimcp.protocol import MODERN_VERSIONS, encode_error
from millimcp.protocol.headers import decode_header_value
from millimcp.transports.http import StreamableHTTPApp

__all__ = ["AuthGate"]

log: Final = logging.getLogger("millimcp.auth")

Scope = dict[str, Any]
App = Callable[[Any, Any, Any], Awaitable[None]]
ScopesFor = Callable[[str, str], Sequence[str]]
"""``scopes_for(method, name)``: the scopes an operation needs besides the required ones
(``name``: the tool's or prompt's name, the resource's URI)."""
_Known = tuple[Principal, float, bool]

_MAX_SESSIONS: Final = 100_000
_MEMO_SIZE: Final = 1024
_NEEDED_SIZE: Final = 4096
_MODERN: Final = frozenset(version.encode() for version in MODERN_VERSIONS)
_SENTINEL: Final = "=?base64?"
_COMPLETE: Final = b"completion/complete"


class _PeekRef(msgspec.Struct):
    type: str | None = None
    name: str | None = None
    uri: str | None = None


class _PeekParams(msgspec.Struct):
    name: str | None = None
    uri: str | None = None
    ref: _PeekRef | None = None
    """``completion/complete``: the prompt or resource whose arguments are completed."""


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
        any_scopes: Callable[[], Sequence[str]] | None = None,
        max_body_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.app = app
        self._serve: Callable[..., Awaitable[None]] | None = (
            type(app).__call__ if isinstance(app, StreamableHTTPApp) else None
        )
        """The endpoint's own ``__call__``, called with the headers dict the gate built (no
        second one per request); None for any other ASGI app."""
        self.resource = resource
        self._cache = (
            VerifiedTokens(resource.verifier, size=resource.cache_size, ttl_s=resource.cache_ttl_s)
            if resource.cache_size > 0
            else None
        )
        self.verifier: TokenVerifier = self._cache or resource.verifier
        self._now = self._cache.now if self._cache is not None else time.time
        self._memo: dict[bytes, _Known] = {}
        """``Authorization`` value -> (principal, until, has the required scopes): a hit
        costs one dict lookup. Its entries expire with the digest cache's, so the promise
        stays (a token is verified again after ``cache_ttl_s``, and never past its ``exp``);
        a different value is a different key (compared in full, not by a hash)."""
        self.scopes_for = scopes_for
        self.any_scopes = any_scopes
        self._needed: dict[tuple[bytes, bytes | None], list[str]] = {}
        """(``Mcp-Method``, ``Mcp-Name``) -> the scopes that operation needs (2026-07-28)."""
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
        authorization = headers.get(b"authorization")
        known = self._memo.get(authorization)  # type: ignore[arg-type]  # None: not there
        if known is None or known[1] <= self._now():
            known = await self._admit(authorization, send)
            if known is None:
                return  # answered: 401
        principal, _, allowed = known
        needed = self._required
        method_header = headers.get(b"mcp-method")
        session_id = headers.get(b"mcp-session-id")
        if self.scopes_for is not None and scope["method"] == "POST":
            if (
                method_header is not None
                and session_id is None
                and headers.get(b"mcp-protocol-version") in _MODERN
                and method_header.strip(b" \t") != _COMPLETE  # its ref is in the body only
            ):
                # 2026-07-28: the endpoint refuses a body that disagrees with these headers.
                # (A handshake-era endpoint does not compare them: there the body decides.)
                key = (method_header, headers.get(b"mcp-name"))
                named = self._needed.get(key)
                needed = named if named is not None else self._needed_for(key)
            else:
                receive, extra = await self._peek_body(receive)
                if extra:
                    needed = union_scopes(self._required, extra)
            if needed is not self._required:
                allowed = principal.scopes.issuperset(needed)
        if not allowed:
            await self._challenge(send, 403, "insufficient_scope", format_scope(needed))
            return
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
            if self._serve is not None:
                await self._serve(self.app, scope, receive, send, headers)
            else:
                await self.app(scope, receive, send)
        finally:
            CURRENT_PRINCIPAL.reset(reset)

    async def _admit(self, authorization: bytes | None, send: Any) -> _Known | None:
        """The principal of an ``Authorization`` value the memo does not hold (verified, or
        from the digest cache), remembered under that value until its cache entry expires;
        None once a 401 has been sent."""
        token = _bearer(authorization)
        if token is None:
            await self._challenge(send, 401, None, self._scope_hint)
            return None
        cache = self._cache
        if cache is not None:
            verified = await cache.verify_until(token)
        else:
            principal = await self.verifier.verify(token)
            verified = None if principal is None else (principal, -math.inf)
        if verified is None:
            await self._challenge(send, 401, "invalid_token", self._scope_hint)
            return None
        principal, until = verified
        known = (principal, until, principal.scopes.issuperset(self._required))
        if cache is not None and authorization is not None and until > self._now():
            memo = self._memo
            memo[authorization] = known
            if len(memo) > _MEMO_SIZE:
                del memo[next(iter(memo))]  # the oldest
        return known

    def _needed_for(self, key: tuple[bytes, bytes | None]) -> list[str]:
        """Every scope the operation named by (``Mcp-Method``, ``Mcp-Name``) needs,
        remembered until the server's tools, prompts or resources change."""
        extra = self._header_scopes(*key)
        needed = union_scopes(self._required, extra) if extra else self._required
        if len(self._needed) >= _NEEDED_SIZE:
            self._needed.clear()  # made-up names: start again rather than grow
        self._needed[key] = needed
        return needed

    def forget_scopes(self) -> None:
        """The operations changed (a tool, prompt or resource added or removed)."""
        self._needed.clear()

    def _header_scopes(self, method_header: bytes, name_header: bytes | None) -> Sequence[str]:
        """The scopes of the operation ``Mcp-Method``/``Mcp-Name`` name, read as the endpoint
        compares them with the body: blanks stripped, and a name matches the body in its
        ``=?base64?...?=`` form or decoded (then the operation is either: both count)."""
        assert self.scopes_for is not None
        method = method_header.decode("latin-1").strip(" \t")
        if name_header is None:
            return self.scopes_for(method, "")
        name = name_header.decode("latin-1").strip(" \t")
        extra = self.scopes_for(method, name)
        if name.startswith(_SENTINEL):
            try:
                decoded = decode_header_value(name)
            except HeaderMismatch:
                return extra  # then only the literal form can match the body
            if decoded != name:
                extra = union_scopes(extra, self.scopes_for(method, decoded))
        return extra

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
        if self.scopes_for is not None:
            peek = None
            if size <= self.max_body_bytes:
                with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                    peek = _peek.decode(body)
            if peek is None:
                # Not a JSON request the gate can read (compressed, with an attachment, over
                # the limit): the operation is unknown, so it may be any of them.
                extra = self.any_scopes() if self.any_scopes is not None else ()
            elif peek.method is not None:
                extra = self.scopes_for(*_operation(peek.method, peek.params))
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


def _operation(method: str, params: _PeekParams | None) -> tuple[str, str]:
    """The (method, name) whose scopes a request needs: completing a prompt's or a
    resource's arguments needs what getting or reading it needs."""
    if params is None:
        return method, ""
    if method == "completion/complete" and params.ref is not None:
        ref = params.ref
        if ref.type == "ref/resource":
            return "resources/read", ref.uri or ""
        return "prompts/get", ref.name or ""
    if method.startswith("resources/"):
        return method, params.uri or ""
    return method, params.name or ""


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
