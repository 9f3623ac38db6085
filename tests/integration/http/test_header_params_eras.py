"""``x-mcp-header`` mirroring (``Mcp-Param-*``) is a 2026-07-28 rule: checked for modern
requests, never asked of a handshake-era session (whose clients don't know it)."""

from __future__ import annotations

import httpx

from millimcp import Server
from millimcp.testing import modern_request

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def build() -> Server:
    server = Server("header-params")

    @server.tool(headers={"region": "Region"})
    async def where(region: str) -> str:
        return region

    return server


async def test_a_handshake_session_calls_a_mirrored_tool_without_param_headers() -> None:
    transport = httpx.ASGITransport(app=build().asgi())
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        opened = await client.post(
            "/mcp",
            headers=ACCEPT,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
        )
        session = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
        session["mcp-protocol-version"] = "2025-11-25"
        call = {"name": "where", "arguments": {"region": "eu"}}
        answer = await client.post(
            "/mcp",
            headers=session,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["content"][0]["text"] == "eu"


async def test_a_modern_call_without_the_param_header_is_refused() -> None:
    transport = httpx.ASGITransport(app=build().asgi())
    body, headers = modern_request("tools/call", {"name": "where", "arguments": {"region": "eu"}})
    assert not any(name.startswith("mcp-param-") for name in headers)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        refused = await client.post("/mcp", headers=headers, content=body)
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == -32020
        accepted = await client.post(
            "/mcp", headers={**headers, "mcp-param-region": "eu"}, content=body
        )
        assert accepted.status_code == 200, accepted.text
