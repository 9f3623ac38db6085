"""The client's side of tasks: call_tool(as_task=True), following, answering, waiting."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from millimcp import Context, Server, ServerConfig
from millimcp.client import Task, TaskCancelled
from millimcp.client.tasks import needs_tasks, tool_result, wait_for_task
from millimcp.errors import CallTimeout, InvalidParams, MissingClientCapability
from millimcp.protocol.types import ElicitParams, ElicitResult, TextContent
from millimcp.resilience import Timeout
from millimcp.tasks import TaskConfig
from millimcp.testing import connect

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


def make_server() -> Server:
    server = Server("tasks", config=ServerConfig(tasks=TaskConfig(poll_interval_ms=5)))

    @server.tool(task="optional")
    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return f"slept {seconds:g}"

    @server.tool(task="required")
    async def report(rows: int) -> dict[str, int]:
        await asyncio.sleep(0.02)
        return {"rows": rows}

    @server.tool(task="optional")
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("ok?", SCHEMA, key="ok")
        return f"confirmed {(answer.content or {}).get('ok')}"

    @server.tool(task="optional")
    async def broken() -> str:
        await asyncio.sleep(0.01)
        raise InvalidParams("wrong order", {"order": 1})

    @server.tool()
    async def plain() -> str:
        return "plain"

    return server


async def elicit(params: ElicitParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"ok": True})


async def test_as_task_follows_the_task_to_its_result() -> None:
    server = make_server()
    async with server.running(), connect(server) as client:
        task = await client.call_tool("slow", {"seconds": 0.05}, as_task=True)
        assert isinstance(task, Task)
        assert task.status == "working"
        assert not task.done
        seen = [update.status async for update in task.updates()]
        assert seen[-1] == "completed"
        assert task.status == "completed"
        assert [u.status async for u in task.updates()] == ["completed"]  # ended: just the end
        result = await task.result()
        assert result.text == "slept 0.05"
        assert not result.is_error
        assert task.polls >= 1
        assert "completed" in repr(task)
        plain = await client.call_tool("slow", {"seconds": 0})  # no extension: synchronous
        assert plain.text == "slept 0"


async def test_input_inside_a_task_is_answered_with_the_clients_handlers() -> None:
    server = make_server()
    async with server.running(), connect(server, elicitation=elicit) as client:
        task = await client.call_tool("confirm", as_task=True)
        assert (await task.result()).text == "confirmed True"


async def test_a_required_task_is_waited_for_transparently() -> None:
    server = make_server()
    async with server.running(), connect(server) as client:
        result = await client.call_tool("report", {"rows": 3})
        assert result.structured_content == {"rows": 3}


async def test_waiting_past_the_call_timeout_cancels_the_task() -> None:
    server = make_server()
    async with server.running(), connect(server) as client:
        task = await client.call_tool("slow", {"seconds": 30}, as_task=True)
        with pytest.raises(CallTimeout):
            await wait_for_task(task, Timeout(total=0.05))
        again = await client.task(task.task_id)
        assert again.status == "cancelled"
        with pytest.raises(TaskCancelled):
            await again.result()


async def test_a_failed_task_raises_its_error_and_a_cancel_ends_it() -> None:
    server = make_server()
    async with server.running(), connect(server) as client:
        broken = await client.call_tool("broken", as_task=True)
        with pytest.raises(InvalidParams, match="wrong order") as caught:
            await broken.result()
        assert caught.value.data == {"order": 1}
        task = await client.call_tool("slow", {"seconds": 30}, as_task=True)
        await task.cancel()
        with pytest.raises(TaskCancelled):
            await task.result()


async def test_an_answer_at_once_is_a_finished_task() -> None:
    server = make_server()
    async with server.running(), connect(server) as client:
        task = await client.call_tool("plain", as_task=True)
        assert task.done
        assert (await task.result()).text == "plain"
        await task.cancel()  # nothing to cancel


def test_needs_tasks_reads_the_required_capabilities() -> None:
    def error(data: Any) -> MissingClientCapability:
        return MissingClientCapability("missing", data)

    tasks: dict[str, Any] = {
        "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    }
    assert needs_tasks(error(tasks))
    assert not needs_tasks(error({"requiredCapabilities": {"sampling": {}}}))
    assert not needs_tasks(error(None))


def test_an_inlined_result_without_its_discriminator_reads() -> None:
    result = tool_result({"content": [{"type": "text", "text": "hi"}], "isError": True})
    assert result.is_error
    assert result.content == [TextContent(text="hi")]


async def test_a_handshake_era_session_runs_task_tools_synchronously() -> None:
    server = make_server()
    async with server.running(), connect(server, era="handshake") as client:
        task = await client.call_tool("report", {"rows": 2}, as_task=True)
        assert task.done
        assert (await task.result()).structured_content == {"rows": 2}
        assert (await client.call_tool("slow", {"seconds": 0})).text == "slept 0"
