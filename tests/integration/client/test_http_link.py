"""The Streamable HTTP link: SSE parsing, headers on the wire, compression, connection reuse,
and how HTTP failures map onto the error tree."""

from __future__ import annotations

import asyncio
import json

import pytest

from millimcp import Client, Limits, Retry
from millimcp.client.http_link import retry_after_seconds
from millimcp.codec import SseParser
from millimcp.errors import FrameTooLarge, NotSent, RequestRejected
from tests.conftest import free_port
from tests.integration.client.conftest import Era
from tests.integration.interop.peers import tapped_requests, tcp_tap

pytestmark = pytest.mark.usefixtures("http_kind")


def test_sse_events_split_anywhere() -> None:
    stream = (
        b": keep-alive\r\n\r\nid: p1-0\r\nretry: 1000\r\ndata: \r\n\r\n"
        b'event: message\nid: p1-1\ndata: {"a":\ndata: 1}\n\n'
        b'data: {"b":2}\r\n\r\n'
    )
    for size in (1, 2, 7, len(stream)):
        parser = SseParser()
        events: list[bytes] = []
        for start in range(0, len(stream), size):
            events += parser.feed(stream[start : start + size])
        assert events == [b'{"a":\n1}', b'{"b":2}'], size
        assert parser.last_id == "p1-1"
        assert parser.retry_ms == 1000


def test_sse_event_size_is_capped() -> None:
    parser = SseParser(limit=64)
    with pytest.raises(FrameTooLarge):
        parser.feed(b"data: " + b"x" * 100)
    parser = SseParser(limit=64)
    for _ in range(5):
        parser.feed(b"data: " + b"x" * 10 + b"\n")  # one event growing line by line
    with pytest.raises(FrameTooLarge):
        parser.feed(b"data: " + b"x" * 10 + b"\n")


def test_retry_after_values() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


async def test_modern_requests_carry_every_header_and_meta(core_url: str) -> None:
    with tcp_tap(core_url) as tap:
        async with Client.over_http(tap.url(), client_info=("tester", "9")) as client:
            await client.list_tools()
            await client.call_tool("regional", {"region": "héré", "tenant": 7, "query": "q"})
            await client.read_resource("test://static-text")
    requests = [r for r in tapped_requests(tap) if r.verb == "POST"]
    call = next(r for r in requests if r.message.get("method") == "tools/call")
    headers = call.headers
    assert headers["mcp-protocol-version"] == "2026-07-28"
    assert headers["mcp-method"] == "tools/call"
    assert headers["mcp-name"] == "regional"
    assert headers["mcp-param-region"] == "=?base64?aMOpcsOp?="
    assert headers["mcp-param-tenant"] == "7"
    assert headers["accept"] == (  # the tensor extension's framing too: docs/tensors.md
        "application/json, text/event-stream, application/vnd.millimcp.tensor"
    )
    assert "gzip" in headers["accept-encoding"]
    meta = call.message["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientInfo"] == {"name": "tester", "version": "9"}
    # the tensor extension is declared by default when numpy is installed (docs/tensors.md)
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {
        "extensions": {"dev.millimcp/tensor": {}}
    }
    assert meta["traceparent"].startswith("00-")
    read = next(r for r in requests if r.message.get("method") == "resources/read")
    assert read.headers["mcp-name"] == "test://static-text"
    ids = [r.message["id"] for r in requests]
    assert len(set(ids)) == len(ids)


async def test_handshake_session_headers_and_delete_on_close(core_url: str) -> None:
    with tcp_tap(core_url) as tap:
        async with Client.over_http(tap.url(), era="handshake") as client:
            await client.call_tool("echo", {"text": "x"})
    requests = tapped_requests(tap)  # connection by connection
    verbs = [(r.verb, r.message.get("method")) for r in requests]
    assert verbs[0] == ("POST", "initialize")
    assert ("POST", "notifications/initialized") in verbs
    assert ("DELETE", None) in verbs
    call = next(r for r in requests if r.message.get("method") == "tools/call")
    assert call.headers["mcp-protocol-version"] == "2025-11-25"
    assert len(call.headers["mcp-session-id"]) == 43
    assert "io.modelcontextprotocol/protocolVersion" not in call.message["params"]["_meta"]


@pytest.mark.parametrize("coding", ["zstd", "gzip"])
async def test_compressed_replies_are_decoded(core_url: str, coding: str) -> None:
    with tcp_tap(core_url) as tap:
        async with Client.over_http(tap.url(), headers={"Accept-Encoding": coding}) as client:
            result = await client.call_tool("big", {"size": 50_000})
    assert result.text == "millimcp " * (50_000 // 9)
    received = b"".join(tap.received).lower()
    assert f"content-encoding: {coding}".encode() in received


async def test_connections_are_reused(core_url: str) -> None:
    async with Client.over_http(core_url) as client:
        for i in range(10):
            await client.call_tool("echo", {"text": str(i)})
        stats = client.stats
    assert stats.connections_opened == 1
    assert stats.connections_reused >= 10


async def test_no_keepalive_opens_a_connection_per_call(core_url: str) -> None:
    limits = Limits(max_keepalive=0)
    async with Client.over_http(core_url, limits=limits) as client:
        opened_after_open = client.stats.connections_opened
        for i in range(5):
            await client.call_tool("echo", {"text": str(i)})
        stats = client.stats
    assert stats.connections_opened - opened_after_open == 5


async def test_a_refusal_without_json_rpc_is_request_rejected(core_url: str) -> None:
    wrong_path = core_url.rsplit("/", 1)[0] + "/nowhere"
    with pytest.raises(RequestRejected) as caught:
        async with Client.over_http(wrong_path):
            pass
    assert caught.value.status == 404


async def test_nothing_listening_is_not_sent() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(NotSent):
        async with Client.over_http(url, retry=Retry(attempts=0)):
            pass


async def test_extra_headers_are_sent(core_url: str) -> None:
    with tcp_tap(core_url) as tap:
        async with Client.over_http(tap.url(), headers={"Authorization": "Bearer t"}) as client:
            await client.call_tool("echo", {"text": "x"})
    assert all(r.headers.get("authorization") == "Bearer t" for r in tapped_requests(tap))
    assert json.loads(b"{}") == {}


async def test_streamed_replies_give_their_connection_back(core_url: str, era: Era) -> None:
    async with Client.over_http(core_url, era=era) as client:
        for _ in range(5):
            result = await client.call_tool("progress", {"steps": 2}, on_progress=print)
            assert result.text == "2 steps"
            await asyncio.sleep(0.01)  # the rest of the stream is read in the background
        opened = client.stats.connections_opened
    assert opened == 1
