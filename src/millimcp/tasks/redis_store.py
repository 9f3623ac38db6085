"""Tasks in Redis, so that every replica of a deployment serves every task.

One key per task, ``{ns}:{task_id}``: the record as JSON, expiring with the task's TTL (Redis
frees it). A change is a ``WATCH``/``MULTI`` transaction, retried when another replica
changed the task meanwhile, so two replicas never lose each other's changes. A handler
waiting for input polls its task (no pub/sub connection per waiting handler).

Redis is reached with redis-py's asyncio client (the ``cache`` extra), with the same
conventions as the cache's shared tier: timeouts on every socket, no hidden retries.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final

import msgspec

from millimcp.errors import MissingExtra
from millimcp.tasks.record import TaskRecord
from millimcp.tasks.store import Updater

__all__ = ["RedisTaskStore"]

_encode: Final = msgspec.json.Encoder()
_decode: Final = msgspec.json.Decoder(TaskRecord)
_MAX_RETRIES: Final = 50


def _redis() -> Any:
    try:
        import redis.asyncio
        import redis.exceptions
    except ImportError:
        raise MissingExtra("cache", "keeping tasks in Redis", "redis") from None
    return redis


class RedisTaskStore:
    """Tasks in Redis (``redis://host:port/db``), shared by every process that uses it."""

    shared = True

    def __init__(self, url: str, namespace: str = "millimcp:task", *, timeout_s: float = 1.0):
        self.url = url
        self.namespace = namespace
        self.timeout_s = timeout_s
        self._redis = _redis()
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"<RedisTaskStore {self.url} ns={self.namespace!r}>"

    def _key(self, task_id: str) -> str:
        return f"{self.namespace}:{task_id}"

    def _connected(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

            self._client = self._redis.asyncio.Redis.from_url(
                self.url,
                socket_timeout=self.timeout_s,
                socket_connect_timeout=self.timeout_s,
                retry=Retry(NoBackoff(), 0),
            )
            self._loop = loop
        return self._client

    @staticmethod
    def _px(record: TaskRecord) -> int:
        return max(1, int((record.expires_at - time.time()) * 1000))

    async def create(self, record: TaskRecord) -> None:
        client = self._connected()
        await client.set(self._key(record.task_id), _encode.encode(record), px=self._px(record))

    async def get(self, task_id: str) -> TaskRecord | None:
        raw = await self._connected().get(self._key(task_id))
        if raw is None:
            return None
        record = _decode.decode(raw)
        return None if record.expired() else record

    async def update(self, task_id: str, change: Updater) -> TaskRecord | None:
        key = self._key(task_id)
        watch_error = self._redis.exceptions.WatchError
        async with self._connected().pipeline(transaction=True) as pipe:
            for _ in range(_MAX_RETRIES):
                try:
                    await pipe.watch(key)
                    raw = await pipe.get(key)
                    if raw is None:
                        await pipe.unwatch()
                        return None
                    record = _decode.decode(raw)
                    if record.expired() or not change(record):
                        await pipe.unwatch()
                        return None if record.expired() else record
                    pipe.multi()
                    pipe.set(key, _encode.encode(record), px=self._px(record))
                    await pipe.execute()
                    return record
                except watch_error:
                    continue
        raise RuntimeError(f"task {task_id}: too many concurrent changes")

    async def wait(self, task_id: str, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def delete(self, task_id: str) -> None:
        await self._connected().delete(self._key(task_id))

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def count(self) -> int:
        """How many tasks the namespace holds now (for tests and operators)."""
        found = 0
        async for _ in self._connected().scan_iter(match=f"{self.namespace}:*", count=500):
            found += 1
        return found
