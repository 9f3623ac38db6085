"""A millimcp server as an OAuth protected resource, over real HTTP (uvicorn on 127.0.0.1).

Tokens are RS256 JWTs from a key generated here; the verifier is the real JwtVerifier.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from millimcp import Client, Context, Server
from millimcp.auth import (
    BearerToken,
    JwtVerifier,
    Principal,
    ProtectedResource,
    StaticTokens,
    VerifiedTokens,
    parse_bearer,
)
from millimcp.errors import RequestRejected
from millimcp.testing import modern_request
from tests.integration.auth.conftest import ISSUER, Keys

RESOURCE = "http://127.0.0.1/mcp"  # the canonical URI the tokens are issued for


def protected_server(verifier: Any) -> Server:
    server = Server(
        "orders",
        auth=ProtectedResource(
            resource=RESOURCE,
            authorization_servers=[ISSUER],
            scopes_supported=["orders:read", "orders:write"],
            required_scopes=["orders:read"],
            verifier=verifier,
        ),
    )

    @server.tool
    async def whoami(ctx: Context) -> str:
        principal = ctx.principal
        assert principal is not None
        return f"{principal.subject} {principal.client_id} {' '.join(sorted(principal.scopes))}"

    @server.tool(scopes=["orders:write"])
    async def create_order(item: str) -> str:
        return f"created {item}"

    return server


def verifier_for(keys: Keys, **options: Any) -> JwtVerifier:
    return JwtVerifier(issuer=ISSUER, audience=RESOURCE, jwks=keys.jwks(), **options)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(header: dict[str, Any], claims: dict[str, Any], secret: bytes | None) -> str:
    head = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(claims).encode())
    if secret is None:
        return head + "."
    return head + "." + _b64(hmac.new(secret, head.encode(), hashlib.sha256).digest())


def claims(**extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": ISSUER, "aud": RESOURCE, "sub": "eve", "exp": now + 600, **extra}


async def post(url: str, method: str, params: dict[str, Any], token: str | None) -> httpx.Response:
    body, headers = modern_request(method, params, name=params.get("name"))
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient() as http:
        return await http.post(url + "/mcp", content=body, headers=headers)


async def test_no_token_gets_401_naming_the_metadata_and_scope(serve: Any, keys: Keys) -> None:
    url = await serve(protected_server(verifier_for(keys)).asgi())
    response = await post(url, "tools/list", {}, None)
    assert response.status_code == 401
    bearer = parse_bearer(response.headers["www-authenticate"])
    assert bearer is not None
    assert bearer.error is None
    assert bearer.scope == "orders:read"
    assert bearer.resource_metadata == "http://127.0.0.1/.well-known/oauth-protected-resource/mcp"
    async with httpx.AsyncClient() as http:
        for path in (
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ):
            document = await http.get(url + path)
            assert document.status_code == 200
            assert document.headers["access-control-allow-origin"] == "*"
            assert document.json() == {
                "resource": RESOURCE,
                "authorization_servers": [ISSUER],
                "scopes_supported": ["orders:read", "orders:write"],
                "bearer_methods_supported": ["header"],
            }
        preflight = await http.options(url + "/.well-known/oauth-protected-resource/mcp")
        assert preflight.status_code == 204
        assert "GET" in preflight.headers["access-control-allow-methods"]


@pytest.mark.parametrize(
    "case",
    ["wrong-audience", "expired", "wrong-issuer", "not-yet-valid", "garbage", "other-key"],
)
async def test_invalid_tokens_get_401_invalid_token(serve: Any, keys: Keys, case: str) -> None:
    url = await serve(protected_server(verifier_for(keys)).asgi())
    now = int(time.time())
    makers: dict[str, Callable[[], str]] = {
        "wrong-audience": lambda: keys.token("https://other.example.com/mcp", "orders:read"),
        "expired": lambda: keys.token(RESOURCE, "orders:read", exp=now - 120, iat=now - 900),
        "wrong-issuer": lambda: keys.token(RESOURCE, "orders:read", iss="https://evil.example"),
        "not-yet-valid": lambda: keys.token(RESOURCE, "orders:read", nbf=now + 600),
        "garbage": lambda: "not.a.jwt",
        "other-key": lambda: Keys("key-1").token(RESOURCE, "orders:read"),
    }
    token = makers[case]()
    response = await post(url, "tools/list", {}, token)
    assert response.status_code == 401, response.text
    bearer = parse_bearer(response.headers["www-authenticate"])
    assert bearer is not None
    assert bearer.error == "invalid_token"


async def test_alg_none_and_hs256_with_the_rsa_public_key_are_refused(
    serve: Any, keys: Keys
) -> None:
    url = await serve(protected_server(verifier_for(keys)).asgi())
    public_pem = keys.key.as_pem(private=False)
    for token in (
        forged({"alg": "none", "typ": "JWT"}, claims(scope="orders:read"), None),
        forged({"alg": "HS256", "kid": "key-1"}, claims(scope="orders:read"), public_pem),
    ):
        response = await post(url, "tools/list", {}, token)
        assert response.status_code == 401, token
    # the same verifier accepts a real token, so the refusals above are the algorithm's
    ok = await post(url, "tools/list", {}, keys.token(RESOURCE, "orders:read"))
    assert ok.status_code == 200


async def test_a_tools_scope_is_checked_before_the_call(serve: Any, keys: Keys) -> None:
    url = await serve(protected_server(verifier_for(keys)).asgi())
    reader = keys.token(RESOURCE, "orders:read")
    call = {"name": "create_order", "arguments": {"item": "tea"}}
    refused = await post(url, "tools/call", call, reader)
    assert refused.status_code == 403
    bearer = parse_bearer(refused.headers["www-authenticate"])
    assert bearer is not None
    assert bearer.error == "insufficient_scope"
    assert bearer.scope == "orders:read orders:write"  # every scope the call needs
    # without the Mcp-Method/Mcp-Name headers, the body names the tool
    body, headers = modern_request("tools/call", call, name="create_order")
    del headers["mcp-method"], headers["mcp-name"]
    headers["authorization"] = f"Bearer {reader}"
    async with httpx.AsyncClient() as http:
        bare = await http.post(url + "/mcp", content=body, headers=headers)
    assert bare.status_code == 403
    writer = keys.token(RESOURCE, "orders:read orders:write")
    async with Client.over_http(url + "/mcp", auth=BearerToken(writer)) as client:
        assert (await client.call_tool("create_order", {"item": "tea"})).text == "created tea"
        assert (await client.call_tool("whoami", {})).text == "alice agent orders:read orders:write"
    # no token scope at all: 403 for every request (required_scopes)
    nothing = await post(url, "tools/list", {}, keys.token(RESOURCE, ""))
    assert nothing.status_code == 403


async def test_a_client_without_the_scope_sees_the_refusal(serve: Any, keys: Keys) -> None:
    url = await serve(protected_server(verifier_for(keys)).asgi())
    reader = keys.token(RESOURCE, "orders:read")
    async with Client.over_http(url + "/mcp", auth=BearerToken(reader)) as client:
        assert (await client.call_tool("whoami", {})).text == "alice agent orders:read"
        with pytest.raises(RequestRejected) as refused:
            await client.call_tool("create_order", {"item": "tea"})
        assert refused.value.status == 403


async def test_jwks_rotation_refetches_once_per_interval(keys: Keys) -> None:
    new = Keys("key-2")
    documents = [keys.jwks(), {"keys": [*keys.jwks()["keys"], *new.jwks()["keys"]]}]
    fetched: list[str] = []

    async def fetch(url: str, body: bytes | None, headers: Any) -> tuple[int, bytes]:
        fetched.append(url)
        document = documents[min(len(fetched) - 1, 1)]
        return 200, json.dumps(document).encode()

    verifier = JwtVerifier(
        issuer=ISSUER,
        audience=RESOURCE,
        jwks_uri="https://auth.example.com/jwks",
        fetch=fetch,
        refetch_interval_s=3600,
    )
    assert await verifier.verify(keys.token(RESOURCE, "orders:read")) is not None
    assert len(fetched) == 1
    # not fetched again for a known kid
    assert await verifier.verify(keys.token(RESOURCE)) is not None
    assert len(fetched) == 1
    # a kid it does not hold, but the interval since the last fetch is not over: no fetch
    assert await verifier.verify(new.token(RESOURCE)) is None
    assert len(fetched) == 1
    verifier.refetch_interval_s = 0
    principal = await verifier.verify(new.token(RESOURCE, "orders:read"))
    assert principal is not None
    assert principal.scopes == {"orders:read"}
    assert len(fetched) == 2
    verifier.refetch_interval_s = 3600
    for _ in range(5):  # made-up kids do not become a flood of fetches
        assert await verifier.verify(Keys("made-up").token(RESOURCE)) is None
    assert len(fetched) == 2  # the last fetch was just now: none within the interval


async def test_the_jwks_is_found_through_the_issuers_metadata(keys: Keys) -> None:
    fetched: list[str] = []

    async def fetch(url: str, body: bytes | None, headers: Any) -> tuple[int, bytes]:
        fetched.append(url)
        if url == "https://auth.example.com/.well-known/oauth-authorization-server":
            return 200, json.dumps({"issuer": ISSUER, "jwks_uri": ISSUER + "/keys"}).encode()
        if url == ISSUER + "/keys":
            return 200, json.dumps(keys.jwks()).encode()
        return 404, b""

    verifier = JwtVerifier(issuer=ISSUER, audience=RESOURCE, fetch=fetch)
    assert await verifier.verify(keys.token(RESOURCE, "a")) is not None
    assert fetched == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        ISSUER + "/keys",
    ]


async def test_verified_tokens_are_cached_until_they_expire() -> None:
    clock = [1000.0]
    principal = Principal("bob", scopes=frozenset({"a"}), expires_at=1010.0)
    asked: list[str] = []

    class Counting:
        async def verify(self, token: str) -> Principal | None:
            asked.append(token)
            return principal if token == "t" else None

    cache = VerifiedTokens(Counting(), ttl_s=300, now=lambda: clock[0])
    assert await cache.verify("t") == principal
    assert await cache.verify("t") == principal
    assert asked == ["t"]
    assert (cache.hits, cache.misses) == (1, 1)
    assert await cache.verify("unknown") is None
    assert await cache.verify("unknown") is None  # refusals are not cached
    assert asked == ["t", "unknown", "unknown"]
    clock[0] = 1011.0  # past the token's expiry: the verifier is asked again
    assert await cache.verify("t") == principal
    assert asked[-1] == "t"
    assert len(asked) == 4
    assert await StaticTokens({"x": principal}).verify("x") is None  # expired in real time


async def test_a_session_belongs_to_the_principal_that_opened_it(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    alice = Principal("alice", scopes=frozenset({"orders:read"}))
    bob = Principal("bob", scopes=frozenset({"orders:read"}))
    tokens = {"alice-secret-token-1": alice, "bob-secret-token-2": bob}
    url = await serve(protected_server(StaticTokens(tokens)).asgi())
    async with Client.over_http(
        url + "/mcp", era="handshake", auth=BearerToken("alice-secret-token-1")
    ) as client:
        assert (await client.call_tool("whoami", {})).text == "alice None orders:read"
        session_id = client._core.link.session_id
        assert session_id is not None
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-session-id": session_id,
            "mcp-protocol-version": "2025-11-25",
        }
        body = b'{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}'
        async with httpx.AsyncClient() as http:
            other = await http.post(
                url + "/mcp",
                content=body,
                headers={**headers, "authorization": "Bearer bob-secret-token-2"},
            )
            assert other.status_code == 404
            same = await http.post(
                url + "/mcp",
                content=body,
                headers={**headers, "authorization": "Bearer alice-secret-token-1"},
            )
            assert same.status_code == 200
    logged = "\n".join(record.getMessage() + repr(record.args) for record in caplog.records)
    assert caplog.records  # something was logged at DEBUG...
    assert "secret-token" not in logged  # ...and no token among it


def test_a_server_without_auth_imports_no_jwt_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from millimcp import Server; s = Server('x'); s.asgi();"
        "print('joserfc' in sys.modules, 'millimcp.transports.auth_gate' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
