"""Calling an MCP app in-process (httpx over ASGI): the real app, no sockets."""

from __future__ import annotations

from typing import Any

import httpx

from millimcp.testing import modern_request


def request(
    tool: str, arguments: dict[str, Any] | None = None, meta: dict[str, Any] | None = None
) -> tuple[bytes, dict[str, str]]:
    """A modern ``tools/call`` of ``tool`` (``meta``: ``_meta`` entries besides the version
    and the empty client capabilities)."""
    params = {"name": tool, "arguments": arguments or {}, "_meta": meta or {}}
    return modern_request("tools/call", params)


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
