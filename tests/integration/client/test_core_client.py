"""The client against a real millimcp server, in both eras: every method, MRTR and
server-to-client requests, progress, headers, caching, trace context, versions, sessions."""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx
import pytest

from millimcp import Client
from millimcp.client.era import remembered
from millimcp.errors import InvalidParams, MissingClientCapability
from millimcp.protocol.types import (
    BlobResourceContents,
    CompletionRef,
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    Root,
    TextContent,
    TextResourceContents,
)

TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\Z")


async def test_auto_detects_the_modern_era_and_remembers_it(core_url: str) -> None:
    async with Client.over_http(core_url) as client:
        assert client.era == "modern"
        assert client.protocol_version == "2026-07-28"
        assert client.server_info is not None
        assert client.server_info.name == "client-core-test-server"
        assert client.instructions == "Tools for the client core's tests."
        assert client.server_capabilities.tools is not None
    assert remembered(core_url) == ("modern", "2026-07-28")


async def test_the_era_can_be_forced(core_url: str, era: str) -> None:
    async with Client.over_http(core_url, era=era) as client:  # type: ignore[arg-type]
        assert client.era == era
        if era == "handshake":
            assert client.protocol_version == "2025-11-25"
            assert client.server_info is not None
            assert client.server_info.version == "2.0.0"


async def test_every_method_in_both_eras(core_url: str, era: str) -> None:
    async with Client.over_http(core_url, era=era) as client:  # type: ignore[arg-type]
        names = {tool.name for tool in await client.list_tools()}
        assert {"echo", "bump", "regional", "ask_name"} <= names

        result = await client.call_tool("echo", {"text": "héllo"})
        assert result.content == [TextContent(text="héllo")]
        assert result.text == "héllo"
        assert result.is_error is False

        failed = await client.call_tool("echo", {})
        assert failed.is_error is True  # a tool error is a result, not an exception

        with pytest.raises(InvalidParams):
            await client.call_tool("no_such_tool", {})

        resources = await client.list_resources()
        assert {r.uri for r in resources} == {"test://static-text", "test://blob"}
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates] == ["orders://{order_id}"]
        text = await client.read_resource("test://static-text")
        assert text.contents == [
            TextResourceContents(
                uri="test://static-text", text="static text", mime_type="text/plain"
            )
        ]
        blob = await client.read_resource("test://blob")
        assert isinstance(blob.contents[0], BlobResourceContents)
        assert blob.contents[0].blob == "AAEC"
        order = await client.read_resource("orders://7")
        assert isinstance(order.contents[0], TextResourceContents)
        assert '"order_id":"7"' in order.contents[0].text.replace(" ", "")

        prompts = await client.list_prompts()
        assert [p.name for p in prompts] == ["summarize"]
        prompt = await client.get_prompt("summarize", {"topic": "eras"})
        assert prompt.messages[0].content == TextContent(text="Summarize eras in a short way.")

        completion = await client.complete(
            CompletionRef(type="ref/prompt", name="summarize"), ("style", "l")
        )
        assert completion.values == ["long", "limerick"]


async def test_mrtr_elicitation_round_trip_modern(core_url: str) -> None:
    asked: list[ElicitParams] = []

    async def elicit(params: ElicitParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"name": "Ada"})

    async with Client.over_http(core_url, era="modern", elicitation=elicit) as client:
        result = await client.call_tool("ask_name")
    assert result.text == "hello Ada (accept)"
    assert [p.message for p in asked] == ["Your name?"]


async def test_server_to_client_elicitation_handshake(core_url: str) -> None:
    async def elicit(params: ElicitParams) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Grace"}}

    async with Client.over_http(core_url, era="handshake", elicitation=elicit) as client:
        result = await client.call_tool("ask_name")
    assert result.text == "hello Grace (accept)"


async def test_several_inputs_over_rounds_with_roots_and_sampling(core_url: str, era: str) -> None:
    async def elicit(params: ElicitParams) -> ElicitResult:
        return ElicitResult(action="decline")

    async def sample(params: CreateMessageParams) -> CreateMessageResult:
        question = params.messages[0].content["text"]
        return CreateMessageResult(
            role="assistant", content={"type": "text", "text": question[::-1]}, model="rev"
        )

    async with Client.over_http(
        core_url,
        era=era,  # type: ignore[arg-type]
        elicitation=elicit,
        sampling=sample,
        roots=["file:///a", Root(uri="file:///b", name="b")],
    ) as client:
        assert (await client.call_tool("ask_twice")).text == "decline ['file:///a', 'file:///b']"
        assert (await client.call_tool("think", {"question": "abc"})).text == "rev: cba"


async def test_a_missing_handler_is_the_missing_capability_error(core_url: str, era: str) -> None:
    async with Client.over_http(core_url, era=era) as client:  # type: ignore[arg-type]
        with pytest.raises(MissingClientCapability):
            await client.call_tool("ask_name")


async def test_progress_callback(core_url: str, era: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client.over_http(core_url, era=era) as client:  # type: ignore[arg-type]
        result = await client.call_tool("progress", {"steps": 3}, on_progress=on_progress)
        sync_seen: list[float] = []
        await client.call_tool(
            "progress", {"steps": 2}, on_progress=lambda p, t, m: sync_seen.append(p)
        )
    assert result.text == "3 steps"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert sync_seen == [1, 2]


async def test_x_mcp_header_is_mirrored(core_url: str, era: str) -> None:
    async with Client.over_http(core_url, era=era) as client:  # type: ignore[arg-type]
        await client.list_tools()
        # The server checks Mcp-Param-Region and Mcp-Param-Tenant against the body (-32020).
        result = await client.call_tool(
            "regional", {"region": " eu west ", "tenant": 42, "query": "q"}
        )
    assert result.text == " eu west /42: q"


async def test_a_tool_with_an_invalid_header_declaration_is_dropped(
    core_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="millimcp.client"):
        async with Client.over_http(core_url) as client:
            names = [tool.name for tool in await client.list_tools()]
    assert "bad_header" not in names
    assert "echo" in names
    assert any("bad_header" in record.getMessage() for record in caplog.records)


async def test_list_results_are_cached_by_ttl_and_invalidated(core_url: str) -> None:
    async with Client.over_http(core_url) as client:
        first = await client.list_tools()
        calls = client.stats.calls
        assert await client.list_tools() is first  # ttlMs 60 s: no request
        assert client.stats.calls == calls
        client._lists.on_notification("notifications/tools/list_changed")
        assert await client.list_tools() is not first
        assert client.stats.calls == calls + 1


async def test_handshake_era_lists_are_not_cached(core_url: str) -> None:
    async with Client.over_http(core_url, era="handshake") as client:
        first = await client.list_tools()
        second = await client.list_tools()
    assert first == second
    assert first is not second


async def test_traceparent_on_every_request(core_url: str, era: str) -> None:
    async with Client.over_http(core_url, era=era) as client:  # type: ignore[arg-type]
        one = (await client.call_tool("trace")).text
        two = (await client.call_tool("trace")).text
    assert TRACEPARENT.match(one)
    assert TRACEPARENT.match(two)
    assert one != two  # a fresh trace per call when no span is active


async def test_traceparent_from_the_current_opentelemetry_span(core_url: str) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("client-test")
    async with Client.over_http(core_url) as client:
        with tracer.start_as_current_span("agent-step") as span:
            sent = (await client.call_tool("trace")).text
    context = span.get_span_context()
    flags = int(context.trace_flags)
    assert sent == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"


async def test_unsupported_version_is_renegotiated_once(core_url: str) -> None:
    async with Client.over_http(core_url) as client:
        client._core.use_modern("1999-01-01")  # as if the client had started too new
        result = await client.call_tool("echo", {"text": "again"})
        assert result.text == "again"
        assert client.protocol_version == "2026-07-28"


async def test_a_lost_session_is_initialized_again(core_url: str) -> None:
    async with Client.over_http(core_url, era="handshake") as client:
        link: Any = client._core.link
        old = link.session_id
        assert old is not None
        async with httpx.AsyncClient() as http:
            response = await http.delete(
                core_url,
                headers={"Mcp-Session-Id": old, "MCP-Protocol-Version": "2025-11-25"},
            )
            assert response.status_code == 200
        result = await client.call_tool("echo", {"text": "after"})
        assert result.text == "after"
        assert link.session_id not in (None, old)


async def test_header_mismatch_reads_the_tools_again_and_resends(core_url: str) -> None:
    async with Client.over_http(core_url) as client:
        # No tools/list yet: the client does not know regional's x-mcp-header declarations,
        # the server answers -32020, the client lists the tools and sends again.
        result = await client.call_tool("regional", {"region": "eu", "tenant": 1, "query": "q"})
        assert result.text == "eu/1: q"
        assert client.stats.calls == 4  # discover, the refused call, tools/list, the call
