"""The OAuth documents an MCP client and server exchange, as msgspec Structs.

- :class:`ProtectedResourceMetadata`: RFC 9728, served by the MCP server (the resource).
- :class:`AuthorizationServerMetadata`: RFC 8414 and OpenID Connect Discovery (the fields
  MCP uses, unknown ones ignored).
- :class:`ClientMetadata`: RFC 7591 client metadata (a registration request, or a Client ID
  Metadata Document); :class:`ClientInformation`: what registration answers.
- :class:`TokenResponse`: RFC 6749 §5.1 (and the error of §5.2 as :class:`OAuthErrorBody`).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

__all__ = [
    "AuthorizationServerMetadata",
    "ClientInformation",
    "ClientMetadata",
    "OAuthErrorBody",
    "ProtectedResourceMetadata",
    "TokenResponse",
    "decode_document",
    "encode_document",
]


class ProtectedResourceMetadata(msgspec.Struct, omit_defaults=True, kw_only=True):
    """RFC 9728 §2: where a resource's authorization servers are and what it understands."""

    resource: str
    authorization_servers: list[str] = msgspec.field(default_factory=list)
    scopes_supported: list[str] | None = None
    bearer_methods_supported: list[str] | None = None
    resource_name: str | None = None
    resource_documentation: str | None = None
    jwks_uri: str | None = None


class AuthorizationServerMetadata(msgspec.Struct, omit_defaults=True, kw_only=True):
    """RFC 8414 §2 (and OpenID Connect Discovery): the fields an MCP client reads."""

    issuer: str
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    registration_endpoint: str | None = None
    jwks_uri: str | None = None
    introspection_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    response_types_supported: list[str] | None = None
    grant_types_supported: list[str] | None = None
    code_challenge_methods_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None
    token_endpoint_auth_signing_alg_values_supported: list[str] | None = None
    client_id_metadata_document_supported: bool | None = None
    authorization_response_iss_parameter_supported: bool | None = None


class ClientMetadata(msgspec.Struct, omit_defaults=True, kw_only=True):
    """RFC 7591 §2 client metadata: a registration request or a Client ID Metadata Document
    (then ``client_id`` is the document's own URL)."""

    client_id: str | None = None
    client_name: str | None = None
    redirect_uris: list[str] = msgspec.field(default_factory=list)
    grant_types: list[str] = msgspec.field(
        default_factory=lambda: ["authorization_code", "refresh_token"]
    )
    response_types: list[str] = msgspec.field(default_factory=lambda: ["code"])
    token_endpoint_auth_method: str | None = None
    application_type: str | None = None
    scope: str | None = None
    client_uri: str | None = None
    logo_uri: str | None = None
    software_id: str | None = None
    software_version: str | None = None


class ClientInformation(msgspec.Struct, omit_defaults=True, kw_only=True):
    """A registered client: the registration response (RFC 7591 §3.2.1) or pre-registered
    credentials. ``issuer`` records the authorization server it belongs to (the spec binds
    credentials to their issuer: they are never shown to another one)."""

    client_id: str
    client_secret: str | None = None
    token_endpoint_auth_method: str | None = None
    client_secret_expires_at: int | None = None
    redirect_uris: list[str] | None = None
    grant_types: list[str] | None = None
    issuer: str | None = None


class TokenResponse(msgspec.Struct, omit_defaults=True, kw_only=True):
    """RFC 6749 §5.1 (``expires_at`` is ours: when the token expires, epoch seconds)."""

    access_token: str
    token_type: str = "Bearer"
    expires_in: float | None = None
    refresh_token: str | None = None
    scope: str | None = None
    expires_at: float | None = None


class OAuthErrorBody(msgspec.Struct, omit_defaults=True, kw_only=True):
    """RFC 6749 §5.2: an error from the token (or registration) endpoint."""

    error: str = "unknown_error"
    error_description: str | None = None


T = TypeVar("T")

_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}
_encoder = msgspec.json.Encoder()


def decode_document(kind: type[T], data: bytes) -> T:
    """``data`` as a ``kind``; :class:`msgspec.ValidationError` / ``DecodeError`` if not one."""
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    result: T = decoder.decode(data)
    return result


def encode_document(document: msgspec.Struct) -> bytes:
    """A document as JSON (absent fields left out)."""
    return _encoder.encode(document)
