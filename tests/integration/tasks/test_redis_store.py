"""The Redis task store on a private redis-server, and the task runtime over it in-process."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import msgspec
import pytest

from millimcp.errors import InvalidParams
from millimcp.protocol.types import CallToolResult, TextContent
from millimcp.session import Context
from millimcp.tasks import TaskConfig, TaskManager, TaskRecord
from millimcp.tasks.record import new_record
from millimcp.tasks.redis_store import RedisTaskStore


@pytest.fixture
async def store(redis_url: str) -> Any:
    found = RedisTaskStore(redis_url, f"test-{uuid.uuid4().hex[:8]}")
    yield found
    await found.close()


async def test_create_get_update_count_delete(store: RedisTaskStore) -> None:
    task = new_record("alice", 60_000, 100)
    await store.create(task)
    got = await store.get(task.task_id)
    assert got is not None
    assert (got.task_id, got.owner, got.status) == (task.task_id, "alice", "working")

    def finish(record: TaskRecord) -> bool:
        record.result = {"content": []}
        record.touch("completed")
        return True

    updated = await store.update(task.task_id, finish)
    assert updated is not None
    assert updated.status == "completed"
    assert (await store.get(task.task_id)).result == {"content": []}  # type: ignore[union-attr]
    unchanged = await store.update(task.task_id, lambda record: False)
    assert unchanged is not None
    assert unchanged.status == "completed"
    assert await store.update("missing", lambda record: True) is None
    assert await store.count() == 1
    await store.delete(task.task_id)
    assert await store.get(task.task_id) is None
    assert await store.count() == 0
    await store.wait(task.task_id, 0.001)


async def test_redis_expires_a_task_with_its_ttl(store: RedisTaskStore) -> None:
    task = new_record(None, 150, 100)
    await store.create(task)
    assert await store.get(task.task_id) is not None
    for _ in range(300):  # Redis frees the key itself, shortly after the TTL
        if await store.count() == 0:
            break
        await asyncio.sleep(0.01)
    assert await store.count() == 0
    assert await store.get(task.task_id) is None


async def test_concurrent_changes_are_all_kept(store: RedisTaskStore) -> None:
    task = new_record(None, 60_000, 100)
    await store.create(task)
    other = RedisTaskStore(store.url, store.namespace)  # a second replica's connection

    def add(key: str) -> Any:
        def change(record: TaskRecord) -> bool:
            record.answers[key] = msgspec.Raw(b"{}")
            return True

        return change

    await asyncio.gather(
        *((store if n % 2 else other).update(task.task_id, add(f"k{n}")) for n in range(20))
    )
    final = await store.get(task.task_id)
    assert final is not None
    assert sorted(final.answers) == sorted(f"k{n}" for n in range(20))
    await other.close()


async def test_a_cancel_through_the_store_stops_a_handler_elsewhere(redis_url: str) -> None:
    config = TaskConfig(
        redis_url=redis_url, namespace=f"t-{uuid.uuid4().hex[:8]}", poll_interval_ms=50
    )
    runner, remote = TaskManager(config), TaskManager(config)
    stopped = asyncio.Event()

    async def work(ctx: Context) -> CallToolResult:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return CallToolResult(content=[TextContent(text="never")])

    created = await runner.start(work, Context(1, "tools/call", None))
    ctx = Context(2, "tasks/cancel", None)
    await remote.cancel(created.task_id, ctx)  # not running there: only the store hears it
    await asyncio.wait_for(stopped.wait(), 10)
    assert (await remote.get(created.task_id, ctx)).status == "cancelled"
    with pytest.raises(InvalidParams):
        await remote.get("unknown", ctx)
    await runner.close()
    await remote.close()
