"""The client's authorization flow as a sans-I/O state machine (MCP authorization).

:class:`ClientFlow` holds what one link knows (the server, its configuration, the current
credentials). Its methods return generators that yield :mod:`~millimcp.auth.steps` and are
sent their answers; the driver (the client link) does the I/O. On a challenge the flow runs
in the spec's order:

1. protected resource metadata: the challenge's ``resource_metadata``, else the
   path-inserted well-known URL, else the root one; its ``resource`` must cover the server;
2. the first authorization server; its metadata in the three URL forms, ``issuer`` equal to
   the one asked for (exact string);
3. ``S256`` in ``code_challenge_methods_supported``, else stop;
4. the scopes: the challenge's, else the resource's ``scopes_supported``, else none; union
   with those asked before (step-up); ``offline_access`` if the server lists it;
5. a client: stored for this issuer, pre-registered, a Client ID Metadata Document URL,
   dynamic registration (``application_type`` sent); credentials of another issuer are
   dropped, never shown to this one;
6. the authorization request (PKCE, ``state``, ``resource``), the redirect checked
   (``state``, then the RFC 9207 ``iss`` table, by simple string comparison);
7. the token request (``resource``, the client authentication the registration says).

Client credentials (:class:`~millimcp.auth.client_config.ClientCredentials`) run steps 1-2
and then the ``client_credentials`` grant.
"""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Callable, Generator
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import msgspec

from millimcp.auth.challenge import BearerChallenge, parse_bearer
from millimcp.auth.client_config import ClientCredentials, OAuth
from millimcp.auth.metadata import (
    AuthorizationServerMetadata,
    ClientInformation,
    ClientMetadata,
    OAuthErrorBody,
    ProtectedResourceMetadata,
    TokenResponse,
    decode_document,
    encode_document,
)
from millimcp.auth.pkce import Pkce, new_state
from millimcp.auth.scopes import format_scope, parse_scope, select_scopes
from millimcp.auth.steps import HttpRequest, HttpResponse, Load, Save, Step, UserRedirect
from millimcp.auth.storage import Credentials
from millimcp.auth.urls import (
    as_metadata_urls,
    canonical_resource,
    check_transport,
    is_loopback,
    prm_urls,
    resource_allowed,
    same_issuer,
)
from millimcp.errors import AuthorizationFailed

__all__ = ["ClientFlow", "Discovery", "Flow"]

Flow = Generator[Step, Any, None]
"""A run of the flow: yields steps, is sent their answers, returns nothing (the result is
:attr:`ClientFlow.credentials`)."""

_JWT_BEARER: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class Discovery(msgspec.Struct, frozen=True):
    """What discovery found: the resource's and its authorization server's documents."""

    resource: ProtectedResourceMetadata
    server: AuthorizationServerMetadata


def _error_text(response: HttpResponse) -> str:
    try:
        body = decode_document(OAuthErrorBody, response.body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return f"HTTP {response.status}"
    described = f": {body.error_description}" if body.error_description else ""
    return f"HTTP {response.status} {body.error}{described}"


class ClientFlow:
    """The authorization state of one link to one MCP server."""

    def __init__(
        self,
        server_url: str,
        config: OAuth | ClientCredentials,
        *,
        redirect_uri: str | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.server_url = server_url
        self.config = config
        self.redirect_uri = redirect_uri
        self.key = canonical_resource(server_url)
        """The storage key: the server's canonical URI."""
        self.credentials: Credentials | None = None
        self._now = now
        self._loaded = False
        self._refresh_failed: set[str] = set()

    def __repr__(self) -> str:
        issuer = self.credentials.issuer if self.credentials else None
        return f"<ClientFlow {self.key} issuer={issuer!r}>"

    # -- what the link asks between flows -------------------------------------------------

    def authorization(self) -> str | None:
        """The ``Authorization`` header value to send, None without a token."""
        creds = self.credentials
        if creds is None or creds.token is None:
            return None
        return f"Bearer {creds.token.access_token}"

    def due(self) -> bool:
        """True when the flow has work before the next request: the stored credentials are
        not loaded yet, or the token expires within the margin and can be renewed."""
        if not self._loaded:
            return True
        token = self.credentials.token if self.credentials else None
        if token is None or token.expires_at is None:
            return False
        if token.expires_at - self._now() > self.config.refresh_margin_s:
            return False
        if isinstance(self.config, ClientCredentials):
            return True
        return token.refresh_token is not None and token.refresh_token not in self._refresh_failed

    def prepare(self) -> Flow:
        """Load stored credentials once; renew a token about to expire."""
        if not self._loaded:
            self.credentials = yield Load(self.key)
            self._loaded = True
        if not self.due():
            return
        creds = self.credentials
        assert creds is not None
        assert creds.token is not None
        discovery = yield from self._discover(None)
        if discovery.server.issuer != creds.issuer:
            return  # the resource moved: the next 401 runs the whole flow
        if isinstance(self.config, ClientCredentials):
            yield from self._client_credentials(discovery, creds.scopes)
        else:
            yield from self._refresh(discovery, creds)

    def challenged(self, status: int, www_authenticate: str | None) -> Flow:
        """Run the flow for a 401, or a 403 with ``insufficient_scope`` (raises
        :class:`~millimcp.errors.AuthorizationFailed` when it cannot get a token)."""
        if not self._loaded:
            yield from self.prepare()
        bearer = parse_bearer(www_authenticate) or BearerChallenge()
        discovery = yield from self._discover(bearer.resource_metadata)
        issuer = discovery.server.issuer
        creds = self.credentials
        if creds is not None and creds.issuer != issuer:
            creds = None  # bound to another authorization server: never shown to this one
        previous = creds.scopes if creds is not None else []
        if isinstance(self.config, ClientCredentials):
            scopes = self._scopes(bearer, discovery, previous, offline=False)
            yield from self._client_credentials(discovery, scopes)
            return
        token = creds.token if creds is not None else None
        if (
            status == 401
            and creds is not None
            and token is not None
            and token.refresh_token is not None
            and token.refresh_token not in self._refresh_failed
            and bearer.scope is None
        ) and (yield from self._refresh(discovery, creds)):
            return
        scopes = self._scopes(bearer, discovery, previous, offline=self.config.offline_access)
        yield from self._authorization_code(discovery, creds, scopes)

    # -- discovery -----------------------------------------------------------------------

    def _discover(self, metadata_url: str | None) -> Generator[Step, Any, Discovery]:
        prm: ProtectedResourceMetadata | None = None
        for url in [metadata_url] if metadata_url else prm_urls(self.server_url):
            check_transport(url, "the protected resource metadata URL")
            response: HttpResponse = yield HttpRequest.get(url)
            if response.status == 200:
                try:
                    prm = decode_document(ProtectedResourceMetadata, response.body)
                    break
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
        if prm is None:
            raise AuthorizationFailed(f"no protected resource metadata for {self.server_url}")
        if not resource_allowed(self.server_url, prm.resource):
            raise AuthorizationFailed(
                f"the protected resource metadata names {prm.resource!r}, "
                f"not this server ({self.server_url})"
            )
        if not prm.authorization_servers:
            raise AuthorizationFailed("the protected resource names no authorization server")
        issuer = prm.authorization_servers[0]
        check_transport(issuer, "the authorization server")
        for url in as_metadata_urls(issuer):
            response = yield HttpRequest.get(url)
            if response.status != 200:
                continue
            try:
                server = decode_document(AuthorizationServerMetadata, response.body)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if not same_issuer(issuer, server.issuer):
                continue  # RFC 8414 §3.3: a document for another issuer is not used
            return Discovery(prm, server)
        raise AuthorizationFailed(f"no usable authorization server metadata for {issuer!r}")

    def _scopes(
        self,
        bearer: BearerChallenge,
        discovery: Discovery,
        previous: list[str],
        *,
        offline: bool,
    ) -> list[str]:
        if self.config.scopes is not None:
            return list(self.config.scopes)
        return select_scopes(
            bearer.scope,
            discovery.resource.scopes_supported,
            previous=previous,
            server_supported=discovery.server.scopes_supported,
            offline=offline,
        )

    # -- the authorization code grant ----------------------------------------------------

    def _client(
        self, server: AuthorizationServerMetadata, creds: Credentials | None
    ) -> Generator[Step, Any, ClientInformation]:
        assert isinstance(self.config, OAuth)
        config = self.config
        if creds is not None and creds.client is not None:
            return creds.client
        if config.client_id is not None and config.issuer in (None, server.issuer):
            return ClientInformation(
                client_id=config.client_id,
                client_secret=config.client_secret,
                token_endpoint_auth_method=config.token_endpoint_auth_method,
                issuer=server.issuer,
            )
        if config.client_metadata_url is not None and server.client_id_metadata_document_supported:
            return ClientInformation(
                client_id=config.client_metadata_url,
                token_endpoint_auth_method="none",
                issuer=server.issuer,
            )
        if server.registration_endpoint is None:
            raise AuthorizationFailed(
                f"{server.issuer} offers no registration and no client_id is configured"
            )
        check_transport(server.registration_endpoint, "the registration endpoint")
        redirect_uri = self._redirect_uri()
        supported = server.token_endpoint_auth_methods_supported or ["client_secret_basic"]
        method = config.token_endpoint_auth_method or next(
            (m for m in ("none", "client_secret_basic", "client_secret_post") if m in supported),
            "client_secret_basic",
        )
        request = ClientMetadata(
            client_name=config.client_name,
            redirect_uris=[redirect_uri],
            token_endpoint_auth_method=method,
            application_type=config.application_type
            or ("native" if is_loopback(redirect_uri) else "web"),
        )
        response: HttpResponse = yield HttpRequest.json(
            server.registration_endpoint, encode_document(request)
        )
        if response.status not in (200, 201):
            raise AuthorizationFailed(
                f"registration at {server.issuer} failed: {_error_text(response)}"
            )
        try:
            client = decode_document(ClientInformation, response.body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise AuthorizationFailed(f"the registration response is malformed: {exc}") from None
        if client.token_endpoint_auth_method is None:
            client.token_endpoint_auth_method = (
                method if client.client_secret or method == "none" else "none"
            )
        client.issuer = server.issuer
        return client

    def _redirect_uri(self) -> str:
        if self.redirect_uri is None:
            raise AuthorizationFailed("the authorization code flow needs a redirect URI")
        return self.redirect_uri

    def _authorization_code(
        self, discovery: Discovery, creds: Credentials | None, scopes: list[str]
    ) -> Flow:
        assert isinstance(self.config, OAuth)
        server, resource = discovery.server, discovery.resource.resource
        if "S256" not in (server.code_challenge_methods_supported or ()):
            raise AuthorizationFailed(f"{server.issuer} does not support PKCE with S256")
        if server.authorization_endpoint is None or server.token_endpoint is None:
            raise AuthorizationFailed(f"{server.issuer} lacks an authorization or token endpoint")
        check_transport(server.authorization_endpoint, "the authorization endpoint")
        check_transport(server.token_endpoint, "the token endpoint")
        client = yield from self._client(server, creds)
        redirect_uri = self._redirect_uri()
        pkce, state = Pkce.new(), new_state()
        query = {
            "response_type": "code",
            "client_id": client.client_id,
            "redirect_uri": redirect_uri,
            "scope": format_scope(scopes),
            "state": state,
            "code_challenge": pkce.challenge,
            "code_challenge_method": pkce.method,
            "resource": resource,
            **self.config.authorize_params,
        }
        fields = {k: v for k, v in query.items() if v is not None}
        separator = "&" if urlsplit(server.authorization_endpoint).query else "?"
        url = server.authorization_endpoint + separator + urlencode(fields, quote_via=quote)
        callback: str = yield UserRedirect(url, redirect_uri)
        params = dict(parse_qsl(urlsplit(callback).query, keep_blank_values=True))
        self._check_callback(server, params, state)
        token = yield from self._token_request(
            server,
            client,
            {
                "grant_type": "authorization_code",
                "code": params["code"],
                "redirect_uri": redirect_uri,
                "code_verifier": pkce.verifier,
                "resource": resource,
            },
        )
        self.credentials = Credentials(
            issuer=server.issuer, client=client, token=token, scopes=scopes
        )
        yield Save(self.key, self.credentials)

    @staticmethod
    def _check_callback(
        server: AuthorizationServerMetadata, params: dict[str, str], state: str
    ) -> None:
        """``state``, then RFC 9207 (advertised+present: compare; advertised+absent: reject;
        not advertised+present: compare; neither: proceed), then ``error``/``code``."""
        if params.get("state") != state:
            raise AuthorizationFailed("the authorization response's state does not match")
        iss = params.get("iss")
        if server.authorization_response_iss_parameter_supported and iss is None:
            raise AuthorizationFailed(
                "the authorization response lacks the iss its server promised"
            )
        if iss is not None and iss != server.issuer:
            raise AuthorizationFailed(
                f"the authorization response came from {iss!r}, not {server.issuer!r}"
            )
        if "error" in params:
            described = params.get("error_description")
            raise AuthorizationFailed(
                f"authorization refused: {params['error']}"
                + (f": {described}" if described else "")
            )
        if not params.get("code"):
            raise AuthorizationFailed("the authorization response carries no code")

    # -- the token endpoint --------------------------------------------------------------

    def _token_request(
        self,
        server: AuthorizationServerMetadata,
        client: ClientInformation | None,
        fields: dict[str, str | None],
    ) -> Generator[Step, Any, TokenResponse]:
        assert server.token_endpoint is not None
        headers: dict[str, str] = {}
        if client is not None:
            method = client.token_endpoint_auth_method or self._auth_method(server, client)
            if method == "client_secret_basic" and client.client_secret is not None:
                pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
                headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
            elif method == "client_secret_post" and client.client_secret is not None:
                fields = {
                    **fields,
                    "client_id": client.client_id,
                    "client_secret": client.client_secret,
                }
            else:
                fields = {**fields, "client_id": client.client_id}
        response: HttpResponse = yield HttpRequest.form(server.token_endpoint, fields, headers)
        if response.status != 200:
            raise AuthorizationFailed(f"the token request failed: {_error_text(response)}")
        try:
            token = decode_document(TokenResponse, response.body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise AuthorizationFailed(f"the token response is malformed: {exc}") from None
        if token.token_type.lower() != "bearer":
            raise AuthorizationFailed(f"unsupported token type {token.token_type!r}")
        if token.expires_in is not None:
            token.expires_at = self._now() + token.expires_in
        return token

    @staticmethod
    def _auth_method(server: AuthorizationServerMetadata, client: ClientInformation) -> str:
        supported = server.token_endpoint_auth_methods_supported or ["client_secret_basic"]
        if client.client_secret is None:
            return "none"
        for method in ("client_secret_basic", "client_secret_post"):
            if method in supported:
                return method
        return "none" if "none" in supported else "client_secret_basic"

    def _refresh(self, discovery: Discovery, creds: Credentials) -> Generator[Step, Any, bool]:
        """Renew with the refresh token; False (and not tried again) if the server refuses."""
        token = creds.token
        assert token is not None
        assert token.refresh_token is not None
        server = discovery.server
        if server.token_endpoint is None:
            return False
        check_transport(server.token_endpoint, "the token endpoint")
        fields: dict[str, str | None] = {
            "grant_type": "refresh_token",
            "refresh_token": token.refresh_token,
            "resource": discovery.resource.resource,
        }
        try:
            new = yield from self._token_request(server, creds.client, fields)
        except AuthorizationFailed:
            self._refresh_failed.add(token.refresh_token)
            return False
        if new.refresh_token is None:
            new.refresh_token = token.refresh_token
        self.credentials = Credentials(
            issuer=creds.issuer, client=creds.client, token=new, scopes=creds.scopes
        )
        yield Save(self.key, self.credentials)
        return True

    # -- client credentials --------------------------------------------------------------

    def _client_credentials(self, discovery: Discovery, scopes: list[str]) -> Flow:
        config = self.config
        assert isinstance(config, ClientCredentials)
        server = discovery.server
        if server.token_endpoint is None:
            raise AuthorizationFailed(f"{server.issuer} has no token endpoint")
        check_transport(server.token_endpoint, "the token endpoint")
        fields: dict[str, str | None] = {
            "grant_type": "client_credentials",
            "scope": format_scope(scopes),
            "resource": discovery.resource.resource,
        }
        client: ClientInformation | None
        if config.private_key is not None:
            fields["client_assertion_type"] = _JWT_BEARER
            fields["client_assertion"] = self._assertion(server)
            fields["client_id"] = config.client_id
            client = None
        else:
            client = ClientInformation(
                client_id=config.client_id, client_secret=config.client_secret
            )
        token = yield from self._token_request(server, client, fields)
        self.credentials = Credentials(
            issuer=server.issuer, token=token, scopes=parse_scope(token.scope) or scopes
        )
        yield Save(self.key, self.credentials)

    def _assertion(self, server: AuthorizationServerMetadata) -> str:
        """An RFC 7523 client assertion signed with the configured private key."""
        from millimcp.auth.jose import sign_jwt

        config = self.config
        assert isinstance(config, ClientCredentials)
        assert config.private_key is not None
        now = int(self._now())
        claims = {
            "iss": config.client_id,
            "sub": config.client_id,
            "aud": server.issuer,
            "iat": now,
            "exp": now + 300,
            "jti": secrets.token_urlsafe(16),
        }
        return sign_jwt(claims, config.private_key, config.signing_algorithm)
