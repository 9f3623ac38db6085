"""What a client is told about how to authorize (``Client.over_http(url, auth=...)``).

- :class:`BearerToken`: a token obtained elsewhere, sent as is.
- :class:`OAuth`: the authorization code flow with PKCE, as MCP specifies it (a user, or an
  automation reading the redirect: :class:`HeadlessRedirect`).
- :class:`ClientCredentials`: machine to machine (the ``client_credentials`` grant,
  ``client_secret_basic`` or ``private_key_jwt``).

These are values; the client link drives the flow (:mod:`millimcp.auth.flow`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from millimcp.auth.storage import MemoryTokenStorage, TokenStorage

__all__ = [
    "BearerToken",
    "ClientCredentials",
    "HeadlessRedirect",
    "LoopbackBrowser",
    "OAuth",
    "RedirectHandler",
]


@runtime_checkable
class RedirectHandler(Protocol):
    """Takes the user agent through the authorization request: given the authorization
    URL, returns the URL the authorization server redirected back to (with ``code``,
    ``state``, maybe ``iss``)."""

    @property
    def redirect_uri(self) -> str: ...

    def __call__(self, authorization_url: str) -> Awaitable[str]: ...


@dataclass(frozen=True)
class HeadlessRedirect:
    """Automation: GET the authorization URL without following redirects and read the
    ``Location`` the server answers with (an authorization server that approves at once:
    test servers, ``login_hint`` auto-login, pre-consented clients). Nothing listens on
    ``redirect_uri``."""

    redirect_uri: str = "http://localhost:3000/callback"


@dataclass(frozen=True)
class LoopbackBrowser:
    """A person: open the authorization URL in the browser and receive the redirect on a
    loopback listener (``127.0.0.1``, ``port`` 0 = any free port; RFC 8252 §7.3)."""

    port: int = 0
    path: str = "/callback"
    timeout_s: float = 300.0
    open_browser: bool = True


@dataclass(frozen=True)
class BearerToken:
    """A fixed access token (``Authorization: Bearer <token>`` on every request)."""

    token: str = field(repr=False)


@dataclass(frozen=True)
class OAuth:
    """The authorization code flow with PKCE (MCP authorization, both revisions).

    Registration, in the spec's order: stored credentials for this authorization server,
    then ``client_id`` (pre-registered; ``client_secret`` for a confidential client, bound
    to ``issuer`` when given), then a Client ID Metadata Document (``client_metadata_url``,
    when the server supports them), then dynamic registration (``client_name``,
    ``application_type``). ``scopes`` replaces the spec's choice of scopes;
    ``authorize_params`` are added to the authorization request (``login_hint``...).
    ``max_authorizations`` bounds the flows one request may start (step-up loops).
    """

    client_name: str = "millimcp"
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    issuer: str | None = None
    token_endpoint_auth_method: str | None = None
    client_metadata_url: str | None = None
    redirect: HeadlessRedirect | LoopbackBrowser | RedirectHandler = field(
        default_factory=LoopbackBrowser
    )
    storage: TokenStorage = field(default_factory=MemoryTokenStorage)
    scopes: tuple[str, ...] | None = None
    authorize_params: Mapping[str, str] = field(default_factory=dict)
    application_type: str | None = None
    offline_access: bool = True
    max_authorizations: int = 3
    refresh_margin_s: float = 30.0


@dataclass(frozen=True)
class ClientCredentials:
    """The ``client_credentials`` grant: ``client_secret`` (sent as ``client_secret_basic``,
    or ``client_secret_post`` when the server takes only that), or ``private_key`` (a PEM
    private key: ``private_key_jwt`` with ``signing_algorithm``; needs the ``auth`` extra)."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    private_key: str | None = field(default=None, repr=False)
    signing_algorithm: str = "ES256"
    scopes: tuple[str, ...] | None = None
    storage: TokenStorage = field(default_factory=MemoryTokenStorage)
    max_authorizations: int = 3
    refresh_margin_s: float = 30.0
