"""The rules of a protected MCP endpoint, for any HTTP front: who may make a request.

:class:`AuthCore` judges a request from its method, its headers (a dict of lower-case byte
names, the last of a repeated name winning) and, where the headers do not name the
operation, its body. It does no I/O of its own beyond the token verifier, and speaks neither
ASGI nor HTTP bytes: a refusal is an :class:`Answer` (status, headers, body) that the front
writes its own way. The ASGI gate (:class:`~millimcp.transports.auth_gate.AuthGate`) and the
native front (:mod:`millimcp.transports.native.guarded`) both call it: first
:meth:`AuthCore.judge` (no await: a token seen lately and an operation its headers name), and
when that cannot decide, :meth:`AuthCore.settle` (the token verified, the body read). The rules:

1. the token: no bearer token, 401 ``WWW-Authenticate: Bearer resource_metadata="...",
   scope="..."``; a token the verifier refuses, 401 ``error="invalid_token"``. Verified
   tokens are cached (:class:`~millimcp.auth.resource.VerifiedTokens`, by digest) and, in
   front of that, the last ``Authorization`` values seen map to their principal until the
   cached entry expires: a request with a known token costs a dict lookup and a clock read;
2. the scopes it needs: ``required_scopes``, plus the ``scopes=`` of the tool called, the
   resource read or the prompt got. On 2026-07-28 ``Mcp-Method``/``Mcp-Name`` name the
   operation (before the body is read: the endpoint refuses a body that disagrees with them);
   otherwise (the handshake era, whose endpoint does not compare them) the body does, and a
   body that cannot be read (compressed, framed, too large) needs every scope any operation
   declares. Missing ones: 403 ``error="insufficient_scope"`` naming every scope the
   operation needs;
3. a handshake session belongs to the principal that opened it: another gets 404. A request
   whose response may open one is admitted as an :class:`Opening`, and the front calls
   :meth:`AuthCore.record` with that response's headers.

The front then serves the request with the principal in
:data:`~millimcp.auth.resource.CURRENT_PRINCIPAL` (``ctx.principal``). A token is never
logged, and never passed on: the endpoint sees the request's headers, not a token to forward.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, NamedTuple

import msgspec

from millimcp.auth.challenge import bearer_challenge
from millimcp.auth.metadata import encode_document
from millimcp.auth.resource import Principal, ProtectedResource, TokenVerifier, VerifiedTokens
from millimcp.auth.scopes import format_scope, union_scopes
from millimcp.errors import HeaderMismatch, SessionNotFound
from millimcp.protocol import MODERN_VERSIONS, encode_error
from millimcp.protocol.headers import decode_header_value

__all__ = [
    "Answer",
    "AuthCore",
    "BodyReader",
    "Fields",
    "Known",
    "Opening",
    "ScopesFor",
    "Verdict",
]

Fields = dict[bytes, bytes]
"""A request's headers: lower-case names to values (the last of a repeated name wins)."""
ScopesFor = Callable[[str, str], Sequence[str]]
"""``scopes_for(method, name)``: the scopes an operation needs besides the required ones
(``name``: the tool's or prompt's name, the resource's URI)."""


class Answer(NamedTuple):
    """A whole response the front writes instead of serving the request."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


class Known(NamedTuple):
    """An authenticated ``Authorization`` value."""

    principal: Principal
    until: float
    """When the memo entry expires (the digest cache's expiry; -inf: not remembered)."""
    allowed: bool
    """Whether the principal holds every required scope."""


class Opening(NamedTuple):
    """An admitted request whose response may open a handshake session: the front calls
    :meth:`AuthCore.record` with the response's headers."""

    principal: Principal


Verdict = Answer | Known | Opening
"""What the core says of a request: refuse it (the answer), or serve it for a principal."""
BodyReader = Callable[[], Awaitable[bytes | None]]
"""Reads a request's whole body for the core (None: it cannot be read as JSON)."""

_MAX_SESSIONS: Final = 100_000
_MEMO_SIZE: Final = 1024
_NEEDED_SIZE: Final = 4096
_MODERN: Final = frozenset(version.encode() for version in MODERN_VERSIONS)
_SENTINEL: Final = "=?base64?"
_COMPLETE: Final = b"completion/complete"
_SESSION: Final = b"mcp-session-id"
_JSON: Final = [(b"content-type", b"application/json")]
_DESCRIPTIONS: Final = {
    (401, None): "an access token is required",
    (401, "invalid_token"): "the access token is not valid for this resource",
    (403, "insufficient_scope"): "the access token lacks a scope this operation needs",
}


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


class AuthCore:
    """See the module docstring."""

    def __init__(
        self,
        resource: ProtectedResource,
        *,
        scopes_for: ScopesFor | None = None,
        any_scopes: Callable[[], Sequence[str]] | None = None,
        max_body_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.resource = resource
        self._cache = (
            VerifiedTokens(resource.verifier, size=resource.cache_size, ttl_s=resource.cache_ttl_s)
            if resource.cache_size > 0
            else None
        )
        self.verifier: TokenVerifier = self._cache or resource.verifier
        self._now = self._cache.now if self._cache is not None else time.time
        self._memo: dict[bytes | None, Known] = {}
        """``Authorization`` value -> its :class:`Known`: a hit costs one dict lookup. Its
        entries expire with the digest cache's, so the promise stays (a token is verified
        again after ``cache_ttl_s``, and never past its ``exp``); a different value is a
        different key (compared in full, not by a hash)."""
        self._last: tuple[bytes | None, Known | None] = (b"", None)
        """The last memo entry :meth:`judge` used, and its key (one client's token, again)."""
        self.scopes_for = scopes_for
        self.any_scopes = any_scopes
        self._needed: dict[tuple[bytes, bytes | None], list[str]] = {}
        """(``Mcp-Method``, ``Mcp-Name``) -> the scopes that operation needs (2026-07-28)."""
        self.max_body_bytes = max_body_bytes
        self.metadata_paths = frozenset(resource.metadata_paths())
        self._metadata_url = resource.metadata_url()
        self._document = encode_document(resource.metadata())
        self.required = list(resource.required_scopes)
        challenged = self.required or list(resource.scopes_supported or ())
        self._scope_hint = format_scope(s for s in challenged if s != "offline_access")
        self._owners: OrderedDict[bytes, str] = OrderedDict()
        """Session id -> the key of the principal that opened it."""

    def __repr__(self) -> str:
        return f"<AuthCore {self.resource.resource} {self.verifier!r}>"

    # -- the metadata document -----------------------------------------------------------

    def metadata(self, method: str) -> Answer:
        """The Protected Resource Metadata's answer to ``method`` (GET, HEAD, OPTIONS)."""
        cors = [
            (b"access-control-allow-origin", self.resource.cors_origins.encode()),
            (b"access-control-allow-methods", b"GET, OPTIONS"),
            (b"access-control-allow-headers", b"mcp-protocol-version, authorization"),
        ]
        if method == "OPTIONS":
            return Answer(204, [*cors, (b"access-control-max-age", b"86400")], b"")
        if method in ("GET", "HEAD"):
            headers = [
                (b"content-type", b"application/json"),
                (b"cache-control", b"public, max-age=3600"),
                *cors,
            ]
            return Answer(200, headers, b"" if method == "HEAD" else self._document)
        return Answer(405, [(b"allow", b"GET, OPTIONS"), *cors], b"")

    # -- 1. the token --------------------------------------------------------------------

    def judge(
        self,
        authorization: bytes | None,
        method: str,
        fields: Fields,
        known: Known | None = None,
    ) -> Verdict | None:
        """The verdict on a request whose headers name what it needs, by a token seen lately
        (or ``known``): no await, the hot path. None: :meth:`settle` it (the token is new, or
        the body names the operation: every POST of the handshake era, ``completion/complete``).

        On 2026-07-28 ``Mcp-Method``/``Mcp-Name`` name the operation: the endpoint refuses a
        body that disagrees with them. A handshake-era endpoint does not compare them, so
        there (and for a POST without them) the body decides."""
        if known is None:
            last = self._last
            if authorization == last[0]:  # a compare: cheaper than hashing a long token
                known = last[1]
            else:
                known = self._memo.get(authorization)
                if known is not None:
                    self._last = (authorization, known)
            if known is None or known.until <= self._now():
                return None
        if self.scopes_for is None or method != "POST":
            return self.check(known, self.required, method, fields)
        method_header = fields.get(b"mcp-method")
        if (
            method_header is None
            or _SESSION in fields
            or fields.get(b"mcp-protocol-version") not in _MODERN
            or method_header.strip(b" \t") == _COMPLETE  # its ref is in the body only
        ):
            return None
        key = (method_header, fields.get(b"mcp-name"))
        needed = self._needed.get(key)
        if needed is None:
            needed = self._needed_for(key)
        return self.check(known, needed, method, fields)

    async def settle(
        self, authorization: bytes | None, method: str, fields: Fields, body: BodyReader
    ) -> Verdict:
        """The verdict on any request: the token verified (or remembered), the body read
        when the headers do not name the operation."""
        known = await self.authenticate(authorization)
        if type(known) is Answer:
            return known
        assert type(known) is Known
        verdict = self.judge(authorization, method, fields, known)
        if verdict is not None:
            return verdict
        return self.check(known, self.body_scopes(await body()), method, fields)

    async def authenticate(self, authorization: bytes | None) -> Known | Answer:
        """The principal of an ``Authorization`` value, or the 401 to send."""
        known = self._memo.get(authorization)
        if known is not None and known.until > self._now():
            return known
        token = _bearer(authorization)
        if token is None:
            return self._challenge(401, None, self._scope_hint)
        cache = self._cache
        if cache is not None:
            verified = await cache.verify_until(token)
        else:
            principal = await self.verifier.verify(token)
            verified = None if principal is None else (principal, -math.inf)
        if verified is None:
            return self._challenge(401, "invalid_token", self._scope_hint)
        principal, until = verified
        known = Known(principal, until, principal.scopes.issuperset(self.required))
        if cache is not None and authorization is not None and until > self._now():
            memo = self._memo
            memo[authorization] = known
            if len(memo) > _MEMO_SIZE:
                del memo[next(iter(memo))]  # the oldest
        return known

    # -- 2. the scopes an operation needs ------------------------------------------------

    def body_scopes(self, body: bytes | None) -> list[str]:
        """The scopes the operation in a request's ``body`` needs; None (or a body the core
        cannot read: compressed, framed, over the limit) may be any operation."""
        peek = None
        if body is not None and len(body) <= self.max_body_bytes:
            with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                peek = _peek.decode(body)
        extra: Sequence[str] = ()
        if self.scopes_for is None:
            pass
        elif peek is None:
            extra = self.any_scopes() if self.any_scopes is not None else ()
        elif peek.method is not None:
            extra = self.scopes_for(*_operation(peek.method, peek.params))
        return union_scopes(self.required, extra) if extra else self.required

    def forget_scopes(self) -> None:
        """The operations changed (a tool, prompt or resource added or removed)."""
        self._needed.clear()

    def _needed_for(self, key: tuple[bytes, bytes | None]) -> list[str]:
        """Every scope the operation named by (``Mcp-Method``, ``Mcp-Name``) needs,
        remembered until the server's tools, prompts or resources change."""
        extra = self._named_scopes(*key)
        needed = union_scopes(self.required, extra) if extra else self.required
        if len(self._needed) >= _NEEDED_SIZE:
            self._needed.clear()  # made-up names: start again rather than grow
        self._needed[key] = needed
        return needed

    def _named_scopes(self, method_header: bytes, name_header: bytes | None) -> Sequence[str]:
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

    # -- 3. the verdict ------------------------------------------------------------------

    def check(self, known: Known, needed: list[str], method: str, fields: Fields) -> Verdict:
        """The verdict on a request by ``known`` that needs ``needed``."""
        allowed = (
            known.allowed if needed is self.required else known.principal.scopes.issuperset(needed)
        )
        if not allowed:
            return self._challenge(403, "insufficient_scope", format_scope(needed))
        session_id = fields.get(_SESSION)
        if session_id is not None:
            owner = self._owners.get(session_id)
            if owner is not None and owner != known.principal.key:
                return Answer(404, _JSON, encode_error(None, SessionNotFound("session not found")))
            if method == "DELETE":
                self._owners.pop(session_id, None)
            return known
        method_header = fields.get(b"mcp-method")
        if method_header is None or method_header == b"initialize":
            return Opening(known.principal)  # its response may open a session
        return known

    def record(self, headers: Sequence[tuple[bytes, bytes]], principal: Principal) -> None:
        """Bind the session a response's headers open (``Mcp-Session-Id``) to ``principal``."""
        owners = self._owners
        for name, value in headers:
            if name.lower() == _SESSION:
                owners[bytes(value)] = principal.key
                if len(owners) > _MAX_SESSIONS:
                    owners.popitem(last=False)

    def _challenge(self, status: int, error: str | None, scope: str | None) -> Answer:
        value = bearer_challenge(
            error=error, scope=scope, resource_metadata=self._metadata_url
        ).encode("latin-1")
        body = msgspec.json.encode(
            {"error": error or "invalid_request", "error_description": _DESCRIPTIONS[status, error]}
        )
        return Answer(status, [*_JSON, (b"www-authenticate", value)], body)


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
