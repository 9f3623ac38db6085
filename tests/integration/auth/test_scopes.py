"""Operation scopes at the auth gate, over real HTTP (uvicorn on 127.0.0.1): ``scopes=`` of
tools, resources (static and templates) and prompts, however the request names them, and
the verified-token memo in front of the cache (a known token, a different one, expiry)."""

from __future__ import annotations

import asyncio
import gzip
import time
from typing import Any

import httpx
import pytest

from millimcp import Client, Server
from millimcp.auth import BearerToken, Principal, ProtectedResource, StaticTokens, parse_bearer
from millimcp.errors import RequestRejected
from millimcp.testing import modern_request
from millimcp.testing.asgi import http_scope

RESOURCE = "http://127.0.0.1/mcp"
TOKENS = {
    "reader-token": Principal("rita", scopes=frozenset({"read"})),
    "docs-token": Principal("dora", scopes=frozenset({"read", "docs"})),
    "all-token": Principal("alma", scopes=frozenset({"read", "docs", "admin", "write"})),
}
HANDSHAKE = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
}


def server(verifier: Any = None) -> Server:
    srv = Server(
        "scoped",
        auth=ProtectedResource(
            resource=RESOURCE,
            authorization_servers=["https://auth.example.com"],
            required_scopes=["read"],
            verifier=verifier or StaticTokens(TOKENS),
        ),
    )

    @srv.tool
    async def hello() -> str:
        return "hello"

    @srv.tool(scopes=["write"])
    async def delete_all() -> str:
        return "deleted"

    @srv.resource("docs://public")
    async def public() -> str:
        return "public text"

    @srv.resource("docs://secret", scopes=["docs"])
    async def secret() -> str:
        return "secret text"

    @srv.resource("files://{name}", scopes=["docs"])
    async def file(name: str) -> str:
        return f"file {name}"

    @srv.prompt
    def greet() -> str:
        return "say hello"

    @srv.prompt(scopes=["admin"])
    def audit() -> str:
        return "audit everything"

    return srv


async def post(
    url: str, body: bytes, headers: dict[str, str], token: str | None = "reader-token"
) -> httpx.Response:
    if token is not None:
        headers = {**headers, "authorization": f"Bearer {token}"}
    async with httpx.AsyncClient() as http:
        return await http.post(url + "/mcp", content=body, headers=headers)


async def in_process(app: Any, scope: dict[str, Any], body: bytes) -> list[dict[str, Any]]:
    """The messages ``app`` sends for one request."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


def refused_scope(response: httpx.Response) -> str | None:
    assert response.status_code == 403, (response.status_code, response.text)
    bearer = parse_bearer(response.headers["www-authenticate"])
    assert bearer is not None
    assert bearer.error == "insufficient_scope"
    return bearer.scope


async def test_resources_and_prompts_need_their_scopes(serve: Any) -> None:
    url = await serve(server().asgi())
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("resources/read", {"uri": "docs://secret"}, "read docs"),
        ("resources/read", {"uri": "files://report"}, "read docs"),  # a template's scopes
        ("prompts/get", {"name": "audit"}, "read admin"),
        ("tools/call", {"name": "delete_all", "arguments": {}}, "read write"),
    ]
    for method, params, scope in cases:
        body, headers = modern_request(method, params)
        assert refused_scope(await post(url, body, headers)) == scope, method
        # the body names the operation when the headers do not (handshake-era shape)
        del headers["mcp-method"], headers["mcp-name"]
        assert refused_scope(await post(url, body, headers)) == scope, method
    allowed: list[tuple[str, dict[str, Any]]] = [
        ("resources/read", {"uri": "docs://public"}),
        ("prompts/get", {"name": "greet"}),
        ("tools/call", {"name": "hello", "arguments": {}}),
    ]
    for method, params in allowed:
        body, headers = modern_request(method, params)
        assert (await post(url, body, headers)).status_code == 200, method
    async with Client.over_http(url + "/mcp", auth=BearerToken("reader-token")) as client:
        with_reader = await client.read_resource("docs://public")
        assert with_reader.contents[0].text == "public text"
        with pytest.raises(RequestRejected) as refused:
            await client.read_resource("docs://secret")
        assert refused.value.status == 403
    async with Client.over_http(url + "/mcp", auth=BearerToken("docs-token")) as client:
        read = await client.read_resource("docs://secret")
        assert read.contents[0].text == "secret text"
        read = await client.read_resource("files://q3")
        assert read.contents[0].text == "file q3"
    async with Client.over_http(url + "/mcp", auth=BearerToken("all-token")) as client:
        prompt = await client.get_prompt("audit")
        assert prompt.messages


async def test_a_tool_registered_later_is_checked_too(serve: Any) -> None:
    srv = server()
    url = await serve(srv.asgi())
    body, headers = modern_request("tools/call", {"name": "late", "arguments": {}})
    unknown = await post(url, body, headers)
    assert unknown.status_code == 400  # an unknown tool: the endpoint's error, past the gate

    @srv.tool(scopes=["write"])
    async def late() -> str:
        return "late"

    assert refused_scope(await post(url, body, headers)) == "read write"
    srv.remove_tool("late")
    assert (await post(url, body, headers)).status_code == 400


async def test_the_header_forms_the_endpoint_accepts_name_the_same_operation(
    serve: Any,
) -> None:
    """``Mcp-Name`` may be base64 (``=?base64?...?=``) or blank-padded: the endpoint matches
    the body in those forms, so the gate reads them the same way."""
    url = await serve(server().asgi())
    body, headers = modern_request("tools/call", {"name": "delete_all", "arguments": {}})
    encoded = {**headers, "mcp-name": "=?base64?ZGVsZXRlX2FsbA==?="}
    assert refused_scope(await post(url, body, encoded)) == "read write"
    # HTTP servers strip the blanks around a value; an ASGI host might not
    gate = server().asgi()
    for name, value in (("mcp-name", " delete_all\t"), ("mcp-method", " tools/call ")):
        raw = [(k.encode(), v.encode()) for k, v in {**headers, name: value}.items()]
        scope = http_scope([*raw, (b"authorization", b"Bearer reader-token")])
        assert (await in_process(gate, scope, body))[0]["status"] == 403, name


async def test_handshake_headers_do_not_name_the_operation(serve: Any) -> None:
    """In a handshake-era session the endpoint does not compare ``Mcp-Method`` with the body:
    a header naming a harmless method cannot carry a scoped call past the gate."""
    url = await serve(server().asgi())
    init = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion":'
        b' "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}'
    )
    opened = await post(url, init, HANDSHAKE)
    assert opened.status_code == 200, opened.text
    session = {**HANDSHAKE, "mcp-session-id": opened.headers["mcp-session-id"]}
    call = b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "delete_all"}}'
    lying = {**session, "mcp-method": "tools/list", "mcp-name": "x"}
    assert refused_scope(await post(url, call, lying)) == "read write"
    # a compressed body the gate cannot read needs every scope some operation declares
    packed = {**session, "content-encoding": "gzip"}
    scope = refused_scope(await post(url, gzip.compress(call), packed))
    assert scope is not None
    assert set(scope.split()) == {"read", "write", "docs", "admin"}
    opened = await post(url, init, HANDSHAKE, token="all-token")
    packed["mcp-session-id"] = opened.headers["mcp-session-id"]
    everything = await post(url, gzip.compress(call), packed, token="all-token")
    assert everything.status_code == 200, everything.text
    assert b"deleted" in everything.content


async def test_a_known_token_is_remembered_only_while_valid(serve: Any) -> None:
    class Expiring:
        """``expiring-token`` is valid for a second from its first use."""

        def __init__(self) -> None:
            self.until: float | None = None
            self.asked = 0

        async def verify(self, token: str) -> Principal | None:
            self.asked += 1
            if token != "expiring-token":
                return None
            if self.until is None:
                self.until = time.time() + 1.0
            if time.time() >= self.until:
                return None
            return Principal("eva", scopes=frozenset({"read"}), expires_at=self.until)

    verifier = Expiring()
    url = await serve(server(verifier).asgi())
    body, headers = modern_request("tools/call", {"name": "hello", "arguments": {}})
    assert (await post(url, body, headers, token="expiring-token")).status_code == 200
    assert (await post(url, body, headers, token="expiring-token")).status_code == 200
    assert verifier.asked == 1  # the second request was known
    # one character off a remembered token is another token
    assert (await post(url, body, headers, token="expiring-tokeN")).status_code == 401
    assert verifier.asked == 2
    assert verifier.until is not None
    await asyncio.sleep(max(0.0, verifier.until - time.time()) + 0.05)
    late = await post(url, body, headers, token="expiring-token")
    assert late.status_code == 401  # past its expiry: verified again, and refused
    assert verifier.asked == 3


def test_an_app_dropped_takes_its_gate_with_it() -> None:
    """The server tells each live gate when its tools change, and holds gates weakly: an app
    rebuilt many times does not pile up gates (nor keep their memos alive)."""
    import gc

    srv = server()
    kept = srv.asgi()
    for _ in range(5):
        srv.asgi()
    gc.collect()
    assert len(srv._gates) == 1
    assert kept is not None

    @srv.tool(scopes=["admin"])
    async def later() -> str:
        return "later"

    assert len(srv._gates) == 1


async def test_completing_arguments_needs_the_scopes_of_what_they_belong_to(serve: Any) -> None:
    """``completion/complete`` names its prompt or resource only in the body's ``ref``: the
    gate reads it there, in both eras, so completions cannot probe a scoped prompt."""
    url = await serve(server().asgi())
    cases: list[tuple[dict[str, Any], str]] = [
        ({"type": "ref/prompt", "name": "audit"}, "read admin"),
        ({"type": "ref/resource", "uri": "files://{name}"}, "read docs"),  # a template
        ({"type": "ref/resource", "uri": "files://report"}, "read docs"),
    ]
    for ref, scope in cases:
        params = {"ref": ref, "argument": {"name": "name", "value": "r"}}
        body, headers = modern_request("completion/complete", params)
        assert refused_scope(await post(url, body, headers)) == scope, ref
        del headers["mcp-method"]
        headers.pop("mcp-name", None)
        assert refused_scope(await post(url, body, headers)) == scope, ref
    params = {
        "ref": {"type": "ref/prompt", "name": "audit"},
        "argument": {"name": "a", "value": ""},
    }
    body, headers = modern_request("completion/complete", params)
    assert (await post(url, body, headers, token="all-token")).status_code == 200
    params = {
        "ref": {"type": "ref/prompt", "name": "greet"},
        "argument": {"name": "a", "value": ""},
    }
    body, headers = modern_request("completion/complete", params)
    assert (await post(url, body, headers)).status_code == 200
