"""Where tasks are kept: the store interface and the in-memory store.

A store keeps :class:`~millimcp.tasks.record.TaskRecord` values by id until their TTL passes.
Every change goes through :meth:`TaskStore.update`, an atomic read-modify-write, and wakes
whoever :meth:`TaskStore.wait`\\ s on that task (a handler waiting for its input). The
in-memory store serves one process; :class:`~millimcp.tasks.redis_store.RedisTaskStore`
serves every replica of a deployment.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable
from typing import Protocol

from millimcp.errors import Overloaded
from millimcp.tasks.record import TaskRecord

__all__ = ["MemoryTaskStore", "TaskStore", "Updater"]

Updater = Callable[[TaskRecord], bool]
"""Changes a record in place; returns whether it changed anything (only then is it written)."""


class TaskStore(Protocol):
    """What the task runtime needs of a store."""

    shared: bool
    """Other processes change these records too (a cancel may come from another replica)."""

    async def create(self, record: TaskRecord) -> None:
        """Keep a new task; when this returns, :meth:`get` finds it (durable creation)."""
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task, or None when there is none or it expired (an expired one is dropped)."""
        ...

    async def update(self, task_id: str, change: Updater) -> TaskRecord | None:
        """Apply ``change`` atomically; the record after it, or None when there is none."""
        ...

    async def wait(self, task_id: str, seconds: float) -> None:
        """Return when the task may have changed, or after ``seconds``."""
        ...

    async def delete(self, task_id: str) -> None: ...

    async def count(self) -> int:
        """How many tasks are kept now (expired ones not counted)."""
        ...

    async def close(self) -> None: ...


class MemoryTaskStore:
    """Tasks in this process's memory, at most ``max_tasks``; expired ones are freed as new
    ones come and when they are looked up."""

    shared = False

    def __init__(self, max_tasks: int = 10_000) -> None:
        self.max_tasks = max_tasks
        self._records: dict[str, TaskRecord] = {}
        self._expiry: collections.deque[tuple[float, str]] = collections.deque()
        self._changed: dict[str, asyncio.Event] = {}

    def __repr__(self) -> str:
        return f"<MemoryTaskStore tasks={len(self._records)}/{self.max_tasks}>"

    def __len__(self) -> int:
        return len(self._records)

    def sweep(self, now: float | None = None) -> int:
        """Drop every expired task; how many were dropped."""
        now = time.time() if now is None else now
        dropped = 0
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            _, task_id = expiry.popleft()
            record = self._records.get(task_id)
            if record is not None and record.expired(now):
                del self._records[task_id]
                self._wake(task_id)
                dropped += 1
        return dropped

    async def create(self, record: TaskRecord) -> None:
        self.sweep()
        if len(self._records) >= self.max_tasks:
            raise Overloaded("Too many tasks: try again later", retry_after_s=1)
        self._records[record.task_id] = record
        self._expiry.append((record.expires_at, record.task_id))

    async def get(self, task_id: str) -> TaskRecord | None:
        record = self._records.get(task_id)
        if record is not None and record.expired():
            del self._records[task_id]
            self._wake(task_id)
            return None
        return record

    async def update(self, task_id: str, change: Updater) -> TaskRecord | None:
        record = await self.get(task_id)
        if record is not None and change(record):
            self._wake(task_id)
        return record

    async def wait(self, task_id: str, seconds: float) -> None:
        event = self._changed.get(task_id)
        if event is None:
            event = self._changed[task_id] = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)

    async def delete(self, task_id: str) -> None:
        self._records.pop(task_id, None)
        self._wake(task_id)

    async def count(self) -> int:
        self.sweep()
        return len(self._records)

    async def close(self) -> None:
        for task_id in list(self._changed):
            self._wake(task_id)

    def _wake(self, task_id: str) -> None:
        event = self._changed.pop(task_id, None)
        if event is not None:
            event.set()
