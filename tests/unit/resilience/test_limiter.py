"""millimcp.resilience.limiter: bounded in-flight work, a bounded FIFO queue, refusal beyond."""

from __future__ import annotations

import asyncio

import pytest

from millimcp.errors import ConfigurationError, Overloaded, ProtocolError
from millimcp.resilience import ConcurrencyLimit, InFlightLimiter, limit_for


def test_limit_for_is_littles_law_with_burst_headroom() -> None:
    assert limit_for(0.05, 200, burst=1.0) == 10  # SEEDS S4.5: 50 ms x 200 QPS = 10 slots
    assert limit_for(0.05, 200) == 15
    assert limit_for(0.05, 200, burst=2.0) == 20
    assert limit_for(0.001, 1) == 1  # never zero
    assert limit_for(0.03, 100, burst=1.0) == 3  # 2.9999999999999996 is 3, not 4
    for bad in ((0, 1, 1.5), (1, 0, 1.5), (1, 1, 0.5)):
        with pytest.raises(ConfigurationError):
            limit_for(*bad)


def test_concurrency_limit_validates() -> None:
    with pytest.raises(ConfigurationError):
        ConcurrencyLimit(max_in_flight=0)
    with pytest.raises(ConfigurationError):
        ConcurrencyLimit(max_queued=-1)


def test_overloaded_is_a_503_protocol_error() -> None:
    exc = Overloaded("busy", retry_after_s=3)
    assert isinstance(exc, ProtocolError)
    assert (exc.code, exc.http_status, exc.retry_after_s) == (-32050, 503, 3)


async def test_fast_path_queue_then_refusal() -> None:
    limiter = InFlightLimiter(ConcurrencyLimit(max_in_flight=2, max_queued=1, retry_after_s=2))
    await limiter.acquire()
    await limiter.acquire()
    assert limiter.in_flight == 2
    waiting = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    assert limiter.queued == 1
    assert not waiting.done()
    with pytest.raises(Overloaded) as refused:
        await limiter.acquire()
    assert refused.value.retry_after_s == 2
    assert refused.value.data == {"retryAfterMs": 2000}
    limiter.release()  # the slot goes straight to the waiter
    await waiting
    assert (limiter.in_flight, limiter.queued) == (2, 0)
    assert not limiter.try_acquire()
    limiter.release()
    limiter.release()
    assert limiter.in_flight == 0
    assert "in_flight=0/2" in repr(limiter)
    assert limiter.try_acquire()
    assert limiter.in_flight == 1


async def test_waiters_are_served_in_order() -> None:
    limiter = InFlightLimiter(ConcurrencyLimit(max_in_flight=1, max_queued=10))
    order: list[int] = []

    async def worker(n: int) -> None:
        await limiter.acquire()
        order.append(n)
        await asyncio.sleep(0)
        limiter.release()

    await limiter.acquire()
    tasks = [asyncio.create_task(worker(n)) for n in range(5)]
    await asyncio.sleep(0)
    limiter.release()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert (limiter.in_flight, limiter.queued) == (0, 0)


async def test_a_cancelled_waiter_leaves_the_queue_and_loses_no_slot() -> None:
    limiter = InFlightLimiter(ConcurrencyLimit(max_in_flight=1, max_queued=2))
    await limiter.acquire()
    gone = asyncio.create_task(limiter.acquire())
    stays = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    assert limiter.queued == 1
    limiter.release()
    await stays
    assert limiter.in_flight == 1
    # Cancelled just as the slot was handed over: the slot passes on, not lost.
    late = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    limiter.release()  # hands the slot to `late`...
    late.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await late
    assert (limiter.in_flight, limiter.queued) == (0, 0)


async def test_free_is_zero_while_a_call_waits_so_the_lock_free_path_is_safe() -> None:
    """The hot path's protocol (InFlightLimiter.free): take with ``free -= 1`` when free, give
    back with ``free += 1`` when free; else acquire()/release(), which serve the waiters."""
    limiter = InFlightLimiter(ConcurrencyLimit(max_in_flight=1, max_queued=2))
    assert limiter.free == 1
    limiter.free -= 1  # the hot path's take
    waiting = asyncio.create_task(limiter.acquire())
    gone = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    assert (limiter.free, limiter.queued, limiter.in_flight) == (0, 2, 1)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    assert limiter.free == 0  # still waited on
    if limiter.free:  # the hot path's give-back: not taken, a call waits
        limiter.free += 1
    else:
        limiter.release()
    await asyncio.wait_for(waiting, 10)  # the slot went straight to the waiter
    assert (limiter.free, limiter.queued) == (0, 0)
    limiter.release()
    assert (limiter.free, limiter.in_flight) == (1, 0)
