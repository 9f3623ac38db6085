"""The task record, the in-memory store and the task settings."""

from __future__ import annotations

import asyncio
import re

import msgspec
import pytest

from millimcp.errors import ConfigurationError, Overloaded
from millimcp.protocol.types import ElicitParams, ElicitRequest
from millimcp.tasks import MemoryTaskStore, TaskConfig, TaskRecord, iso, new_task_id
from millimcp.tasks.record import new_record


def record(ttl_ms: int = 60_000) -> TaskRecord:
    return new_record(None, ttl_ms, 100)


def test_task_ids_are_long_random_and_url_safe() -> None:
    ids = {new_task_id() for _ in range(1000)}
    assert len(ids) == 1000
    for task_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{32}", task_id)


def test_iso_is_utc_to_the_millisecond() -> None:
    assert iso(0) == "1970-01-01T00:00:00.000Z"
    assert iso(1.2345) == "1970-01-01T00:00:01.234Z"


def test_detailed_carries_only_what_its_status_has() -> None:
    task = record()
    task.input_requests["k"] = ElicitRequest(params=ElicitParams(message="?"))
    task.result = {"content": []}
    task.error = {"code": -32603, "message": "x"}
    working = task.detailed()
    assert (working.input_requests, working.result, working.error) == (None, None, None)
    task.touch("input_required")
    assert list(task.detailed().input_requests or ()) == ["k"]
    task.touch("completed")
    assert task.detailed().result == {"content": []}
    assert task.detailed().input_requests is None
    task.touch("failed")
    assert task.detailed().error == {"code": -32603, "message": "x"}
    wire = msgspec.json.decode(msgspec.json.encode(task.created()))
    assert wire["resultType"] == "task"
    assert set(wire) == {
        "resultType",
        "taskId",
        "status",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
    }


def test_a_record_round_trips_as_json() -> None:
    task = record()
    task.input_requests["k"] = ElicitRequest(params=ElicitParams(message="?"))
    task.answers["j"] = msgspec.Raw(b'{"action":"accept"}')
    back = msgspec.json.decode(msgspec.json.encode(task), type=TaskRecord)
    assert back.input_requests == task.input_requests
    assert bytes(back.answers["j"]) == b'{"action":"accept"}'


async def test_the_store_keeps_updates_and_drops_tasks() -> None:
    store = MemoryTaskStore()
    task = record()
    await store.create(task)
    assert await store.get(task.task_id) is task

    def complete(r: TaskRecord) -> bool:
        r.touch("completed")
        return True

    assert await store.update(task.task_id, complete)
    assert (await store.get(task.task_id)).status == "completed"  # type: ignore[union-attr]
    assert await store.update("nope", lambda r: True) is None
    await store.delete(task.task_id)
    assert await store.get(task.task_id) is None
    assert await store.count() == 0


async def test_expired_tasks_are_freed() -> None:
    store = MemoryTaskStore()
    old = record(ttl_ms=1)
    old.created_at -= 10
    await store.create(old)
    fresh = record()
    await store.create(fresh)
    assert len(store) == 1  # the new task's creation freed the expired one
    assert await store.get(old.task_id) is None
    another = record(ttl_ms=1)
    another.created_at -= 10
    store._records[another.task_id] = another  # kept without the sweep's notice
    assert await store.get(another.task_id) is None
    assert len(store) == 1
    assert store.sweep(now=fresh.expires_at + 1) == 1
    assert await store.count() == 0


async def test_a_full_store_refuses_new_tasks() -> None:
    store = MemoryTaskStore(max_tasks=2)
    await store.create(record())
    await store.create(record())
    with pytest.raises(Overloaded):
        await store.create(record())


async def test_wait_returns_on_a_change_or_after_its_time() -> None:
    store = MemoryTaskStore()
    task = record()
    await store.create(task)
    waiter = asyncio.ensure_future(store.wait(task.task_id, 30))
    await asyncio.sleep(0)
    assert not waiter.done()
    await store.update(task.task_id, lambda r: True)
    await asyncio.wait_for(waiter, 5)
    await store.wait(task.task_id, 0.001)  # nothing changes: it returns anyway
    closing = asyncio.ensure_future(store.wait(task.task_id, 30))
    await asyncio.sleep(0)
    await store.close()
    await asyncio.wait_for(closing, 5)


@pytest.mark.parametrize(
    "options",
    [
        {"default": "sometimes"},
        {"ttl_ms": 0},
        {"poll_interval_ms": -1},
        {"max_tasks": 0},
        {"timeout_s": 0},
    ],
)
def test_bad_task_settings_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        TaskConfig(**options)  # type: ignore[arg-type]
