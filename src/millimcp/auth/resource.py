"""The server's side: a protected resource (RFC 9728) and what verifies its tokens.

- :class:`Principal`: who a verified token speaks for (``ctx.principal`` in handlers).
- :class:`TokenVerifier`: the protocol, one async method, a :class:`Principal` or None.
- :class:`StaticTokens`: fixed tokens (tests, simple deployments).
- :class:`VerifiedTokens`: a bounded cache of verified tokens, each until it expires.
- :class:`ProtectedResource`: what ``Server(..., auth=...)`` is given.

The HTTP gate that enforces it is :mod:`millimcp.transports.auth_gate`.
"""

from __future__ import annotations

import contextvars
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from millimcp.auth.metadata import ProtectedResourceMetadata
from millimcp.auth.urls import PRM_WELL_KNOWN, canonical_resource
from millimcp.errors import ConfigurationError

__all__ = [
    "CURRENT_PRINCIPAL",
    "Principal",
    "ProtectedResource",
    "StaticTokens",
    "TokenVerifier",
    "VerifiedTokens",
]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a verified access token speaks for."""

    subject: str | None
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    """Epoch seconds; None: the token does not expire."""
    issuer: str | None = None
    audience: tuple[str, ...] = ()
    claims: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        """A stable identity for binding sessions and private cache entries."""
        return f"{self.issuer or ''}|{self.subject or ''}|{self.client_id or ''}"


CURRENT_PRINCIPAL: Final[contextvars.ContextVar[Principal | None]] = contextvars.ContextVar(
    "millimcp.principal", default=None
)
"""The principal of the request being served (set by the HTTP gate; None without auth)."""


@runtime_checkable
class TokenVerifier(Protocol):
    """Verifies an access token: its :class:`Principal`, or None when it is not valid
    (expired, not for this resource, unknown, badly signed)."""

    async def verify(self, token: str) -> Principal | None: ...


class StaticTokens:
    """Fixed tokens: ``StaticTokens({"secret-token": Principal("alice", scopes=...)})``."""

    def __init__(self, tokens: Mapping[str, Principal]) -> None:
        self._tokens = dict(tokens)

    def __repr__(self) -> str:
        return f"<StaticTokens {len(self._tokens)} tokens>"

    async def verify(self, token: str) -> Principal | None:
        principal = self._tokens.get(token)
        if principal is None:
            return None
        if principal.expires_at is not None and principal.expires_at <= time.time():
            return None
        return principal


class VerifiedTokens:
    """Verified tokens kept until they expire (at most ``ttl_s``), ``size`` at most (the
    oldest entry goes first).

    Keyed by a digest of the token, so that the token itself is not kept in memory longer
    than its request. A token the verifier refused is not cached.
    """

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        size: int = 4096,
        ttl_s: float = 300.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.verifier = verifier
        self.size = size
        self.ttl_s = ttl_s
        self.now = now
        """The clock entries expire by (epoch seconds)."""
        self._entries: OrderedDict[bytes, tuple[Principal, float]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __repr__(self) -> str:
        return f"<VerifiedTokens {len(self._entries)}/{self.size} of {self.verifier!r}>"

    async def verify(self, token: str) -> Principal | None:
        verified = await self.verify_until(token)
        return None if verified is None else verified[0]

    async def verify_until(self, token: str) -> tuple[Principal, float] | None:
        """The token's principal and the epoch second its entry expires (a refused token:
        None). A memo in front of this cache keeps an entry no longer than that."""
        key = hashlib.blake2b(token.encode(), digest_size=16).digest()
        entry = self._entries.get(key)
        now = self.now()
        if entry is not None:
            if entry[1] > now:
                self.hits += 1
                return entry
            del self._entries[key]
        self.misses += 1
        principal = await self.verifier.verify(token)
        if principal is None:
            return None
        until = now + self.ttl_s
        if principal.expires_at is not None:
            until = min(until, principal.expires_at)
        if until > now:
            self._entries[key] = (principal, until)
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return principal, until


@dataclass(frozen=True)
class ProtectedResource:
    """``Server(..., auth=ProtectedResource(...))``: the MCP endpoint needs a bearer token.

    ``resource`` is the endpoint's canonical URI (tokens must be issued for it: a verifier
    checks their audience); ``authorization_servers`` are listed in the Protected Resource
    Metadata; ``required_scopes`` are needed for every request, a tool's own ``scopes=`` for
    calling it. ``verifier`` checks tokens (:class:`~millimcp.auth.JwtVerifier`,
    :class:`~millimcp.auth.IntrospectionVerifier`, :class:`StaticTokens`); verified tokens
    are cached (``cache_size``, 0 = off) until they expire.
    """

    resource: str
    authorization_servers: Sequence[str]
    verifier: TokenVerifier
    scopes_supported: Sequence[str] | None = None
    required_scopes: Sequence[str] = ()
    resource_name: str | None = None
    resource_documentation: str | None = None
    cache_size: int = 4096
    cache_ttl_s: float = 300.0
    cors_origins: str = "*"
    """``Access-Control-Allow-Origin`` of the metadata document (public by design)."""

    def __post_init__(self) -> None:
        if not self.authorization_servers:
            raise ConfigurationError("ProtectedResource needs at least one authorization server")
        if "#" in self.resource or "://" not in self.resource:
            raise ConfigurationError(f"resource must be an absolute URI: {self.resource!r}")

    def metadata(self) -> ProtectedResourceMetadata:
        supported = self.scopes_supported
        return ProtectedResourceMetadata(
            resource=self.resource,
            authorization_servers=list(self.authorization_servers),
            scopes_supported=None if supported is None else list(supported),
            bearer_methods_supported=["header"],
            resource_name=self.resource_name,
            resource_documentation=self.resource_documentation,
        )

    def metadata_paths(self) -> tuple[str, ...]:
        """The well-known paths of its metadata: path-inserted (RFC 9728 §3.1), then root."""
        canonical = canonical_resource(self.resource)
        path = canonical.split("://", 1)[1].partition("/")[2]
        inserted = f"{PRM_WELL_KNOWN}/{path}" if path else PRM_WELL_KNOWN
        return (inserted, PRM_WELL_KNOWN) if path else (PRM_WELL_KNOWN,)

    def metadata_url(self) -> str:
        """The absolute URL of the path-inserted metadata document."""
        canonical = canonical_resource(self.resource)
        scheme, rest = canonical.split("://", 1)
        host = rest.partition("/")[0]
        return f"{scheme}://{host}{self.metadata_paths()[0]}"
