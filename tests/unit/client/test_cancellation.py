"""Deadlines and cancellation, in memory: a call that runs out of time, or whose caller
gives up, is cancelled on the server (the app sees ``http.disconnect``); the call gate."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from millimcp import Client, Limits, Server
from millimcp.errors import CallTimeout, QueueFull
from millimcp.testing import connect
from tests.unit.client.conftest import Era


async def _cancelled_on_server(client: Client, tag: str) -> bool:
    """Whether the server's handler saw the cancellation of the call tagged ``tag``
    (polled: the server notices a disconnect within its sweep period)."""
    for _ in range(200):
        result = await client.call_tool("cancelled")
        if tag in (result.structured_content or {}).get("result", []):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_deadline_raises_call_timeout_and_cancels_on_the_server(
    core_server: Server, era: Era
) -> None:
    tag = f"memory-deadline-{era}"
    async with connect(core_server, era=era) as client:
        with pytest.raises(CallTimeout):
            await client.call_tool("slow", {"seconds": 60, "tag": tag}, timeout=0.2)
        assert client.stats.timeouts == 1
        assert await _cancelled_on_server(client, tag)


async def test_a_caller_that_gives_up_cancels_on_the_server(core_server: Server, era: Era) -> None:
    tag = f"memory-abandoned-{era}"
    async with connect(core_server, era=era) as client:
        call = asyncio.ensure_future(client.call_tool("slow", {"seconds": 60, "tag": tag}))
        for _ in range(200):  # until the server runs it
            if (await client.call_tool("seen", {"tag": tag})).structured_content == {"result": 1}:
                break
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await _cancelled_on_server(client, tag)
        assert client.stats.timeouts == 0


async def test_a_full_queue_fails_at_once() -> None:
    server = Server("gated")
    release = asyncio.Event()

    @server.tool()
    async def hold() -> str:
        await release.wait()
        return "held"

    @server.tool()
    async def quick() -> str:
        return "quick"

    async with connect(server, limits=Limits(max_in_flight=1, max_queue=1)) as client:
        gate = client._core.pipeline.gate
        first = asyncio.ensure_future(client.call_tool("hold"))
        await _until(lambda: gate.in_flight == 1)
        second = asyncio.ensure_future(client.call_tool("quick"))  # waits in the queue
        await _until(lambda: gate.queued == 1)
        with pytest.raises(QueueFull, match="max_in_flight=1"):
            await client.call_tool("quick")
        release.set()
        assert (await first).text == "held"
        assert (await second).text == "quick"


async def _until(condition: Callable[[], bool]) -> None:
    """Let the other tasks run until ``condition`` holds (a stall bound of 10 s)."""
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110 (a state of the gate, not an event)
            await asyncio.sleep(0)
