"""Tools as tasks on the server, seen on the wire (the ASGI app in-process)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest

from millimcp import Context, Server, ServerConfig, ToolError
from millimcp.errors import ConfigurationError, InternalError, InvalidParams
from millimcp.protocol.types import (
    TASKS_EXTENSION,
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    ListenParams,
    RequestMeta,
    SubscriptionFilter,
    TextContent,
)
from millimcp.session import Context as SessionContext
from millimcp.tasks import TaskConfig, TaskManager
from millimcp.testing import modern_request

WITH_TASKS: dict[str, Any] = {
    "io.modelcontextprotocol/clientCapabilities": {
        "elicitation": {},
        "extensions": {TASKS_EXTENSION: {}},
    }
}
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
stopped: list[str] = []
started: list[float] = []


def make_server(**config: Any) -> Server:
    server = Server("tasks", config=ServerConfig(tasks=TaskConfig(poll_interval_ms=10, **config)))

    @server.tool(task="optional")
    async def slow(seconds: float) -> str:
        started.append(seconds)
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            stopped.append("slow")
            raise
        return f"slept {seconds:g}"

    @server.tool(task="required")
    async def required() -> str:
        return "done"

    @server.tool(task="optional")
    async def tool_error() -> str:
        raise ToolError("bad input")

    @server.tool(task="optional")
    async def protocol_error() -> str:
        raise InvalidParams("no such order", {"order": 7})

    @server.tool(task="optional")
    def crash() -> str:
        raise InternalError("a bug")

    @server.tool(task="optional")
    async def two_questions(ctx: Context) -> str:
        answers = await ctx.request_input(
            {
                "a": ElicitRequest(params=ElicitParams(message="a?", requested_schema=SCHEMA)),
                "b": ElicitRequest(params=ElicitParams(message="b?", requested_schema=SCHEMA)),
            }
        )
        return " ".join(sorted(bytes(raw).decode() for raw in answers.values()))

    @server.tool(
        task="optional", ask_first={"name": ElicitRequest(params=ElicitParams(message="who?"))}
    )
    async def ask_first(ctx: Context) -> str:
        answer = await ctx.elicit("who?", SCHEMA, key="name")
        return f"hello {(answer.content or {}).get('name')}"

    @server.tool()
    async def plain() -> str:
        return "plain"

    return server


class Wire:
    """Raw requests to a server's ASGI app."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def send(self, method: str, params: dict[str, Any], tasks: bool = True) -> Any:
        params = dict(params)
        if tasks:
            params["_meta"] = {**WITH_TASKS, **params.get("_meta", {})}
        body, headers = modern_request(method, params)
        return (await self.client.post("/mcp", content=body, headers=headers)).json()

    async def result(self, method: str, params: dict[str, Any], tasks: bool = True) -> Any:
        reply = await self.send(method, params, tasks)
        assert "result" in reply, reply
        return reply["result"]

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> Any:
        return await self.result("tools/call", {"name": tool, "arguments": arguments or {}})

    async def get(self, task_id: str) -> Any:
        return await self.result("tasks/get", {"taskId": task_id})

    async def until(self, task_id: str, *statuses: str) -> Any:
        for _ in range(500):
            task = await self.get(task_id)
            if task["status"] in statuses:
                return task
            await asyncio.sleep(0.01)
        raise AssertionError(f"task {task_id} never became {statuses}: {task}")


@contextlib.asynccontextmanager
async def served(server: Server) -> AsyncIterator[Wire]:
    transport = httpx.ASGITransport(app=server.asgi())
    client = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
    async with server.running(), client:
        yield Wire(client)


@pytest.fixture
async def wire() -> AsyncIterator[Wire]:
    async with served(make_server()) as wire:
        yield wire


async def test_a_task_tool_becomes_a_task_only_for_a_client_that_negotiated_it(
    wire: Wire,
) -> None:
    sync = await wire.result("tools/call", {"name": "slow", "arguments": {"seconds": 0}}, False)
    assert sync["resultType"] == "complete"
    assert sync["content"][0]["text"] == "slept 0"
    created = await wire.call("slow", {"seconds": 0})
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert created["ttlMs"] == 3_600_000
    assert created["pollIntervalMs"] == 10
    done = await wire.until(created["taskId"], "completed")
    assert done["resultType"] == "complete"
    assert done["result"]["content"][0]["text"] == "slept 0"
    assert "_meta" not in done["result"]
    assert (await wire.call("plain"))["resultType"] == "complete"


async def test_the_extension_is_advertised_and_gates_the_methods(wire: Wire) -> None:
    discover = await wire.result("server/discover", {})
    assert TASKS_EXTENSION in discover["capabilities"]["extensions"]
    for method, params in (
        ("tasks/get", {"taskId": "x"}),
        ("tasks/update", {"taskId": "x", "inputResponses": {}}),
        ("tasks/cancel", {"taskId": "x"}),
        ("tools/call", {"name": "required", "arguments": {}}),
    ):
        reply = await wire.send(method, params, tasks=False)
        assert reply["error"]["code"] == -32021, (method, reply)
    data = reply["error"]["data"]
    assert data == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
    unknown: dict[str, Any] = {"taskId": "unknown", "inputResponses": {}}
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        reply = await wire.send(method, unknown)
        assert reply["error"]["code"] == -32602, (method, reply)
    assert (await wire.send("tasks/list", {}))["error"]["code"] == -32601


async def test_how_a_task_ends(wire: Wire) -> None:
    tool_error = await wire.until((await wire.call("tool_error"))["taskId"], "completed")
    assert tool_error["result"]["isError"] is True
    failed = await wire.until((await wire.call("protocol_error"))["taskId"], "failed")
    assert failed["error"] == {"code": -32602, "message": "no such order", "data": {"order": 7}}
    assert "result" not in failed
    crashed = await wire.until((await wire.call("crash"))["taskId"], "failed")
    assert crashed["error"]["code"] == -32603


async def test_cancel_stops_the_handler_and_is_idempotent(wire: Wire) -> None:
    stopped.clear()
    started.clear()
    task_id = (await wire.call("slow", {"seconds": 60}))["taskId"]
    for _ in range(100):
        if started:
            break
        await asyncio.sleep(0.01)
    ack = await wire.result("tasks/cancel", {"taskId": task_id})
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}
    assert (await wire.until(task_id, "cancelled"))["status"] == "cancelled"
    for _ in range(100):
        if stopped:
            break
        await asyncio.sleep(0.01)
    assert stopped == ["slow"]
    again = await wire.result("tasks/cancel", {"taskId": task_id})
    assert again["resultType"] == "complete"
    assert (await wire.get(task_id))["status"] == "cancelled"


async def test_input_inside_a_task_partial_answers_and_unknown_keys(wire: Wire) -> None:
    task_id = (await wire.call("two_questions"))["taskId"]
    parked = await wire.until(task_id, "input_required")
    assert set(parked["inputRequests"]) == {"a", "b"}
    assert parked["inputRequests"]["a"]["method"] == "elicitation/create"
    answer = {"action": "accept", "content": {"ok": True}}
    ack = await wire.result(
        "tasks/update", {"taskId": task_id, "inputResponses": {"a": answer, "zzz": answer}}
    )
    assert ack["resultType"] == "complete"
    assert "status" not in ack
    partly = await wire.get(task_id)
    assert partly["status"] == "input_required"
    assert list(partly["inputRequests"]) == ["b"]
    await wire.result("tasks/update", {"taskId": task_id, "inputResponses": {"b": answer}})
    done = await wire.until(task_id, "completed")
    text = '{"action":"accept","content":{"ok":true}}'
    assert done["result"]["content"][0]["text"] == f"{text} {text}"
    # answered keys are not outstanding any more: answering again is ignored
    await wire.result("tasks/update", {"taskId": task_id, "inputResponses": {"a": answer}})
    assert (await wire.get(task_id))["status"] == "completed"


async def test_ask_first_is_mrtr_on_the_call_then_a_task(wire: Wire) -> None:
    first = await wire.call("ask_first")
    assert first["resultType"] == "input_required"
    assert "taskId" not in first
    assert list(first["inputRequests"]) == ["name"]
    second = await wire.result(
        "tools/call",
        {
            "name": "ask_first",
            "arguments": {},
            "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
            "requestState": first["requestState"],
        },
    )
    assert second["resultType"] == "task"
    assert "requestState" not in second
    done = await wire.until(second["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "hello Ada"


async def test_a_task_past_its_deadline_completes_with_a_tool_error() -> None:
    async with served(make_server(timeout_s=0.05)) as wire:
        task_id = (await wire.call("slow", {"seconds": 30}))["taskId"]
        done = await wire.until(task_id, "completed")
    assert done["result"]["isError"] is True
    assert "deadline" in done["result"]["content"][0]["text"]


async def test_status_notifications_reach_a_listener_that_named_the_task() -> None:
    server = make_server()
    sent: list[Any] = []

    async def emit(data: bytes) -> None:
        sent.append(msgspec.json.decode(data))

    async with served(server) as wire:
        task_id = (await wire.call("slow", {"seconds": 0.2}))["taskId"]
        meta = msgspec.convert(
            {**WITH_TASKS, "io.modelcontextprotocol/protocolVersion": "2026-07-28"},
            RequestMeta,
        )
        ctx = SessionContext(9, "subscriptions/listen", meta, emit)
        wanted = ListenParams(notifications=SubscriptionFilter(task_ids=[task_id, "other"]))
        listening = asyncio.ensure_future(server.handlers()["subscriptions/listen"](wanted, ctx))
        for _ in range(500):
            if any(m.get("method") == "notifications/tasks" for m in sent):
                break
            await asyncio.sleep(0.01)
        server._notifier.close()
        await asyncio.wait_for(listening, 5)
        without = await wire.send(
            "subscriptions/listen", {"notifications": {"taskIds": ["x"]}}, False
        )
    ack, status = sent[0], sent[-1]
    assert ack["params"]["notifications"]["taskIds"] == [task_id]
    assert status["method"] == "notifications/tasks"
    assert status["params"]["taskId"] == task_id
    assert status["params"]["status"] == "completed"
    assert status["params"]["result"]["content"][0]["text"] == "slept 0.2"
    assert status["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": 9}
    assert without["error"]["code"] == -32021


class Principal(SessionContext):
    principal: Any = None


async def test_a_task_belongs_to_the_principal_that_created_it() -> None:
    manager = TaskManager(TaskConfig())
    alice = Principal(1, "tools/call", None, principal="alice")
    bob = Principal(2, "tasks/get", None, principal="bob")

    async def work(ctx: SessionContext) -> Any:
        return CallToolResult(content=[TextContent(text="mine")])

    created = await manager.start(work, alice)
    again = Principal(3, "tasks/get", None, principal="alice")
    assert (await manager.get(created.task_id, again)).task_id == created.task_id
    for method in (manager.get, manager.cancel):
        with pytest.raises(InvalidParams):
            await method(created.task_id, bob)
    with pytest.raises(InvalidParams):
        await manager.update(created.task_id, {}, bob)
    assert not await manager.owns(created.task_id, bob)
    await manager.close()


def test_task_options_are_checked() -> None:
    server = Server("x")
    with pytest.raises(ConfigurationError):
        server.tool(task="always")  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError):
        server.tool(ask_first={"k": ElicitRequest(params=ElicitParams(message="?"))})


def test_the_server_default_applies_to_tools_without_their_own() -> None:
    server = Server("x", config=ServerConfig(tasks=TaskConfig(default="optional")))

    @server.tool
    async def a() -> str:
        return "a"

    @server.tool(task="never")
    async def b() -> str:
        return "b"

    assert server._tools["a"].task == "optional"
    assert server._tools["b"].task is None
    assert TASKS_EXTENSION in (server.capabilities().extensions or {})
    assert TASKS_EXTENSION not in (Server("y").capabilities().extensions or {})
