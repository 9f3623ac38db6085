"""The client's calls in both eras, in memory: every method, errors and their codes, MRTR
and server-to-client requests, progress, server log messages, x-mcp-header, trace context."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from millimcp import Client, Context, Server
from millimcp.client.pipeline import MAX_ROUNDS
from millimcp.errors import ClientError, InvalidParams, MethodNotFound, MissingClientCapability
from millimcp.protocol.methods import reply_decoder
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
from millimcp.testing import connect
from tests.unit.client.conftest import Era

TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\Z")
_PING: Any = reply_decoder("ping")


async def test_every_method_in_both_eras(core_server: Server, era: Era) -> None:
    async with connect(core_server, era=era) as client:
        await every_method(client)


async def every_method(client: Client) -> None:
    """Every method of the client against tests/servers/client_core_server.py (shared with
    the test of the same over a socket, tests/integration/client)."""
    names = {tool.name for tool in await client.list_tools()}
    assert {"echo", "bump", "regional", "ask_name"} <= names

    result = await client.call_tool("echo", {"text": "héllo"})
    assert result.content == [TextContent(text="héllo")]
    assert result.text == "héllo"
    assert result.is_error is False

    failed = await client.call_tool("echo", {})
    assert failed.is_error is True  # a tool error is a result, not an exception

    resources = await client.list_resources()
    assert {r.uri for r in resources} == {"test://static-text", "test://blob"}
    templates = await client.list_resource_templates()
    assert [t.uri_template for t in templates] == ["orders://{order_id}"]
    text = await client.read_resource("test://static-text")
    assert text.contents == [
        TextResourceContents(uri="test://static-text", text="static text", mime_type="text/plain")
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


async def test_errors_come_with_their_codes(core_server: Server, era: Era) -> None:
    async with connect(core_server, era=era) as client:
        with pytest.raises(InvalidParams) as unknown_tool:
            await client.call_tool("no_such_tool", {})
        assert unknown_tool.value.code == -32602
        with pytest.raises(InvalidParams) as unknown_prompt:
            await client.get_prompt("no_such_prompt")
        assert unknown_prompt.value.code == -32602
        with pytest.raises(MethodNotFound) as unknown_method:
            await client._core.pipeline.call("no/such/method", {}, _PING)
        assert unknown_method.value.code == -32601
        # Over HTTP the status comes with the error (the retry policy reads both).
        assert unknown_tool.value.http_status == 400
        assert unknown_method.value.http_status == 404
        assert (await client.call_tool("echo", {"text": "still"})).text == "still"


async def test_mrtr_elicitation_round_trip_modern(core_server: Server) -> None:
    asked: list[ElicitParams] = []

    async def elicit(params: ElicitParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"name": "Ada"})

    async with connect(core_server, era="modern", elicitation=elicit) as client:
        result = await client.call_tool("ask_name")
    assert result.text == "hello Ada (accept)"
    assert [p.message for p in asked] == ["Your name?"]


async def test_server_to_client_elicitation_handshake(core_server: Server) -> None:
    async def elicit(params: ElicitParams) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Grace"}}

    async with connect(core_server, era="handshake", elicitation=elicit) as client:
        result = await client.call_tool("ask_name")
    assert result.text == "hello Grace (accept)"


async def test_several_inputs_over_rounds_with_roots_and_sampling(
    core_server: Server, era: Era
) -> None:
    async def elicit(params: ElicitParams) -> ElicitResult:
        return ElicitResult(action="decline")

    async def sample(params: CreateMessageParams) -> CreateMessageResult:
        question = params.messages[0].content["text"]
        return CreateMessageResult(
            role="assistant", content={"type": "text", "text": question[::-1]}, model="rev"
        )

    async with connect(
        core_server,
        era=era,
        elicitation=elicit,
        sampling=sample,
        roots=["file:///a", Root(uri="file:///b", name="b")],
    ) as client:
        assert (await client.call_tool("ask_twice")).text == "decline ['file:///a', 'file:///b']"
        assert (await client.call_tool("think", {"question": "abc"})).text == "rev: cba"


async def test_a_missing_handler_is_the_missing_capability_error(
    core_server: Server, era: Era
) -> None:
    async with connect(core_server, era=era) as client:
        with pytest.raises(MissingClientCapability):
            await client.call_tool("ask_name")


async def test_a_server_that_never_stops_asking_is_given_up_on() -> None:
    server = Server("asks-forever")
    rounds: list[int] = []

    @server.tool()
    async def forever(ctx: Context) -> str:
        rounds.append(len(ctx.answers))
        await ctx.elicit("again?", {"type": "object", "properties": {}}, key=f"k{len(rounds)}")
        return "never"

    async def elicit(params: ElicitParams) -> ElicitResult:
        return ElicitResult(action="accept", content={})

    async with connect(server, era="modern", elicitation=elicit) as client:
        with pytest.raises(ClientError, match=f"asked for input {MAX_ROUNDS} times"):
            await client.call_tool("forever")
    assert len(rounds) == MAX_ROUNDS


async def test_progress_callback(core_server: Server, era: Era) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect(core_server, era=era) as client:
        result = await client.call_tool("progress", {"steps": 3}, on_progress=on_progress)
        sync_seen: list[float] = []
        await client.call_tool(
            "progress", {"steps": 2}, on_progress=lambda p, t, m: sync_seen.append(p)
        )
    assert result.text == "3 steps"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert sync_seen == [1, 2]


async def test_server_log_messages_go_to_the_client_server_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server("chatty")

    @server.tool()
    async def chat(ctx: Context) -> str:
        await ctx.log("warning", "disk almost full", logger="store")
        await ctx.debug("not asked for")  # below the session's level: never sent
        return "said"

    with caplog.at_level(logging.DEBUG, logger="millimcp.client.server"):
        async with connect(server, era="handshake") as client:
            assert (await client.call_tool("chat")).text == "said"
    records = [r for r in caplog.records if r.name == "millimcp.client.server"]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.WARNING, "[store] disk almost full")
    ]


@pytest.mark.parametrize("era", ["modern", "handshake"])
async def test_a_log_level_given_to_the_client_is_asked_for(
    caplog: pytest.LogCaptureFixture, era: Era
) -> None:
    server = Server("chatty")

    @server.tool()
    async def chat(ctx: Context) -> str:
        await ctx.debug("details")
        await ctx.info("news")
        return "said"

    with caplog.at_level(logging.DEBUG, logger="millimcp.client.server"):
        async with connect(server, era=era, log_level="debug") as client:
            assert (await client.call_tool("chat")).text == "said"
    records = [r.getMessage() for r in caplog.records if r.name == "millimcp.client.server"]
    assert records == ["details", "news"]


async def test_x_mcp_header_is_mirrored(core_server: Server, era: Era) -> None:
    async with connect(core_server, era=era) as client:
        await client.list_tools()
        # The server checks Mcp-Param-Region and Mcp-Param-Tenant against the body (-32020).
        result = await client.call_tool(
            "regional", {"region": " eu west ", "tenant": 42, "query": "q"}
        )
    assert result.text == " eu west /42: q"


async def test_header_mismatch_reads_the_tools_again_and_resends(core_server: Server) -> None:
    async with connect(core_server) as client:
        # No tools/list yet: the client does not know regional's x-mcp-header declarations,
        # the server answers -32020, the client lists the tools and sends again.
        result = await client.call_tool("regional", {"region": "eu", "tenant": 1, "query": "q"})
        assert result.text == "eu/1: q"
        assert client.stats.calls == 4  # discover, the refused call, tools/list, the call


async def test_traceparent_on_every_request(core_server: Server, era: Era) -> None:
    async with connect(core_server, era=era) as client:
        one = (await client.call_tool("trace")).text
        two = (await client.call_tool("trace")).text
    assert TRACEPARENT.match(one)
    assert TRACEPARENT.match(two)
    assert one != two  # a fresh trace per call when no span is active


async def test_traceparent_from_the_current_opentelemetry_span(core_server: Server) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("client-test")
    async with connect(core_server) as client:
        with tracer.start_as_current_span("agent-step") as span:
            sent = (await client.call_tool("trace")).text
    context = span.get_span_context()
    flags = int(context.trace_flags)
    assert sent == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"
