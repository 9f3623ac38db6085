"""Tasks over real HTTP: server processes of tests/servers/task_server.py, the millimcp client.

A task outlives the client that started it, a cancel stops its handler, its TTL frees the
store, and with Redis a task started on one replica is followed, answered and cancelled on
another.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from millimcp import Client
from millimcp.client import TaskCancelled
from millimcp.errors import InvalidParams
from millimcp.protocol.types import ElicitParams, ElicitResult
from tests.conftest import serve_python

SERVE = ["-m", "millimcp", "serve", "tests.servers.task_server:server", "--port", "{port}"]


@pytest.fixture(scope="module")
def task_url() -> Iterator[str]:
    with serve_python(SERVE) as served:
        yield served.url()


@pytest.fixture(scope="module")
def short_ttl_url() -> Iterator[str]:
    with serve_python(SERVE, env={"MILLIMCP_TEST_TASK_TTL_MS": "400"}) as served:
        yield served.url()


@pytest.fixture(scope="module")
def protected_url() -> Iterator[str]:
    with serve_python(SERVE, env={"MILLIMCP_TEST_TASK_AUTH": "1"}) as served:
        yield served.url()


@pytest.fixture(scope="module")
def replicas(redis_url: str) -> Iterator[tuple[str, str]]:
    env = {"MILLIMCP_TEST_REDIS_URL": redis_url, "MILLIMCP_TEST_TASK_NS": uuid.uuid4().hex}
    with serve_python(SERVE, env=env) as a, serve_python(SERVE, env=env) as b:
        yield a.url(), b.url()


async def confirm(params: ElicitParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"ok": True})


async def stats(client: Client) -> dict[str, Any]:
    result = await client.call_tool("task_stats")
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def eventually_stopped(client: Client, count: int) -> dict[str, Any]:
    for _ in range(200):
        found = await stats(client)
        if found["stopped"] >= count:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"the handler was not stopped: {found}")


async def test_a_task_survives_the_client_reconnecting(task_url: str) -> None:
    async with Client.over_http(task_url) as first:
        task = await first.call_tool("slow", {"seconds": 0.3}, as_task=True)
        task_id = task.task_id
    async with Client.over_http(task_url) as second:
        again = await second.task(task_id)
        assert again.task_id == task_id
        result = await again.result()
    assert result.text.startswith("slept 0.3 s")


async def test_cancel_stops_the_handler(task_url: str) -> None:
    async with Client.over_http(task_url) as client:
        before = (await stats(client))["stopped"]
        task = await client.call_tool("stoppable", as_task=True)
        await task.cancel()
        with pytest.raises(TaskCancelled):
            await task.result()
        assert (await eventually_stopped(client, before + 1))["stopped"] == before + 1


async def test_a_required_task_and_input_inside_a_task(task_url: str) -> None:
    async with Client.over_http(task_url, elicitation=confirm) as client:
        report = await client.call_tool("report", {"rows": 5})  # waited for transparently
        assert report.structured_content is not None
        assert report.structured_content["rows"] == 5
        task = await client.call_tool("confirm", {"item": "delete"}, as_task=True)
        assert (await task.result()).text.startswith("delete: accept True")


async def test_expiry_frees_the_store(short_ttl_url: str) -> None:
    async with Client.over_http(short_ttl_url) as client:
        task = await client.call_tool("slow", {"seconds": 0}, as_task=True)
        assert (await task.result()).text.startswith("slept 0 s")
        for _ in range(300):
            if (await stats(client))["kept"] == 0:
                break
            await asyncio.sleep(0.02)
        assert (await stats(client))["kept"] == 0
        with pytest.raises(InvalidParams, match="not found"):
            await client.task(task.task_id)


async def test_a_task_started_on_one_replica_is_served_by_another(
    replicas: tuple[str, str],
) -> None:
    a_url, b_url = replicas
    async with (
        Client.over_http(a_url, elicitation=confirm) as a,  # declares it; B answers
        Client.over_http(b_url, elicitation=confirm) as b,
    ):
        a_pid, b_pid = (await stats(a))["pid"], (await stats(b))["pid"]
        assert a_pid != b_pid
        started = await a.call_tool("slow", {"seconds": 0.2}, as_task=True)
        polled = await b.task(started.task_id)
        assert (await polled.result()).text == f"slept 0.2 s in pid {a_pid}"
        # input asked by a handler on A, answered through B
        asked = await a.call_tool("confirm", {"item": "ship"}, as_task=True)
        answered = await b.task(asked.task_id)
        assert (await answered.result()).text == f"ship: accept True in pid {a_pid}"
        # a cancel sent to B stops the handler running on A
        before = (await stats(a))["stopped"]
        running = await a.call_tool("stoppable", as_task=True)
        await (await b.task(running.task_id)).cancel()
        assert (await eventually_stopped(a, before + 1))["stopped"] == before + 1
        assert (await stats(a))["kept"] >= 3


async def test_another_principal_cannot_read_or_cancel_a_task(protected_url: str) -> None:
    """A task is bound to the principal that created it: Bob, who knows its id, gets the
    same answer as for an id that does not exist, and Alice still follows it to its end."""
    from millimcp.auth import BearerToken

    alice = Client.over_http(protected_url, auth=BearerToken("token-alice"))
    bob = Client.over_http(protected_url, auth=BearerToken("token-bob"))
    async with alice, bob:
        task = await alice.call_tool("slow", {"seconds": 0.3}, as_task=True)
        with pytest.raises(InvalidParams) as unknown:
            await bob.task("no-such-task")
        with pytest.raises(InvalidParams) as foreign:
            await bob.task(task.task_id)
        assert str(foreign.value) == str(unknown.value).replace("no-such-task", task.task_id)
        result = await task.result()
        assert result.text.startswith("slept 0.3 s")


async def test_bench_measures_task_round_trips(task_url: str) -> None:
    """``millimcp bench --as-task``: every measured call is a task (the server keeps one per
    call, warm-up included), each waited for to its result."""
    from millimcp.lab.bench import bench
    from millimcp.lab.target import parse_target

    async with Client.over_http(task_url) as client:
        before = (await stats(client))["kept"]
        run = await bench(
            parse_target(task_url),
            "slow",
            {"seconds": 0.01},
            concurrency=2,
            requests=6,
            warmup_s=0.0,
            client="full",
            as_task=True,
        )
        assert run.errors == {}
        assert run.calls == 6
        assert (await stats(client))["kept"] - before >= 6
