"""Closed and open loops over slots: the scheduling shared by the lean and full generators.

A *slot* carries one call at a time (a connection, a Client worker). :class:`Loop` decides
when each slot sends its next call:

- **closed**: each slot sends its next call as soon as the previous one is answered; latency
  runs from the send. A server stall delays only the calls in flight and the ones never sent
  are not measured at all, so the percentiles hide it (coordinated omission).
- **open**: calls are due on a fixed schedule (``rate`` per second); a due call goes out on an
  idle slot or waits in a queue, and its latency runs from the time it was *due*, so queueing
  behind a stall is counted.

Only calls sent (closed) or due (open) after the warmup count; after the window no new call
starts, and those in flight or queued are waited for (up to the timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from millimcp.lab.recording import Recorder, TickReport

__all__ = ["Loop", "Plan", "Ready", "Slot", "measure", "run_event_loop"]

_DRAIN_GRACE_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class Plan:
    """One process's share of a run.

    ``start_ns`` is the ``time.perf_counter_ns()`` at which the warmup begins (all processes
    of a run agree on it); the measured window opens ``warmup_s`` later and lasts
    ``duration_s``, or until ``requests`` measured calls are sent (closed) or due (open).
    Open loop: this process's calls are due ``rate`` times per second, the first ``phase_s``
    after ``start_ns`` (of P processes sharing a total rate R, each gets R / P and process k
    starts k / R late: together they make one schedule of R per second).
    """

    mode: Literal["closed", "open"]
    concurrency: int
    duration_s: float | None = 10.0
    requests: int | None = None
    warmup_s: float = 0.0
    rate: float | None = None
    phase_s: float = 0.0
    timeout_s: float | None = 30.0
    tick_s: float = 1.0


class Slot:
    """Something that can carry one call at a time (a connection, a Client worker)."""

    __slots__ = ()

    def start(self, t0: int) -> None:
        raise NotImplementedError


class Loop:
    """Closed or open scheduling over slots, shared by the lean and full generators."""

    def __init__(self, plan: Plan, recorder: Recorder) -> None:
        self.plan = plan
        self.recorder = recorder
        self.loop = asyncio.get_running_loop()
        self.closed_loop = plan.mode == "closed"
        self.idle: list[Slot] = []
        self.queue: deque[int] = deque()
        self.in_flight = 0
        self.stopping = False
        self.drained = asyncio.Event()
        self.start_ns = 0
        self.window_ns = 0
        self.window_end_ns: int | None = None
        self.sent = 0  # measured calls started (closed) or due (open)
        self._due = 0
        self._arrivals = 0
        self._first_due = 0
        self._interval_ns = 0.0
        self._timers: dict[str, asyncio.TimerHandle] = {}

    # the schedule

    def begin(self, slots: list[Slot], start_ns: int) -> None:
        plan = self.plan
        self.start_ns = start_ns
        self.window_ns = start_ns + int(plan.warmup_s * 1e9)
        if plan.duration_s is not None:
            self.window_end_ns = self.window_ns + int(plan.duration_s * 1e9)
        now = time.perf_counter_ns()
        if self.closed_loop:
            if self.window_end_ns is not None:
                self._later("stop", self.window_end_ns - now, self._stop)
            for slot in slots:
                self.ready(slot, time.perf_counter_ns())
            return
        self.idle.extend(slots)
        if not plan.rate or plan.rate <= 0:
            raise ValueError("an open loop needs a rate above 0")
        self._interval_ns = 1e9 / plan.rate
        self._first_due = start_ns + int(plan.phase_s * 1e9)
        warm = max(0, math.ceil((self.window_ns - self._first_due) / self._interval_ns))
        if plan.requests is not None:
            self._arrivals = warm + plan.requests
        else:
            assert self.window_end_ns is not None
            self._arrivals = max(
                0, math.ceil((self.window_end_ns - self._first_due) / self._interval_ns)
            )
        self._later("arrive", self._first_due - now, self._arrive)

    def _later(self, name: str, delay_ns: int | float, callback: Callable[[], None]) -> None:
        self._timers[name] = self.loop.call_later(max(0.0, delay_ns / 1e9), callback)

    def _arrive(self) -> None:
        now = time.perf_counter_ns()
        window = self.window_ns
        while self._due < self._arrivals:
            due = self._first_due + int(self._due * self._interval_ns)
            if due > now:
                self._later("arrive", due - now, self._arrive)
                return
            self._due += 1
            if due >= window:
                self.sent += 1
            if self.idle:
                self._send(self.idle.pop(), due)
            else:
                self.queue.append(due)
        self._stop()

    def _stop(self) -> None:
        self.stopping = True
        self._check_drained()

    def _check_drained(self) -> None:
        if self.stopping and self.in_flight == 0 and not self.queue:
            self.drained.set()

    def _send(self, slot: Slot, t0: int) -> None:
        self.in_flight += 1
        slot.start(t0)

    # slots report back

    def finished(self, slot: Slot, t0: int, kind: str | None) -> None:
        """``slot``'s call that was due/sent at ``t0`` ended (``kind`` None: success)."""
        now = time.perf_counter_ns()
        self.in_flight -= 1
        if t0 >= self.window_ns:
            if kind is None:
                self.recorder.batch.append(now - t0)
            else:
                self.recorder.tick_errors[kind] += 1
        self.ready(slot, now)

    def failed(self, t0: int, kind: str) -> None:
        """A call ended without its slot (the slot is gone: a broken connection)."""
        self.in_flight -= 1
        if t0 >= self.window_ns:
            self.recorder.tick_errors[kind] += 1
        self._check_drained()

    def ready(self, slot: Slot, now: int) -> None:
        """``slot`` can carry a call: the next one, or it waits."""
        if self.closed_loop:
            if not self.stopping:
                if now >= self.window_ns:
                    self.sent += 1
                    if self.plan.requests is not None and self.sent >= self.plan.requests:
                        self.stopping = True
                self._send(slot, now)
                return
        elif self.queue:
            self._send(slot, self.queue.popleft())
            return
        self.idle.append(slot)
        self._check_drained()

    async def run(self, on_tick: Callable[[TickReport], None]) -> float:
        """Tick until drained (or the drain limit passed); the window's length in seconds."""
        plan = self.plan
        tick_ns = int(plan.tick_s * 1e9)
        limit_ns = int(((plan.timeout_s or 30.0) + _DRAIN_GRACE_S) * 1e9)
        stopped_at: int | None = None
        second = 0
        while not self.drained.is_set():
            next_tick = self.window_ns + (second + 1) * tick_ns
            wait_s = (next_tick - time.perf_counter_ns()) / 1e9
            if wait_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.drained.wait(), wait_s)
            now = time.perf_counter_ns()
            if now >= next_tick:
                on_tick(self.recorder.tick(second))
                second += 1
            if self.stopping and stopped_at is None:
                stopped_at = now
            if stopped_at is not None and now - stopped_at > limit_ns:
                break
        end = time.perf_counter_ns()
        for timer in self._timers.values():
            timer.cancel()
        last = second
        if self.window_end_ns is not None:  # the drain's stragglers join the window's last tick
            last = min(
                second, max(0, math.ceil((self.window_end_ns - self.window_ns) / tick_ns) - 1)
            )
        on_tick(self.recorder.tick(last))
        if self.window_end_ns is not None:
            return (self.window_end_ns - self.window_ns) / 1e9
        return max(0.0, (end - self.window_ns) / 1e9)

    def abandon(self) -> None:
        """Count what never finished (after the drain limit) as timeouts."""
        window = self.window_ns
        for t0 in self.queue:
            if t0 >= window:
                self.recorder.errors["timeout"] += 1
        self.queue.clear()


@dataclass(slots=True)
class Ready:
    """A generator that is connected and waits for its start time."""

    go: Callable[[int], Any]
    """``await ready.go(start_ns)``: run the plan from ``start_ns``; returns the report."""
    close: Callable[[], Any]


async def measure(
    engine: Loop, slots: list[Slot], start_ns: int, on_tick: Callable[[TickReport], None]
) -> tuple[float, float]:
    """Run the plan with the collector paused (the hot path allocates little); returns the
    window's length and this process's CPU seconds over it."""
    gc.collect()
    gc.disable()
    cpu0 = time.process_time()
    try:
        engine.begin(slots, start_ns)
        window_s = await engine.run(on_tick)
    finally:
        gc.enable()
    cpu_s = time.process_time() - cpu0
    if engine.in_flight or engine.queue:
        engine.abandon()
        engine.recorder.errors["timeout"] += max(0, engine.in_flight)
    return window_s, cpu_s


def run_event_loop(main: Any) -> Any:
    """Run a coroutine on uvloop when it is installed (cheaper per call), else asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
