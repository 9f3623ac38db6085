"""Dynamic batching with Triton's semantics, on asyncio; knows nothing of torch.

Callers ``submit`` one request each (a tensor whose first dimension is its batch size); the
batcher joins queued requests into batches of at most ``max_batch_size`` rows, in arrival
order, and hands each batch to ``run``, which returns one result per request. Each caller gets
its own result back.

- ``max_queue_delay_ms``: once a request is at the head of the queue, wait at most this long
  (from its arrival) for more requests to fill the batch. 0: take whatever is queued when the
  model frees up, and no more.
- ``max_queue_size``: requests waiting (not yet in a batch); past it ``submit`` refuses at once
  with :class:`~millimcp.errors.Overloaded` (HTTP 503, ``Retry-After``), never queueing.
- ``instances``: how many batches may run at the same time (model copies: one per worker).

A request larger than ``max_batch_size`` rows is refused (Triton does the same). A caller that
is cancelled while queued is dropped from its batch.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from millimcp.errors import ConfigurationError, Overloaded, ToolError

__all__ = ["Batching", "DynamicBatcher"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Batching:
    """Dynamic batching settings (Triton's names and meanings)."""

    max_batch_size: int = 32
    """Rows (the first dimension, summed over requests) in one batch."""
    max_queue_delay_ms: float = 0.0
    """How long the oldest queued request may wait for the batch to fill."""
    max_queue_size: int = 1024
    """Requests waiting; more are refused with Overloaded."""

    def __post_init__(self) -> None:
        if self.max_batch_size < 1 or self.max_queue_size < 1 or self.max_queue_delay_ms < 0:
            raise ConfigurationError(f"invalid batching settings: {self}")


class _Pending(Generic[T, R]):
    __slots__ = ("arrived", "future", "item", "rows")

    def __init__(self, item: T, rows: int, future: asyncio.Future[R]) -> None:
        self.item = item
        self.rows = rows
        self.future = future
        self.arrived = time.monotonic()


class DynamicBatcher(Generic[T, R]):
    """Joins concurrent requests into batches for ``run(items) -> results`` (same order)."""

    def __init__(
        self,
        run: Callable[[list[T]], Awaitable[list[R]]],
        config: Batching,
        *,
        rows: Callable[[T], int] = lambda item: 1,
        instances: int = 1,
    ) -> None:
        self._run = run
        self.config = config
        self._rows = rows
        self._instances = instances
        self._queue: collections.deque[_Pending[T, R]] = collections.deque()
        self._queued_rows = 0
        self._arrival = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []
        self.batches: collections.Counter[int] = collections.Counter()
        """How many batches ran with each number of requests (for tests and metrics)."""

    def __repr__(self) -> str:
        return (
            f"<DynamicBatcher queued={len(self._queue)} rows={self._queued_rows} "
            f"batches={sum(self.batches.values())}>"
        )

    async def submit(self, item: T) -> R:
        """Queue one request and wait for its own result."""
        config = self.config
        rows = self._rows(item)
        if rows > config.max_batch_size:
            raise ToolError(
                f"request of {rows} rows is larger than max_batch_size {config.max_batch_size}"
            )
        if len(self._queue) >= config.max_queue_size:
            raise Overloaded(
                f"model queue is full ({config.max_queue_size} requests waiting)",
                {"retryAfterMs": 1000},
            )
        if not self._workers:
            self._workers = [
                asyncio.create_task(self._serve(), name="millimcp-batcher")
                for _ in range(self._instances)
            ]
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(item, rows, future))
        self._queued_rows += rows
        self._arrival.set()
        return await future

    async def close(self) -> None:
        """Stop the workers; requests still queued fail."""
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._workers = []
        while self._queue:
            pending = self._queue.popleft()
            if not pending.future.done():
                pending.future.set_exception(ToolError("the model is shutting down"))
        self._queued_rows = 0

    async def _serve(self) -> None:
        while True:
            batch = await self._next_batch()
            if not batch:
                continue
            self.batches[len(batch)] += 1
            try:
                results = await self._run([p.item for p in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"run returned {len(results)} results for {len(batch)}")
            except Exception as exc:
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(exc)
                continue
            for pending, result in zip(batch, results, strict=True):
                if not pending.future.done():
                    pending.future.set_result(result)

    async def _next_batch(self) -> list[_Pending[T, R]]:
        queue = self._queue
        while not queue:
            self._arrival.clear()
            await self._arrival.wait()
        limit = self.config.max_batch_size
        delay = self.config.max_queue_delay_ms / 1000
        if delay > 0:
            deadline = queue[0].arrived + delay
            while self._queued_rows < limit:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._arrival.clear()
                try:
                    async with asyncio.timeout(left):
                        await self._arrival.wait()
                except TimeoutError:
                    break
        batch: list[_Pending[T, R]] = []
        rows = 0
        while queue and rows + queue[0].rows <= limit:
            pending = queue.popleft()
            self._queued_rows -= pending.rows
            if pending.future.done():  # its caller was cancelled while queued
                continue
            batch.append(pending)
            rows += pending.rows
        return batch
