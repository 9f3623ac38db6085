"""WWW-Authenticate, URLs, PKCE, scopes and the metadata structs of millimcp.auth."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from millimcp.auth import (
    Credentials,
    FileTokenStorage,
    MemoryTokenStorage,
    TokenResponse,
    bearer_challenge,
    parse_bearer,
)
from millimcp.auth.challenge import parse_challenges
from millimcp.auth.metadata import ProtectedResourceMetadata, decode_document, encode_document
from millimcp.auth.pkce import Pkce, s256
from millimcp.auth.scopes import format_scope, parse_scope, select_scopes, union_scopes
from millimcp.auth.urls import (
    as_metadata_urls,
    canonical_resource,
    check_transport,
    prm_urls,
    resource_allowed,
)
from millimcp.errors import AuthorizationFailed


def test_a_built_challenge_parses_back() -> None:
    header = bearer_challenge(
        error="insufficient_scope",
        scope="a b",
        resource_metadata="https://h/.well-known/oauth-protected-resource/mcp",
        error_description='needs "b"',
    )
    assert header.startswith('Bearer error="insufficient_scope", ')
    bearer = parse_bearer(header)
    assert bearer is not None
    assert bearer.error == "insufficient_scope"
    assert bearer.scope == "a b"
    assert bearer.error_description == 'needs "b"'
    assert bearer.resource_metadata == "https://h/.well-known/oauth-protected-resource/mcp"


def test_several_challenges_and_bare_values() -> None:
    header = 'Basic realm="x", Bearer scope=read, error="invalid_token", DPoP algs="ES256"'
    assert parse_challenges(header) == [
        ("basic", {"realm": "x"}),
        ("bearer", {"scope": "read", "error": "invalid_token"}),
        ("dpop", {"algs": "ES256"}),
    ]
    assert parse_bearer('Basic realm="x"') is None
    assert parse_bearer(None) is None
    assert parse_bearer("Bearer") == parse_bearer("bearer")
    assert bearer_challenge() == "Bearer"


def test_canonical_resource_and_the_resource_check() -> None:
    assert canonical_resource("HTTPS://Example.COM/mcp/#frag") == "https://example.com/mcp"
    assert canonical_resource("https://example.com/") == "https://example.com"
    assert resource_allowed("http://localhost:9/mcp", "http://localhost:9")
    assert resource_allowed("http://localhost:9/mcp", "http://localhost:9/mcp/")
    assert not resource_allowed("http://localhost:9/mcp", "http://localhost:9/mc")
    assert not resource_allowed("http://localhost:9/mcp", "https://evil.example.com/mcp")
    assert not resource_allowed("https://h/mcp", "https://h:8443/mcp")
    assert resource_allowed("https://h/mcp", "https://h:443/mcp")


def test_discovery_urls_in_the_spec_order() -> None:
    assert prm_urls("https://h/a/mcp") == [
        "https://h/.well-known/oauth-protected-resource/a/mcp",
        "https://h/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("https://h/") == ["https://h/.well-known/oauth-protected-resource"]
    assert as_metadata_urls("https://as/tenant1") == [
        "https://as/.well-known/oauth-authorization-server/tenant1",
        "https://as/.well-known/openid-configuration/tenant1",
        "https://as/tenant1/.well-known/openid-configuration",
    ]
    assert as_metadata_urls("https://as") == [
        "https://as/.well-known/oauth-authorization-server",
        "https://as/.well-known/openid-configuration",
    ]


def test_http_only_for_loopback() -> None:
    check_transport("https://as.example.com", "x")
    check_transport("http://localhost:8/x", "x")
    check_transport("http://127.0.0.1:8/x", "x")
    check_transport("http://[::1]:8/x", "x")
    with pytest.raises(AuthorizationFailed, match="not https"):
        check_transport("http://as.example.com/token", "the token endpoint")


def test_pkce_s256() -> None:
    # RFC 7636 appendix B
    assert s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == (
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )
    pair = Pkce.new()
    assert 43 <= len(pair.verifier) <= 128
    assert pair.challenge == s256(pair.verifier)
    assert pair.method == "S256"
    assert Pkce.new().verifier != pair.verifier


def test_scope_choice() -> None:
    assert select_scopes("a b", ["c"]) == ["a", "b"]
    assert select_scopes(None, ["c", "offline_access", "d"]) == ["c", "d"]
    assert select_scopes(None, None) == []
    assert select_scopes("w", ["p"], previous=["a"]) == ["a", "w"]
    assert select_scopes("a", None, server_supported=["offline_access"], offline=True) == [
        "a",
        "offline_access",
    ]
    assert select_scopes("a", None, server_supported=["a"], offline=True) == ["a"]
    assert union_scopes(["a", "b"], ["b", "c"]) == ["a", "b", "c"]
    assert parse_scope(" a  b a ") == ["a", "b"]
    assert format_scope([]) is None
    assert format_scope(["a", "b"]) == "a b"


def test_documents_round_trip_without_absent_fields() -> None:
    prm = ProtectedResourceMetadata(resource="https://h/mcp", authorization_servers=["https://as"])
    data = encode_document(prm)
    assert b"scopes_supported" not in data
    assert decode_document(ProtectedResourceMetadata, data) == prm
    extra = b'{"resource": "https://h/mcp", "unknown": 1}'
    assert decode_document(ProtectedResourceMetadata, extra).authorization_servers == []


async def test_memory_storage() -> None:
    storage = MemoryTokenStorage()
    creds = Credentials(issuer="https://as", token=TokenResponse(access_token="t"))
    assert await storage.load("https://h/mcp") is None
    await storage.save("https://h/mcp", creds)
    assert await storage.load("https://h/mcp") == creds
    await storage.save("https://h/mcp", None)
    assert await storage.load("https://h/mcp") is None


async def test_file_storage_is_private_and_survives_a_new_instance(tmp_path: Path) -> None:
    path = tmp_path / "auth" / "tokens.json"
    creds = Credentials(issuer="https://as", token=TokenResponse(access_token="t", scope="a"))
    await FileTokenStorage(path).save("https://h/mcp", creds)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = FileTokenStorage(path)
    assert await again.load("https://h/mcp") == creds
    assert await again.load("https://other/mcp") is None
    await again.save("https://h/mcp", None)
    assert await FileTokenStorage(path).load("https://h/mcp") is None
    path.write_bytes(b"not json")
    assert await FileTokenStorage(path).load("https://h/mcp") is None


def test_same_issuer_is_exact_but_for_a_pathless_trailing_slash() -> None:
    from millimcp.auth.urls import same_issuer

    assert same_issuer("https://as", "https://as")
    assert same_issuer("https://as/", "https://as")
    assert same_issuer("https://as", "https://as/")
    assert not same_issuer("https://as/t1/", "https://as/t1")
    assert not same_issuer("https://as", "https://attacker.example.com")
    assert not same_issuer("https://as", "https://AS")
    assert not same_issuer("https://as//", "https://as")
