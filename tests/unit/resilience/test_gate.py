"""millimcp.resilience.gate: the client's concurrency cap and bounded FIFO wait queue."""

from __future__ import annotations

import asyncio
import random

import pytest

from millimcp.errors import QueueFull
from millimcp.resilience import CallGate, Limits


async def hold(gate: CallGate, release: asyncio.Event, log: list[str], name: str) -> None:
    async with gate:
        log.append(name)
        await release.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_cap_then_fifo_queue_then_queue_full_at_once() -> None:
    gate = CallGate(Limits(max_in_flight=2, max_queue=1))
    release = asyncio.Event()
    log: list[str] = []
    tasks = [asyncio.create_task(hold(gate, release, log, name)) for name in ("a", "b", "c")]
    await settle()
    assert (gate.in_flight, gate.queued) == (2, 1)
    assert log == ["a", "b"]
    with pytest.raises(QueueFull) as refused:
        await gate.__aenter__()
    assert "max_in_flight=2" in str(refused.value)
    assert "max_queue=1" in str(refused.value)
    assert "in_flight=2/2 queued=1/1" in repr(gate)
    release.set()
    await asyncio.gather(*tasks)
    assert log == ["a", "b", "c"]
    assert (gate.in_flight, gate.queued) == (0, 0)


async def test_zero_queue_fails_as_soon_as_the_cap_is_reached() -> None:
    gate = CallGate(Limits(max_in_flight=1, max_queue=0))
    async with gate:
        with pytest.raises(QueueFull):
            async with gate:
                pass
    async with gate:  # the slot came back
        assert gate.in_flight == 1


async def test_waiters_are_admitted_in_arrival_order() -> None:
    gate = CallGate(Limits(max_in_flight=1, max_queue=10))
    release = asyncio.Event()
    log: list[str] = []
    names = [str(n) for n in range(8)]
    tasks = []
    for name in names:
        tasks.append(asyncio.create_task(hold(gate, release, log, name)))
        await asyncio.sleep(0)
    release.set()
    await asyncio.gather(*tasks)
    assert log == names


async def test_a_cancelled_waiter_leaves_the_queue_and_the_slot_goes_to_the_next() -> None:
    gate = CallGate(Limits(max_in_flight=1, max_queue=2))
    release = asyncio.Event()
    log: list[str] = []
    first = asyncio.create_task(hold(gate, release, log, "first"))
    await settle()
    second = asyncio.create_task(hold(gate, release, log, "second"))
    third = asyncio.create_task(hold(gate, release, log, "third"))
    await settle()
    assert gate.queued == 2
    second.cancel()
    # Same instant: the queue has room again for a newcomer (the cancelled waiter is pruned).
    fourth = asyncio.create_task(hold(gate, release, log, "fourth"))
    await settle()
    assert second.cancelled()
    assert (gate.in_flight, gate.queued) == (1, 2)
    release.set()
    await asyncio.gather(first, third, fourth)
    assert log == ["first", "third", "fourth"]
    assert (gate.in_flight, gate.queued) == (0, 0)


async def test_a_slot_handed_to_a_waiter_cancelled_in_the_same_instant_passes_on() -> None:
    gate = CallGate(Limits(max_in_flight=1, max_queue=2))
    entered: list[str] = []

    async def enter(name: str) -> None:
        async with gate:
            entered.append(name)

    await gate.__aenter__()  # hold the only slot
    second = asyncio.create_task(enter("second"))
    third = asyncio.create_task(enter("third"))
    await settle()
    await gate.__aexit__(None, None, None)  # the slot goes to "second"...
    second.cancel()  # ...which is cancelled before it runs
    await asyncio.gather(second, return_exceptions=True)
    await third
    assert entered == ["third"]
    assert (gate.in_flight, gate.queued) == (0, 0)


async def test_an_error_in_the_body_gives_the_slot_back() -> None:
    gate = CallGate(Limits(max_in_flight=1, max_queue=0))
    with pytest.raises(RuntimeError):
        async with gate:
            raise RuntimeError("the call failed")
    assert gate.in_flight == 0


async def test_no_slot_leaks_under_random_cancellation() -> None:
    rng = random.Random(3)
    limits = Limits(max_in_flight=3, max_queue=5)
    gate = CallGate(limits)
    peak = 0
    refused = 0

    async def call() -> None:
        nonlocal peak, refused
        try:
            async with gate:
                peak = max(peak, gate.in_flight)
                await asyncio.sleep(rng.random() * 0.002)
        except QueueFull:
            refused += 1

    for _ in range(20):
        tasks = [asyncio.create_task(call()) for _ in range(12)]
        await asyncio.sleep(rng.random() * 0.002)
        for task in rng.sample(tasks, 4):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert (gate.in_flight, gate.queued) == (0, 0)
    assert peak == limits.max_in_flight
    assert refused > 0
    # Every slot is still there: the cap admits max_in_flight at once without waiting.
    for _ in range(limits.max_in_flight):
        await gate.__aenter__()
    assert gate.in_flight == limits.max_in_flight
