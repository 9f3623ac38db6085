"""OAuth 2.1 for MCP, sans-I/O (MCP authorization, 2025-11-25 and 2026-07-28).

Client side: configuration values (:class:`OAuth`, :class:`ClientCredentials`,
:class:`BearerToken`, :class:`HeadlessRedirect`, :class:`LoopbackBrowser`), token storage,
and the flow as a state machine (:class:`~millimcp.auth.flow.ClientFlow`) that the client
link drives. Documents (:mod:`~millimcp.auth.metadata`), ``WWW-Authenticate``
(:mod:`~millimcp.auth.challenge`), URLs (:mod:`~millimcp.auth.urls`), PKCE and scopes are
plain functions and structs.
"""

from __future__ import annotations

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
from millimcp.auth.storage import (
    Credentials,
    FileTokenStorage,
    MemoryTokenStorage,
    TokenStorage,
)

__all__ = [
    "AuthorizationServerMetadata",
    "BearerChallenge",
    "BearerToken",
    "ClientCredentials",
    "ClientInformation",
    "ClientMetadata",
    "Credentials",
    "FileTokenStorage",
    "HeadlessRedirect",
    "LoopbackBrowser",
    "MemoryTokenStorage",
    "OAuth",
    "ProtectedResourceMetadata",
    "RedirectHandler",
    "TokenResponse",
    "TokenStorage",
    "bearer_challenge",
    "parse_bearer",
]
