"""The client's concurrency cap with a bounded wait queue (SEEDS S4.6).

``async with gate:`` admits up to ``Limits.max_in_flight`` calls at once; later ones wait in
FIFO order, at most ``Limits.max_queue`` of them; one more fails at once with
:class:`~millimcp.errors.QueueFull` instead of adding unbounded latency. The same mechanism as
the server's :class:`~millimcp.resilience.limiter.InFlightLimiter` (which it uses), with the
client's error: a waiter that is cancelled (its deadline passed, its caller gave up) leaves
the queue, and a slot released as a waiter is cancelled goes on to the next one, so no slot
leaks.
"""

from __future__ import annotations

from types import TracebackType

from millimcp.errors import Overloaded, QueueFull
from millimcp.resilience.limiter import ConcurrencyLimit, InFlightLimiter
from millimcp.resilience.policy import Limits

__all__ = ["CallGate"]


class CallGate:
    """Admission for one client's calls: ``async with gate: ...`` around each call.

    No await on the fast path when a slot is free; the hot path may skip the coroutines
    altogether: ``if not gate.try_enter(): await gate.enter()``, then ``gate.release()``. Use
    one gate per event loop.
    """

    __slots__ = ("_limiter", "limits")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._limiter = InFlightLimiter(
            ConcurrencyLimit(
                max_in_flight=limits.max_in_flight, max_queued=limits.max_queue, retry_after_s=0
            ),
            name="client",
        )

    def __repr__(self) -> str:
        return (
            f"<CallGate in_flight={self.in_flight}/{self.limits.max_in_flight}"
            f" queued={self.queued}/{self.limits.max_queue}>"
        )

    @property
    def in_flight(self) -> int:
        """Calls holding a slot now."""
        return self._limiter.in_flight

    @property
    def queued(self) -> int:
        """Calls waiting for a slot now."""
        return self._limiter.queued

    def try_enter(self) -> bool:
        """Take a free slot without waiting (no coroutine: the hot path); False if none.
        :meth:`release` it when the call ends."""
        return self._limiter.try_acquire()

    async def enter(self) -> None:
        """Take a slot, waiting in the queue if needed; :class:`QueueFull` when it is full.
        :meth:`release` it when the call ends."""
        limiter = self._limiter
        if limiter.try_acquire():
            return
        try:
            await limiter.acquire()
        except Overloaded:
            raise QueueFull(
                f"client concurrency cap reached: {limiter.in_flight} calls in flight "
                f"(Limits.max_in_flight={self.limits.max_in_flight}) and {limiter.queued} "
                f"waiting (Limits.max_queue={self.limits.max_queue})"
            ) from None

    def release(self) -> None:
        """Give the slot back (to the oldest waiter, if any)."""
        self._limiter.release()

    async def __aenter__(self) -> None:
        await self.enter()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._limiter.release()
