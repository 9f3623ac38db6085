"""millimcp.resilience.deadline: Deadline and run_with_deadline."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

import pytest

from millimcp.errors import CallTimeout, ConnectionLost
from millimcp.resilience import Deadline, Timeout, run_with_deadline


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_remaining_elapsed_expired_on_a_fake_clock() -> None:
    clock = FakeClock()
    deadline = Deadline(2.0, clock=clock)
    assert deadline.bounded
    assert deadline.expires_at == 1002.0
    assert deadline.remaining() == 2.0
    clock.now += 1.5
    assert deadline.remaining() == 0.5
    assert deadline.elapsed() == 1.5
    assert (deadline.expired,) == (False,)  # a tuple: `not` would narrow `expired` for mypy
    clock.now += 0.5
    assert deadline.expired
    assert deadline.remaining() == 0.0
    assert "timeout 2 s" in deadline.describe()


def test_no_deadline_is_unbounded() -> None:
    deadline = Deadline(None)
    assert not deadline.bounded
    assert deadline.remaining() == math.inf
    assert not deadline.expired
    assert not deadline.extend_on_progress()
    assert deadline.describe() == "no timeout"
    assert "unbounded" in repr(deadline)


def test_hard_cap_shorter_than_total_is_the_deadline() -> None:
    clock = FakeClock()
    assert Deadline(10.0, hard_cap=3.0, clock=clock).remaining() == 3.0
    assert Deadline(None, hard_cap=3.0, clock=clock).remaining() == 3.0


def test_extend_on_progress_restarts_the_window_under_the_hard_cap() -> None:
    clock = FakeClock()
    deadline = Deadline(2.0, reset_on_progress=True, hard_cap=5.0, clock=clock)
    clock.now += 1.5
    assert deadline.extend_on_progress()
    assert deadline.remaining() == 2.0  # a fresh window from now
    clock.now += 1.9
    assert deadline.extend_on_progress()
    assert deadline.remaining() == pytest.approx(1.6)  # capped: 5 s from the start
    assert deadline.expires_at == 1005.0
    clock.now += 1.0
    assert not deadline.extend_on_progress()  # already at the cap: never moves past it
    assert deadline.expires_at == 1005.0
    clock.now += 1.0
    assert deadline.expired
    assert not deadline.extend_on_progress()  # never revives an expired deadline
    assert deadline.expired
    assert "reset on progress" in deadline.describe()
    assert "hard cap 5 s" in deadline.describe()


def test_extend_is_a_no_op_without_reset_on_progress() -> None:
    clock = FakeClock()
    deadline = Deadline(2.0, clock=clock)
    clock.now += 1.0
    assert not deadline.extend_on_progress()
    assert deadline.remaining() == 1.0


def test_from_timeout_takes_the_three_settings() -> None:
    clock = FakeClock()
    timeout = Timeout(total=4.0, reset_on_progress=True, hard_cap=9.0)
    deadline = Deadline.from_timeout(timeout, clock=clock)
    assert (deadline.total, deadline.reset_on_progress, deadline.hard_cap) == (4.0, True, 9.0)
    assert deadline.remaining() == 4.0


# --- run_with_deadline (a real event loop; bounds are generous) -----------------------------


async def test_returns_the_result_in_time() -> None:
    async def quick() -> int:
        await asyncio.sleep(0)
        return 7

    assert await run_with_deadline(quick, Deadline(30.0)) == 7
    assert await run_with_deadline(quick, Deadline(None)) == 7


async def test_expiry_cancels_the_inner_coroutine_and_raises_call_timeout() -> None:
    observed: list[str] = []

    async def stuck() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            observed.append("cancelled")
            raise
        finally:
            observed.append("finally")

    started = time.monotonic()
    with pytest.raises(CallTimeout) as raised:
        await run_with_deadline(stuck, Deadline(0.05), what="tools/call 'slow'")
    assert time.monotonic() - started < 10
    assert observed == ["cancelled", "finally"]
    assert isinstance(raised.value, TimeoutError)
    assert "tools/call 'slow' timed out" in str(raised.value)
    assert "timeout 0.05 s" in str(raised.value)
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


async def test_an_error_raised_on_cancellation_becomes_the_cause() -> None:
    async def link() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            raise ConnectionLost("closed the stream") from None

    with pytest.raises(CallTimeout) as raised:
        await run_with_deadline(link, Deadline(0.02))
    assert isinstance(raised.value.__cause__, ConnectionLost)


async def test_an_expired_deadline_never_starts_the_call() -> None:
    clock = FakeClock()
    deadline = Deadline(1.0, clock=clock)
    clock.now += 2
    called: list[int] = []

    async def fn() -> None:
        called.append(1)

    with pytest.raises(CallTimeout, match="before it started"):
        await run_with_deadline(fn, deadline)
    assert called == []


async def test_progress_extends_the_running_deadline() -> None:
    """8 steps of 0.1 s, each reporting progress, under a 0.5 s window: done in ~0.8 s only
    because each step moves the expiry; the same work without reset times out."""

    def work(deadline: Deadline) -> Callable[[], Awaitable[str]]:
        async def steps() -> str:
            for _ in range(8):
                await asyncio.sleep(0.1)
                deadline.extend_on_progress()
            return "done"

        return steps

    deadline = Deadline(0.5, reset_on_progress=True, hard_cap=30.0)
    assert await run_with_deadline(work(deadline), deadline) == "done"
    assert deadline.elapsed() > 0.5
    deadline.extend_on_progress()  # after the call: harmless
    fixed = Deadline(0.5)
    with pytest.raises(CallTimeout):
        await run_with_deadline(work(fixed), fixed)


async def test_the_hard_cap_ends_a_call_that_keeps_reporting_progress() -> None:
    deadline = Deadline(0.2, reset_on_progress=True, hard_cap=0.4)

    async def chatty() -> None:
        while True:
            await asyncio.sleep(0.02)
            deadline.extend_on_progress()

    with pytest.raises(CallTimeout, match=r"hard cap 0\.4 s"):
        await run_with_deadline(chatty, deadline)
    assert 0.35 < deadline.elapsed() < 10


async def test_a_timeout_error_of_the_call_itself_is_not_a_call_timeout() -> None:
    async def fn() -> None:
        raise TimeoutError("connect timeout inside the link")

    with pytest.raises(TimeoutError) as raised:
        await run_with_deadline(fn, Deadline(30.0))
    assert not isinstance(raised.value, CallTimeout)


async def test_cancelling_the_caller_propagates_as_cancellation() -> None:
    inner: list[str] = []

    async def stuck() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            inner.append("finally")

    task = asyncio.create_task(run_with_deadline(stuck, Deadline(30.0)))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert inner == ["finally"]


# --- the shared timer (Deadline.watch) ------------------------------------------------------


async def test_calls_in_flight_share_one_timer() -> None:
    """Fifty calls under 30 s deadlines: one timer armed, for the earliest; none left after."""
    from millimcp.resilience import deadline as module

    release = asyncio.Event()

    async def waits() -> int:
        await release.wait()
        return 1

    calls = [asyncio.create_task(run_with_deadline(waits, Deadline(30.0))) for _ in range(50)]
    await asyncio.sleep(0)
    keeper = module._keeper_of(asyncio.get_running_loop())
    assert len(keeper.watches) == 50
    handle = keeper._handle
    assert handle is not None
    assert handle.when() == pytest.approx(min(w.when for w in keeper.watches) + 0.001)
    loop = asyncio.get_running_loop()
    timers = [h for h in getattr(loop, "_scheduled", ()) if not h.cancelled()]
    assert len(timers) <= 1  # asyncio's own loop: one timer for all fifty
    release.set()
    assert await asyncio.gather(*calls) == [1] * 50
    assert not keeper.watches


async def test_a_short_deadline_behind_long_ones_fires_on_time() -> None:
    release = asyncio.Event()

    async def waits() -> None:
        await release.wait()

    long = [asyncio.create_task(run_with_deadline(waits, Deadline(30.0))) for _ in range(3)]
    await asyncio.sleep(0)
    with pytest.raises(CallTimeout):
        # the timer armed for the 30 s calls must move earlier for this one
        await asyncio.wait_for(run_with_deadline(waits, Deadline(0.05)), 10)
    release.set()
    await asyncio.gather(*long)


async def test_a_call_that_swallows_the_deadline_returns_and_is_not_left_cancelled() -> None:
    async def stubborn() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return "kept going"
        return "slept"

    assert await run_with_deadline(stubborn, Deadline(0.02)) == "kept going"
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0
    await asyncio.sleep(0)  # not cancelled by a leftover request


async def test_a_cancellation_from_outside_while_expiring_stays_a_cancellation() -> None:
    async def stuck() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # the caller gives up too, while the deadline's cancel is handled
            raise

    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(run_with_deadline(stuck, Deadline(0.02)))


async def test_watch_outside_a_task_is_refused_and_unbounded_is_none() -> None:
    assert Deadline(None).watch("call") is None
    watch = Deadline(5.0).watch("tools/call", "echo")
    assert watch is not None
    assert "tools/call 'echo'" in repr(watch)
    watch.close()
    watch.close()  # idempotent
