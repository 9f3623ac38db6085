"""OAuth 2.1 for MCP, sans-I/O (MCP authorization, 2025-11-25 and 2026-07-28).

Client side: configuration values (:class:`OAuth`, :class:`ClientCredentials`,
:class:`BearerToken`, :class:`HeadlessRedirect`, :class:`LoopbackBrowser`), token storage,
and the flow as a state machine (:class:`~millimcp.auth.flow.ClientFlow`) that the client
link drives. Documents (:mod:`~millimcp.auth.metadata`), ``WWW-Authenticate``
(:mod:`~millimcp.auth.challenge`), URLs (:mod:`~millimcp.auth.urls`), PKCE and scopes are
plain functions and structs.

Server side: :class:`ProtectedResource` (``Server(..., auth=...)``), :class:`Principal`
(``ctx.principal``), the :class:`TokenVerifier` protocol and :class:`StaticTokens`,
:class:`JwtVerifier` and :class:`IntrospectionVerifier` (imported on first use: JWT needs
joserfc, the ``auth`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from millimcp.auth.challenge import BearerChallenge, bearer_challenge, parse_bearer
from millimcp.auth.client_config import (
    BearerToken,
    ClientCredentials,
    HeadlessRedirect,
    LoopbackBrowser,
    OAuth,
    RedirectHandler,
)
from millimcp.auth.metadata import (
    AuthorizationServerMetadata,
    ClientInformation,
    ClientMetadata,
    ProtectedResourceMetadata,
    TokenResponse,
)
from millimcp.auth.resource import (
    CURRENT_PRINCIPAL,
    Principal,
    ProtectedResource,
    StaticTokens,
    TokenVerifier,
    VerifiedTokens,
)
from millimcp.auth.storage import (
    Credentials,
    FileTokenStorage,
    MemoryTokenStorage,
    TokenStorage,
)

if TYPE_CHECKING:
    from millimcp.auth.introspection import IntrospectionVerifier
    from millimcp.auth.jwt_verifier import JwtVerifier

__all__ = [
    "CURRENT_PRINCIPAL",
    "AuthorizationServerMetadata",
    "BearerChallenge",
    "BearerToken",
    "ClientCredentials",
    "ClientInformation",
    "ClientMetadata",
    "Credentials",
    "FileTokenStorage",
    "HeadlessRedirect",
    "IntrospectionVerifier",
    "JwtVerifier",
    "LoopbackBrowser",
    "MemoryTokenStorage",
    "OAuth",
    "Principal",
    "ProtectedResource",
    "ProtectedResourceMetadata",
    "RedirectHandler",
    "StaticTokens",
    "TokenResponse",
    "TokenStorage",
    "TokenVerifier",
    "VerifiedTokens",
    "bearer_challenge",
    "parse_bearer",
]


def __getattr__(name: str) -> object:
    # The verifiers load on first use: JwtVerifier brings joserfc (~100 ms of imports).
    if name == "JwtVerifier":
        from millimcp.auth.jwt_verifier import JwtVerifier

        return JwtVerifier
    if name == "IntrospectionVerifier":
        from millimcp.auth.introspection import IntrospectionVerifier

        return IntrospectionVerifier
    raise AttributeError(f"module 'millimcp.auth' has no attribute {name!r}")
