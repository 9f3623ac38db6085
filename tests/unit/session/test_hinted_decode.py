"""The endpoint's hinted decode (the type Mcp-Method names, tried first) accepts only a body
that agrees with the hint and is JSON-RPC 2.0; any other body is judged as without a hint."""

from __future__ import annotations

import json
from typing import Any

from millimcp import Server
from millimcp.testing import http_scope, modern_request


async def post(body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    server = Server("hinted")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    app = server.asgi()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = http_scope([(k.encode(), v.encode()) for k, v in headers.items()])
    await app(scope, receive, send)
    body_out = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body_out)


async def test_a_body_whose_method_is_not_the_hint_is_refused_as_a_header_mismatch() -> None:
    body, headers = modern_request("prompts/list", {})
    headers["mcp-method"] = "tools/list"  # same params type: the hinted decode would pass
    status, reply = await post(body, headers)
    assert reply["error"]["code"] == -32020, reply
    assert status == 400


async def test_a_body_that_is_not_json_rpc_2_is_an_invalid_request() -> None:
    body, headers = modern_request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    wrong = json.loads(body)
    wrong["jsonrpc"] = "1.0"
    _, reply = await post(json.dumps(wrong).encode(), headers)
    assert reply["error"]["code"] == -32600, reply


async def test_a_body_that_agrees_with_the_hint_is_served() -> None:
    body, headers = modern_request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    status, reply = await post(body, headers)
    assert (status, reply["result"]["content"][0]["text"]) == (200, "x")
