"""Client behaviours the conformance suite scores, each against a scripted server (real HTTP).

- a response stream that ends before its response, after events with ids, is resumed with
  a GET carrying ``Last-Event-ID``, no sooner than the SSE ``retry`` (sse-retry);
- a stream without ids that ends early is an error, and nothing is resumed;
- a ``-32022`` that lists the version just sent is retried once with it (request-metadata);
- with handlers, the handshake era's GET stream is open after ``initialize``, so a server
  request sent there (not on the call's stream) is answered (elicitation-sep1034-...); a
  server that refuses the stream does not hold ``open`` up.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from millimcp import Client, Timeout
from millimcp.errors import ConnectionLost
from millimcp.protocol.types import ElicitParams, ElicitResult

SESSION = "session-1"
RETRY_MS = 200


def _result(request_id: Any, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


@dataclass
class Scripted:
    """A small MCP endpoint whose odd behaviours the tests switch on."""

    stream_ids: bool = True
    refuse_first: bool = False
    refuse_get: bool = False
    posts: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    gets: list[tuple[float, str | None]] = field(default_factory=list)
    pending_call: Any = None
    stream_closed_at: float = 0.0
    get_stream: web.StreamResponse | None = None
    answers: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            return await self.on_get(request)
        if request.method == "DELETE":
            return web.Response()
        body = await request.json()
        method = body.get("method")
        self.posts.append((method or "(response)", dict(request.headers)))
        if method is None:
            await self.answers.put(body)
            return web.Response(status=202)
        if self.refuse_first and len(self.posts) == 1:
            error = {"code": -32022, "message": "Unsupported protocol version"}
            error["data"] = {"supported": ["2026-07-28"], "requested": "2026-07-28"}
            payload = {"jsonrpc": "2.0", "id": body["id"], "error": error}
            return web.json_response(payload, status=400)
        if "id" not in body:
            return web.Response(status=202)
        result: dict[str, Any]
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "1"},
            }
            return web.Response(
                body=_result(body["id"], result),
                content_type="application/json",
                headers={"Mcp-Session-Id": SESSION},
            )
        if method == "server/discover":
            result = {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "ttlMs": 0,
                "cacheScope": "private",
            }
            return web.Response(body=_result(body["id"], result), content_type="application/json")
        if method == "tools/list":
            result = {"tools": [], "ttlMs": 0, "cacheScope": "private", "resultType": "complete"}
            return web.Response(body=_result(body["id"], result), content_type="application/json")
        if body["params"]["name"] == "ask":
            return await self.ask_on_get_stream(body["id"])
        return await self.close_stream_early(request, body["id"])

    async def close_stream_early(self, request: web.Request, call_id: Any) -> web.StreamResponse:
        """The call's SSE stream: a priming event (with an id when ``stream_ids``), then the
        end, without the response."""
        self.pending_call = call_id
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        head = b"id: e1\nretry: %d\n" % RETRY_MS if self.stream_ids else b""
        await response.write(head + b"data: \n\n")
        self.stream_closed_at = time.monotonic()
        return response

    async def on_get(self, request: web.Request) -> web.StreamResponse:
        self.gets.append((time.monotonic(), request.headers.get("Last-Event-ID")))
        if self.refuse_get:
            return web.Response(status=405)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if self.pending_call is not None:  # a resumption: replay the response, then end
            result = {"content": [{"type": "text", "text": "resumed"}]}
            await response.write(b"id: e2\ndata: " + _result(self.pending_call, result) + b"\n\n")
            self.pending_call = None
            return response
        self.get_stream = response
        await response.write(b": open\n\n")  # aiohttp sends the headers with the first bytes
        await self.stop.wait()
        return response

    async def ask_on_get_stream(self, call_id: Any) -> web.Response:
        """Elicit on the GET stream (not the call's), then answer with what came back."""
        if self.get_stream is None:
            result = {"content": [{"type": "text", "text": "no GET stream"}], "isError": True}
            return web.Response(body=_result(call_id, result), content_type="application/json")
        ask = {
            "jsonrpc": "2.0",
            "id": "ask-1",
            "method": "elicitation/create",
            "params": {"message": "name?", "requestedSchema": {"type": "object"}},
        }
        await self.get_stream.write(b"data: " + json.dumps(ask).encode() + b"\n\n")
        answer = await self.answers.get()
        text = json.dumps(answer["result"]["content"])
        result = {"content": [{"type": "text", "text": text}]}
        return web.Response(body=_result(call_id, result), content_type="application/json")


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[Scripted, str]]:
    server = Scripted()
    app = web.Application()
    app.router.add_route("*", "/mcp", server.handle)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield server, f"http://127.0.0.1:{port}/mcp"
    server.stop.set()
    await runner.cleanup()


async def test_a_stream_that_ends_early_is_resumed_after_retry(
    scripted: tuple[Scripted, str],
) -> None:
    server, url = scripted
    async with Client.over_http(url, era="handshake", timeout=10.0) as client:
        result = await client.call_tool("reconnect")
    assert result.text == "resumed"
    assert len(server.gets) == 1
    resumed_at, last_event_id = server.gets[0]
    assert last_event_id == "e1"
    assert resumed_at - server.stream_closed_at >= RETRY_MS / 1000 * 0.9


async def test_a_stream_without_ids_that_ends_early_is_an_error(
    scripted: tuple[Scripted, str],
) -> None:
    server, url = scripted
    server.stream_ids = False
    async with Client.over_http(url, era="handshake", timeout=10.0) as client:
        with pytest.raises(ConnectionLost):
            await client.call_tool("reconnect")
    assert server.gets == []


async def test_a_refused_version_it_lists_is_tried_once_more(
    scripted: tuple[Scripted, str],
) -> None:
    server, url = scripted
    server.refuse_first = True
    async with Client.over_http(url, era="modern", timeout=10.0) as client:
        assert await client.list_tools() == []
        assert client.protocol_version == "2026-07-28"
    methods = [method for method, _ in server.posts]
    assert methods == ["server/discover", "server/discover", "tools/list"]
    assert {h["MCP-Protocol-Version"] for _, h in server.posts} == {"2026-07-28"}


async def test_with_handlers_the_get_stream_is_open_after_initialize(
    scripted: tuple[Scripted, str],
) -> None:
    server, url = scripted

    async def elicit(params: ElicitParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"name": "Ada"})

    async with Client.over_http(url, era="handshake", timeout=10.0, elicitation=elicit) as c:
        assert len(server.gets) == 1  # open before the first call
        result = await c.call_tool("ask")
    assert json.loads(result.text or "") == {"name": "Ada"}


async def test_a_refused_get_stream_does_not_hold_up_open(
    scripted: tuple[Scripted, str],
) -> None:
    server, url = scripted
    server.refuse_get = True

    async def elicit(params: ElicitParams) -> ElicitResult:
        return ElicitResult(action="decline")

    timeout = Timeout(total=60.0, connect=60.0)  # the longest open could wait for the stream
    client = Client.over_http(url, era="handshake", timeout=timeout, elicitation=elicit)
    async with asyncio.timeout(30.0):
        await client.open()
    await client.close()
    assert len(server.gets) == 1


async def test_without_handlers_no_get_stream_is_opened(scripted: tuple[Scripted, str]) -> None:
    server, url = scripted
    async with Client.over_http(url, era="handshake", timeout=10.0) as client:
        result = await client.call_tool("ask")
    assert result.is_error
    assert server.gets == []
