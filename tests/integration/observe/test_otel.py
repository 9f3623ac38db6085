"""OpenTelemetry: a caller's traceparent parents the server span, which parents the
downstream HTTP call a tool makes (SDK in-memory exporter, a real HTTP server on loopback)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from millimcp import HttpConfig, Server, ServerConfig, ToolError
from millimcp.observe import downstream, otel, trace_headers
from tests.servers.inprocess import Caller

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    otel.install(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[reader]))
    yield spans, reader
    otel.uninstall()


@pytest.fixture
async def downstream_server() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """A plain HTTP/1.1 server on loopback that records the headers it receives."""
    seen: list[dict[str, str]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")[1:]
        seen.append({k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines if ln)})
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nprofile")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/profile", seen
    server.close()
    await server.wait_closed()


def traced_server(url: str) -> Server:
    server = Server("traced", config=ServerConfig(opentelemetry=True))

    @server.tool()
    async def fetch_profile(user_id: int) -> str:
        async with httpx.AsyncClient() as client:
            with downstream("GET", url) as headers:
                response = await client.get(url, headers=dict(headers))
        return response.text

    @server.tool()
    async def broken() -> str:
        raise ToolError("no")

    return server


async def test_the_server_span_and_the_downstream_call_join_the_callers_trace(
    exporter: tuple[InMemorySpanExporter, InMemoryMetricReader],
    downstream_server: tuple[str, list[dict[str, str]]],
) -> None:
    spans, reader = exporter
    url, seen = downstream_server
    server = traced_server(url)
    async with Caller(server.asgi()) as caller:
        response = await caller.post(
            "fetch_profile",
            {"user_id": 7},
            meta={"traceparent": TRACEPARENT, "tracestate": "vendor=1"},
        )
    assert response.json()["result"]["content"][0]["text"] == "profile"
    finished = {span.name: span for span in spans.get_finished_spans()}
    assert set(finished) == {"tools/call fetch_profile", "GET"}
    server_span = finished["tools/call fetch_profile"]
    client_span = finished["GET"]
    assert server_span.kind is SpanKind.SERVER
    assert format(server_span.context.trace_id, "032x") == TRACE_ID
    assert server_span.parent is not None
    assert format(server_span.parent.span_id, "016x") == CALLER_SPAN
    assert server_span.parent.is_remote
    assert client_span.kind is SpanKind.CLIENT
    assert client_span.parent is not None
    assert client_span.parent.span_id == server_span.context.span_id
    assert client_span.context.trace_id == server_span.context.trace_id
    # The downstream service received the client span as its parent.
    client_id = format(client_span.context.span_id, "016x")
    assert seen[0]["traceparent"] == f"00-{TRACE_ID}-{client_id}-01"
    assert seen[0]["tracestate"] == "vendor=1"
    attributes = dict(server_span.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "fetch_profile"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["jsonrpc.request.id"] == "1"
    assert "mcp.session.id" not in attributes  # the modern era has no sessions
    assert attributes["mcp.protocol.version"] == "2026-07-28"
    assert server_span.status.status_code is StatusCode.UNSET
    metrics = reader.get_metrics_data()
    assert metrics is not None
    names = {
        metric.name
        for resource in metrics.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert "mcp.server.operation.duration" in names


async def test_a_tool_error_marks_the_span(
    exporter: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, _ = exporter
    server = traced_server("http://127.0.0.1:9/unused")
    async with Caller(server.asgi()) as caller:
        await caller.post("broken", {})
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "tool_error"
    # Without a traceparent the span starts a trace of its own.
    assert span.parent is None


async def test_without_opentelemetry_the_callers_context_is_passed_through() -> None:
    server = Server("plain")
    captured: list[dict[str, Any]] = []

    @server.tool()
    async def call_out() -> str:
        captured.append(dict(trace_headers()))
        return "ok"

    # Any listener turns the records on (here Server-Timing's); OpenTelemetry is not installed.
    async with Caller(server.asgi(http=HttpConfig(server_timing=True))) as caller:
        await caller.post("call_out", {}, meta={"traceparent": TRACEPARENT, "tracestate": "v=2"})
    assert captured == [{"traceparent": TRACEPARENT, "tracestate": "v=2"}]


async def test_a_handshake_era_call_is_traced_with_its_session(
    exporter: tuple[InMemorySpanExporter, InMemoryMetricReader],
    downstream_server: tuple[str, list[dict[str, str]]],
) -> None:
    spans, _ = exporter
    url, _seen = downstream_server
    server = traced_server(url)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=server.asgi()), base_url="http://127.0.0.1"
    ) as client:
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        opened = await client.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}
        )
        session = opened.headers["mcp-session-id"]
        params = {"name": "fetch_profile", "arguments": {"user_id": 7}}
        params["_meta"] = {"traceparent": TRACEPARENT}
        answer = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params},
            headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"},
        )
    assert answer.json()["result"]["content"][0]["text"] == "profile"
    span = {s.name: s for s in spans.get_finished_spans()}["tools/call fetch_profile"]
    assert format(span.context.trace_id, "032x") == TRACE_ID
    attributes = dict(span.attributes or {})
    assert attributes["mcp.session.id"] == session
