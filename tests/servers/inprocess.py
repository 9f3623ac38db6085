"""Calling an MCP app in-process (httpx over ASGI): the real app, no sockets."""

from __future__ import annotations

import json
from typing import Any

import httpx

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def request(
    tool: str, arguments: dict[str, Any] | None = None, meta: dict[str, Any] | None = None
) -> tuple[bytes, dict[str, str]]:
    params = {"name": tool, "arguments": arguments or {}, "_meta": {**META, **(meta or {})}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    return body.encode(), headers


class Caller:
    """An httpx client bound to an ASGI app (or a URL) that calls tools."""

    def __init__(self, app: Any = None, url: str = "http://127.0.0.1:8000/mcp") -> None:
        transport = httpx.ASGITransport(app=app) if app is not None else None
        self.client = httpx.AsyncClient(transport=transport, timeout=30)
        self.url = url

    async def __aenter__(self) -> Caller:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()

    async def post(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> httpx.Response:
        body, base = request(tool, arguments, meta)
        return await self.client.post(self.url, content=body, headers={**base, **(headers or {})})

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        response = await self.post(tool, arguments, headers)
        reply = response.json()
        assert "result" in reply, reply
        return dict(reply["result"])

    async def text(self, tool: str, arguments: dict[str, Any] | None = None, **kw: Any) -> str:
        return str((await self.call(tool, arguments, **kw))["content"][0]["text"])
