"""Deadlines, retries and the concurrency cap of the client, against real server processes."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator

import pytest

from millimcp import Client, Limits, Retry, Timeout
from millimcp.errors import CallTimeout, ConnectionLost, NotSent, QueueFull
from tests.conftest import free_port, start_server, stop_server
from tests.integration.client.conftest import Era

pytestmark = pytest.mark.usefixtures("http_kind")

SERVER = "tests.servers.client_core_server:server"


async def _cancelled_on_server(client: Client, tag: str) -> bool:
    """Whether the server's handler saw the cancellation of the call tagged ``tag``
    (polled: the server notices a closed stream within its sweep period)."""
    for _ in range(100):
        result = await client.call_tool("cancelled")
        if tag in (result.structured_content or {}).get("result", []):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_deadline_raises_call_timeout_and_cancels_on_the_server(
    core_url: str, era: Era
) -> None:
    tag = f"deadline-{era}"
    async with Client.over_http(core_url, era=era) as client:
        started = time.monotonic()
        with pytest.raises(CallTimeout):
            await client.call_tool("slow", {"seconds": 30, "tag": tag}, timeout=0.3)
        assert time.monotonic() - started < 10  # a stall bound, not a speed claim
        assert client.stats.timeouts == 1
        assert await _cancelled_on_server(client, tag)


async def test_the_tools_own_timeout_replaces_the_clients(core_url: str) -> None:
    async with Client.over_http(core_url, timeout=0.1) as client:
        # Before tools/list the client knows nothing of the tool: its 0.1 s applies.
        with pytest.raises(CallTimeout):
            await client.call_tool("quick_or_bust", {"seconds": 0.25, "tag": "t1"})
        await client.list_tools()
        # The tool advertises 300 ms (dev.millimcp/timeoutMs): that is its deadline now.
        result = await client.call_tool("quick_or_bust", {"seconds": 0.25, "tag": "t2"})
        assert result.text == "in time"
        # ...and a per-call timeout overrides it again.
        with pytest.raises(CallTimeout):
            await client.call_tool("quick_or_bust", {"seconds": 0.25, "tag": "t3"}, timeout=0.1)


async def test_progress_resets_the_deadline_under_a_hard_cap(core_url: str) -> None:
    arguments = {"steps": 4, "pause": 0.15}
    async with Client.over_http(core_url) as client:
        with pytest.raises(CallTimeout):
            await client.call_tool("crawl", arguments, timeout=0.35)
        patient = Timeout(total=0.35, reset_on_progress=True)
        assert (await client.call_tool("crawl", arguments, timeout=patient)).text == "crawled"
        capped = Timeout(total=0.35, reset_on_progress=True, hard_cap=0.4)
        with pytest.raises(CallTimeout):
            await client.call_tool("crawl", arguments, timeout=capped)


async def test_not_sent_is_retried_then_raised() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    client = Client.over_http(url, retry=Retry(attempts=2, base_s=0.01))
    with pytest.raises(NotSent):
        await client.open()
    assert client.stats.retries == 2


async def test_no_retry_policy_means_one_try() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    client = Client.over_http(url, retry=None)
    with pytest.raises(NotSent):
        await client.open()
    assert client.stats.retries == 0


async def test_a_full_queue_fails_at_once(core_url: str) -> None:
    limits = Limits(max_in_flight=1, max_queue=0)
    async with Client.over_http(core_url, limits=limits) as client:
        first = asyncio.ensure_future(
            client.call_tool("slow", {"seconds": 0.5, "tag": "gate-first"})
        )
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFull, match="max_in_flight=1"):
            await client.call_tool("echo", {"text": "x"})
        assert (await first).text == "done"


async def test_queued_calls_wait_their_turn(core_url: str) -> None:
    limits = Limits(max_in_flight=2, max_queue=10)
    async with Client.over_http(core_url, limits=limits) as client:
        results = await asyncio.gather(
            *(client.call_tool("echo", {"text": str(i)}) for i in range(8))
        )
        assert [r.text for r in results] == [str(i) for i in range(8)]
        assert client.stats.connections_opened <= 2


@pytest.fixture
def doomed_url() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A server of our own, to kill in the middle of a call."""
    port = free_port()
    process = start_server(["-m", "millimcp", "serve", SERVER, "--port", str(port)], port)
    yield f"http://127.0.0.1:{port}/mcp", process
    stop_server(process)


async def test_a_call_that_may_have_run_is_not_retried_unless_idempotent(
    doomed_url: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, process = doomed_url
    retry = Retry(attempts=2, base_s=0.01)
    async with Client.over_http(url, retry=retry) as client:
        await client.list_tools()
        call = asyncio.ensure_future(client.call_tool("slow", {"seconds": 30, "tag": "killed"}))
        read = asyncio.ensure_future(
            client.call_tool("slow", {"seconds": 30, "tag": "k2"}, idempotent=True)
        )
        await asyncio.sleep(0.5)
        process.kill()
        with pytest.raises(ConnectionLost):
            await call  # slow is not annotated idempotent: never sent twice
        with pytest.raises(NotSent):
            await read  # idempotent: retried; the server is gone, so the retries fail
        assert client.stats.retries == 2
