"""``IntrospectionVerifier`` (RFC 7662) against an introspection endpoint over real HTTP on
127.0.0.1: a small ASGI authorization server written here (uvicorn), which answers from a
table of tokens and counts what it is asked. nanoidp's own endpoint is exercised in
``test_nanoidp.py``."""

from __future__ import annotations

import base64
import logging
import time
from typing import Any
from urllib.parse import parse_qs

import httpx
import msgspec
import pytest

from millimcp import Client, Context, Server
from millimcp.auth import BearerToken, IntrospectionVerifier, ProtectedResource, parse_bearer
from millimcp.testing import modern_request
from millimcp.testing.processes import free_port

RESOURCE = "http://127.0.0.1/mcp"
AS = "https://auth.example.com"
CREDENTIALS = "Basic " + base64.b64encode(b"orders-rs:rs-secret").decode()


class IntrospectionEndpoint:
    """``POST /introspect``: ``client_secret_basic`` as ``orders-rs``, then the answer for
    the form's ``token`` from ``answers`` (``{"active": false}`` for any other)."""

    def __init__(self) -> None:
        now = int(time.time())
        self.answers: dict[str, dict[str, Any]] = {
            "active-token": {
                "active": True,
                "sub": "alice",
                "client_id": "agent",
                "scope": "orders:read orders:write",
                "iss": AS,
                "aud": RESOURCE,
                "exp": now + 600,
            },
            "listed-audience": {
                "active": True,
                "sub": "bob",
                "aud": ["https://other.example.com", RESOURCE],
                "exp": now + 600,
            },
            "revoked-token": {"active": False},
            "expired-token": {"active": True, "sub": "carol", "aud": RESOURCE, "exp": now - 5},
            "other-audience": {
                "active": True,
                "sub": "dave",
                "aud": "https://other.example.com/mcp",
                "exp": now + 600,
            },
        }
        self.asked: list[str] = []
        self.forms: list[dict[str, list[str]]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = dict(scope["headers"])
        if scope["path"] != "/introspect" or scope["method"] != "POST":
            await _answer(send, 404, {"error": "not_found"})
            return
        if headers.get(b"authorization", b"").decode() != CREDENTIALS:
            await _answer(send, 401, {"error": "invalid_client"})
            return
        form = parse_qs(body.decode())
        self.forms.append(form)
        token = form.get("token", [""])[0]
        self.asked.append(token)
        await _answer(send, 200, self.answers.get(token, {"active": False}))


async def _answer(send: Any, status: int, document: dict[str, Any]) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": msgspec.json.encode(document)})


def verifier(url: str, secret: str = "rs-secret") -> IntrospectionVerifier:
    return IntrospectionVerifier(
        url + "/introspect", client_id="orders-rs", client_secret=secret, audience=RESOURCE
    )


async def test_active_inactive_expired_and_audience(serve: Any) -> None:
    endpoint = IntrospectionEndpoint()
    check = verifier(await serve(endpoint))
    principal = await check.verify("active-token")
    assert principal is not None
    assert (principal.subject, principal.client_id, principal.issuer) == ("alice", "agent", AS)
    assert principal.scopes == {"orders:read", "orders:write"}
    assert principal.audience == (RESOURCE,)
    assert principal.expires_at == endpoint.answers["active-token"]["exp"]
    assert endpoint.forms[0] == {"token": ["active-token"], "token_type_hint": ["access_token"]}
    listed = await check.verify("listed-audience")
    assert listed is not None
    assert listed.subject == "bob"
    for refused in ("revoked-token", "expired-token", "other-audience", "unknown-token"):
        assert await check.verify(refused) is None, refused
    assert endpoint.asked[2:] == [
        "revoked-token",
        "expired-token",
        "other-audience",
        "unknown-token",
    ]


async def test_a_refused_client_or_an_endpoint_down_refuses_the_token(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="millimcp.auth")
    url = await serve(IntrospectionEndpoint())
    assert await verifier(url, secret="wrong").verify("active-token") is None
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert await verifier(down).verify("active-token") is None
    messages = [record.getMessage() for record in caplog.records]
    assert any("HTTP 401" in m and url in m for m in messages), messages
    assert any("failed" in m and down in m for m in messages), messages
    assert not any("active-token" in m for m in messages)


def protected(check: IntrospectionVerifier) -> Server:
    server = Server(
        "orders",
        auth=ProtectedResource(
            resource=RESOURCE,
            authorization_servers=[AS],
            required_scopes=["orders:read"],
            verifier=check,
        ),
    )

    @server.tool
    async def whoami(ctx: Context) -> str:
        assert ctx.principal is not None
        return f"{ctx.principal.subject} {ctx.principal.client_id}"

    return server


async def test_a_protected_server_introspects_once_per_token(serve: Any) -> None:
    endpoint = IntrospectionEndpoint()
    check = verifier(await serve(endpoint))
    url = await serve(protected(check).asgi())
    async with Client.over_http(url + "/mcp", auth=BearerToken("active-token")) as client:
        for _ in range(3):
            assert (await client.call_tool("whoami", {})).text == "alice agent"
    assert endpoint.asked == ["active-token"]  # cached after the first request
    body, headers = modern_request("tools/list", {})
    async with httpx.AsyncClient() as http:
        for token in ("revoked-token", "expired-token"):
            refused = await http.post(
                url + "/mcp", content=body, headers={**headers, "authorization": f"Bearer {token}"}
            )
            assert refused.status_code == 401
            bearer = parse_bearer(refused.headers["www-authenticate"])
            assert bearer is not None
            assert bearer.error == "invalid_token"
    # refusals are not cached: a token revoked at the AS is asked about each time
    assert endpoint.asked == ["active-token", "revoked-token", "expired-token"]


async def test_an_introspection_endpoint_down_is_401_not_500(serve: Any) -> None:
    check = verifier(f"http://127.0.0.1:{free_port()}")
    url = await serve(protected(check).asgi())
    body, headers = modern_request("tools/list", {})
    async with httpx.AsyncClient() as http:
        response = await http.post(
            url + "/mcp", content=body, headers={**headers, "authorization": "Bearer active-token"}
        )
    assert response.status_code == 401
    bearer = parse_bearer(response.headers["www-authenticate"])
    assert bearer is not None
    assert bearer.error == "invalid_token"
