"""Dynamic batching on asyncio, adaptive by default or with Triton's fixed knobs; no torch.

Callers ``submit`` one request each (a tensor whose first dimension is its batch size); the
batcher joins queued requests into batches, in arrival order, and hands each batch to ``run``,
which returns one result per request. Each caller gets its own result back.

- ``mode="adaptive"`` (default): the batcher learns what a batch of each size costs and how
  fast requests arrive (:mod:`millimcp.tensor.adaptive`). It grows batches only while the cost
  per row keeps falling (never past ``max_batch_size``), and waits for more requests only when
  that serves more rows per second: a lone caller never waits, and when the model is free and
  nobody is queued its call runs at once in its own task (no hop through a worker).
  ``latency_objective_ms`` bounds waits and batch run times (a batch whose run misses it
  halves the batch size).
- ``mode="fixed"`` (Triton's): batches of at most ``max_batch_size`` rows; once a request is at
  the head of the queue, wait at most ``max_queue_delay_ms`` (from its arrival) for more. 0:
  take whatever is queued when the model frees up, and no more.
- ``max_queue_size``: requests waiting (not yet in a batch); past it ``submit`` refuses at once
  with :class:`~millimcp.errors.Overloaded` (HTTP 503, ``Retry-After``), never queueing.
- ``instances``: how many batches may run at the same time (model copies: one per worker).

A request larger than ``max_batch_size`` rows is refused (Triton does the same). A caller that
is cancelled while queued is dropped from its batch. Every batch is counted
(:meth:`DynamicBatcher.stats`) and, while a trace listener is on, reported as events (``batch``
by model and size, ``batch_rows``, ``batch_wait`` and ``batch_run`` seconds by model) that the
Prometheus listener exports.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from millimcp.errors import ConfigurationError, Overloaded, ToolError
from millimcp.observe.hook import TRACE
from millimcp.tensor.adaptive import AdaptivePolicy

__all__ = ["Batching", "DynamicBatcher", "Ran"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Batching:
    """Dynamic batching settings: adaptive, or fixed with Triton's names and meanings."""

    max_batch_size: int = 32
    """Rows (the first dimension, summed over requests) in one batch."""
    max_queue_delay_ms: float = 0.0
    """How long the oldest queued request may wait for the batch to fill."""
    max_queue_size: int = 1024
    """Requests waiting; more are refused with Overloaded."""
    mode: Literal["adaptive", "fixed"] = "adaptive"
    """``adaptive``: learn batch sizes and waits; ``fixed``: max_batch_size and the delay."""
    latency_objective_ms: float | None = None
    """Adaptive: queue wait plus run time the batches aim to stay under (None: no objective)."""

    def __post_init__(self) -> None:
        if self.max_batch_size < 1 or self.max_queue_size < 1 or self.max_queue_delay_ms < 0:
            raise ConfigurationError(f"invalid batching settings: {self}")
        if self.mode not in ("adaptive", "fixed"):
            raise ConfigurationError(f"batching mode is 'adaptive' or 'fixed', not {self.mode!r}")
        if self.latency_objective_ms is not None and self.latency_objective_ms <= 0:
            raise ConfigurationError("latency_objective_ms must be positive")

    @classmethod
    def fixed(cls, max_batch_size: int = 32, max_queue_delay_ms: float = 0.0) -> Batching:
        """Triton's knobs: batches up to ``max_batch_size``, the head waits the delay."""
        return cls(max_batch_size, max_queue_delay_ms, mode="fixed")


class Ran(list[R]):
    """What ``run`` may return instead of a plain list: the results, and the seconds the
    model itself took, timed where it ran (on the inference thread). The batcher learns
    costs from these; from its own clock it would also count how late the event loop got
    round to the batch's end, which has nothing to do with the batch's size (the CNN's
    1-row batch measured 13-15 ms that way with 32 callers' requests being read, against 2 ms
    on the thread)."""

    __slots__ = ("seconds",)

    def __init__(self, results: Iterable[R], seconds: float) -> None:
        super().__init__(results)
        self.seconds = seconds


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
        name: str = "model",
    ) -> None:
        self._run = run
        self.config = config
        self.name = name
        self.policy: AdaptivePolicy | None = None
        if config.mode == "adaptive":
            objective = config.latency_objective_ms
            self.policy = AdaptivePolicy(
                config.max_batch_size, objective=None if objective is None else objective / 1000
            )
        self._rows = rows
        self._instances = instances
        self._queue: collections.deque[_Pending[T, R]] = collections.deque()
        self._queued_rows = 0
        self._arrival = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []
        self._running = 0
        """Batches running now (workers' and lone callers')."""
        self._freed = asyncio.Event()
        self.batches: collections.Counter[int] = collections.Counter()
        """How many batches ran with each number of requests (for tests and metrics)."""
        self.rows = 0
        """Rows run in all batches."""
        self.requests = 0
        self.queue_wait = 0.0
        """Seconds requests waited in the queue, summed over requests."""
        self.run_time = 0.0
        """Seconds the batches ran, summed over batches."""
        self.waits = 0
        """Batches the adaptive policy held back to wait for more callers."""
        self.alone = 0
        """Batches of one run at once in their caller's task (the model was free, nobody
        queued, and waiting would not have paid)."""

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
        pending = _Pending(item, rows, future)
        policy = self.policy
        if policy is not None:
            policy.arrived(pending.arrived)
            if (
                not self._queue
                and self._running < self._instances
                and not policy.wait(rows, 0.0, pending.arrived).seconds
            ):
                return await self._alone(pending)  # nobody to wait for: run now, no hop
        self._queue.append(pending)
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

    async def _alone(self, pending: _Pending[T, R]) -> R:
        """A batch of one, in the caller's task: the model is free and waiting would not pay."""
        self._running += 1
        self.alone += 1
        started = time.monotonic()
        try:
            results = await self._run([pending.item])
        finally:
            self._release()
        if len(results) != 1:
            raise RuntimeError(f"run returned {len(results)} results for 1")
        ended = time.monotonic()
        self._count([pending], started, _seconds(results, ended - started))
        if self.policy is not None:
            self.policy.released(1, ended)
        return results[0]

    def _release(self) -> None:
        self._running -= 1
        self._freed.set()

    async def _serve(self) -> None:
        while True:
            batch = await self._next_batch()
            if not batch:
                continue
            self._running += 1
            started = time.monotonic()
            try:
                results = await self._run([p.item for p in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"run returned {len(results)} results for {len(batch)}")
            except Exception as exc:
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(exc)
                continue
            finally:
                self._release()
            ended = time.monotonic()
            self._count(batch, started, _seconds(results, ended - started))
            for pending, result in zip(batch, results, strict=True):
                if not pending.future.done():
                    pending.future.set_result(result)
            if self.policy is not None:
                self.policy.released(len(batch), ended)

    def _count(self, batch: list[_Pending[T, R]], started: float, ran: float) -> None:
        """Count a batch started at ``started`` (the batcher's clock) that the model ran for
        ``ran`` seconds."""
        rows = sum(p.rows for p in batch)
        waited = [started - p.arrived for p in batch]
        self.batches[len(batch)] += 1
        self.rows += rows
        self.requests += len(batch)
        self.queue_wait += sum(waited)
        self.run_time += ran
        if self.policy is not None:
            self.policy.ran(rows, ran, self._queued_rows)
        if TRACE.active:
            name = self.name
            TRACE.event("batch", (name, str(rows)))
            TRACE.event("batch_rows", (name,), rows)
            TRACE.event("batch_wait", (name,), sum(waited))
            TRACE.event("batch_run", (name,), ran)

    def stats(self) -> dict[str, Any]:
        """Batches by number of requests, mean sizes, waits and costs, and what was learned."""
        runs = sum(self.batches.values())
        stats: dict[str, Any] = {
            "mode": self.config.mode,
            "batches": dict(sorted(self.batches.items())),
            "waits": self.waits,
            "alone": self.alone,
            "mean_rows": self.rows / runs if runs else 0.0,
            "mean_queue_wait_ms": 1e3 * self.queue_wait / self.requests if self.requests else 0.0,
            "per_row_ms": 1e3 * self.run_time / self.rows if self.rows else 0.0,
        }
        if self.policy is not None:
            returns = self.policy.returns
            stats["limit"] = self.policy.limit
            stats["return_ms"] = None if returns.delay is None else round(returns.delay * 1e3, 3)
            stats["all_back_ms"] = (
                None if returns.all_back is None else round(returns.all_back * 1e3, 3)
            )
            stats["cost_ms"] = {
                rows: round(seconds * 1e3, 3)
                for rows, seconds in self.policy.costs.measured().items()
            }
        return stats

    async def _next_batch(self) -> list[_Pending[T, R]]:
        queue = self._queue
        while not queue or self._running >= self._instances:
            if self._running >= self._instances:  # lone callers hold every instance
                self._freed.clear()
                await self._freed.wait()
            else:
                self._arrival.clear()
                await self._arrival.wait()
        policy = self.policy
        if policy is None:
            limit = self.config.max_batch_size
            delay = self.config.max_queue_delay_ms / 1000
            deadline = queue[0].arrived + delay
        else:
            limit = policy.limit
            now = time.monotonic()
            decision = policy.wait(self._queued_rows, now - queue[0].arrived, now)
            delay = decision.seconds
            deadline = now + delay
            self.waits += delay > 0
            if decision.rows:
                limit = min(limit, decision.rows)  # wait for this many rows, no longer
        if delay > 0:
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
            if policy is not None:
                limit = policy.limit
        batch: list[_Pending[T, R]] = []
        rows = 0
        while queue and (not batch or rows + queue[0].rows <= limit):  # the head always goes
            pending = queue.popleft()
            self._queued_rows -= pending.rows
            if pending.future.done():  # its caller was cancelled while queued
                continue
            batch.append(pending)
            rows += pending.rows
        return batch


def _seconds(results: list[Any], measured: float) -> float:
    """The model's run time: what ``run`` timed (:class:`Ran`), else ``measured``."""
    return results.seconds if isinstance(results, Ran) else measured
