"""Backpressure: at most ``limit`` calls run, at most ``queue`` wait, the rest are refused.

An unbounded queue turns a burst into latency for everyone (every queued call waits for all
the ones ahead of it, and their clients have often given up already). A bounded one keeps the
latency of accepted calls near ``service time x (1 + queue / limit)`` and refuses the excess
at once with :class:`~millimcp.errors.Overloaded` (HTTP 503 + ``Retry-After``), which a client
can retry elsewhere or later.

Size the limit from Little's law (SEEDS S4.5): slots = downstream latency x target rate x a
burst factor, e.g. ``limit_for(0.05, 200, burst=1.5) == 15``. "Cores x 4" is the wrong unit:
an async tool waiting on I/O holds a slot, not a core.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass

from millimcp.errors import ConfigurationError, Overloaded

__all__ = ["ConcurrencyLimit", "InFlightLimiter", "limit_for"]


def limit_for(latency_s: float, qps: float, burst: float = 1.5) -> int:
    """In-flight slots for a target rate: ``ceil(latency_s x qps x burst)``, at least 1.

    ``latency_s`` is how long one call holds its slot (its downstream latency), ``qps`` the
    rate the server must sustain, ``burst`` the headroom for bursts (1.5-2 is typical).
    """
    if latency_s <= 0 or qps <= 0 or burst < 1:
        raise ConfigurationError("limit_for needs latency_s > 0, qps > 0 and burst >= 1")
    return max(1, math.ceil(latency_s * qps * burst - 1e-9))


@dataclass(frozen=True, slots=True)
class ConcurrencyLimit:
    """How many calls may run at once, how many may wait, and what a refused caller is told."""

    max_in_flight: int = 100
    """Calls running at once (see :func:`limit_for`)."""
    max_queued: int = 100
    """Calls waiting for a slot; one more is refused with HTTP 503."""
    retry_after_s: int = 1
    """Seconds a refused client is told to wait (``Retry-After``)."""

    def __post_init__(self) -> None:
        if self.max_in_flight < 1 or self.max_queued < 0 or self.retry_after_s < 0:
            raise ConfigurationError(
                "ConcurrencyLimit needs max_in_flight >= 1, max_queued >= 0, retry_after_s >= 0"
            )


class InFlightLimiter:
    """A counting semaphore with a bounded FIFO wait queue; refuses instead of queueing more.

    ``acquire()`` returns at once when a slot is free (no await on the fast path), waits in
    FIFO order when the queue has room, and raises :class:`Overloaded` otherwise. A waiter
    that is cancelled (its client left) leaves the queue. ``release()`` hands the slot
    straight to the oldest waiter. Use one limiter per event loop.

    The hot path needs no method call (:attr:`free`): ``if limiter.free: limiter.free -= 1``
    else ``await limiter.acquire()``; and to give the slot back, ``if limiter.free:
    limiter.free += 1`` else ``limiter.release()``. This holds because a call only waits when
    no slot is free, and a slot given back while calls wait goes to one of them: while anyone
    waits, :attr:`free` is 0.
    """

    __slots__ = ("_max", "_waiters", "free", "limit", "name")

    def __init__(self, limit: ConcurrencyLimit, name: str = "server") -> None:
        self.limit = limit
        self.name = name
        self._max = limit.max_in_flight
        self.free = self._max
        """Slots free now (``max_in_flight - in_flight``); 0 whenever a call waits."""
        self._waiters: deque[asyncio.Future[None]] = deque()

    def __repr__(self) -> str:
        return (
            f"<InFlightLimiter {self.name} in_flight={self.in_flight}/{self.limit.max_in_flight}"
            f" queued={len(self._waiters)}/{self.limit.max_queued}>"
        )

    @property
    def in_flight(self) -> int:
        """Calls holding a slot."""
        return self._max - self.free

    @property
    def queued(self) -> int:
        return len(self._waiters)

    def try_acquire(self) -> bool:
        """Take a free slot without waiting (no coroutine); False if none."""
        if self.free:
            self.free -= 1
            return True
        return False

    async def acquire(self) -> None:
        """Take a slot, waiting in the queue if needed; :class:`Overloaded` when it is full."""
        if self.try_acquire():
            return
        if len(self._waiters) >= self.limit.max_queued and not self._prune_cancelled():
            raise Overloaded(
                f"Server overloaded: {self.name} has {self.in_flight} calls running and "
                f"{len(self._waiters)} waiting; retry after {self.limit.retry_after_s} s",
                {"retryAfterMs": self.limit.retry_after_s * 1000},
                retry_after_s=self.limit.retry_after_s,
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # release() hands its slot over: in_flight already counts us
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot arrived as we were cancelled: pass it on
            elif waiter in self._waiters:  # release() may have dropped it already
                self._waiters.remove(waiter)
            raise

    def _prune_cancelled(self) -> bool:
        """Drop waiters cancelled this instant (they leave the queue only when their task next
        runs); whether that made room."""
        live = deque(waiter for waiter in self._waiters if not waiter.done())
        if len(live) == len(self._waiters):
            return False
        self._waiters = live
        return len(live) < self.limit.max_queued

    def release(self) -> None:
        """Give a slot back: to the oldest live waiter, else to the pool."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1
