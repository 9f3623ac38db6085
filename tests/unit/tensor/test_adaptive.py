"""The adaptive batching policy against a fake cost model, in simulated time (deterministic).

The simulator plays closed-loop callers: each sends its next request ``think`` seconds after
its answer; the model runs one batch at a time and a batch of ``b`` rows costs ``cost(b)``.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from millimcp.tensor.adaptive import AdaptivePolicy, CostModel, Wait


def knee_at(rows: int, overhead: float = 0.010, per_row: float = 0.001) -> Callable[[int], float]:
    """Fixed overhead plus a cost per row up to ``rows``; past it every row costs as much as
    the whole batch at the knee per row (the device is saturated: per-row cost stops falling)."""

    def cost(b: int) -> float:
        if b <= rows:
            return overhead + per_row * b
        return (overhead + per_row * rows) / rows * b

    return cost


def back_after(seconds: float) -> Callable[[int], float]:
    """Think times: each caller sends again ``seconds`` (plus 30 us per caller) after its answer."""
    return lambda caller: seconds + 0.00003 * caller


@dataclass
class Run:
    sizes: list[int] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    """Seconds the model sat idle waiting for more requests, per batch."""
    latencies: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    """When each batch ended (simulated seconds)."""
    end: float = 0.0

    @property
    def throughput(self) -> float:
        return sum(self.sizes) / self.end

    def settled(self, batches: int) -> float:
        """Rows per second over the last ``batches`` batches (what was learned, not the
        learning)."""
        return sum(self.sizes[-batches:]) / (self.ends[-1] - self.ends[-batches - 1])


def simulate(
    policy: AdaptivePolicy,
    cost: Callable[[int], float],
    callers: int,
    batches: int,
    *,
    think: Callable[[int], float] = lambda caller: 0.0005 + 0.0001 * caller,
    start: float = 0.0,
) -> Run:
    """Run ``batches`` batches; returns what happened (sizes, idle waits, latencies)."""
    run = Run()
    now = start
    coming = [(now + 0.0001 * i, i) for i in range(callers)]
    heapq.heapify(coming)
    queue: list[tuple[float, int]] = []

    def admit(until: float) -> None:
        while coming and coming[0][0] <= until:
            at, caller = heapq.heappop(coming)
            policy.arrived(at)
            queue.append((at, caller))

    for _ in range(batches):
        if not queue:
            now = max(now, coming[0][0])
        admit(now)
        decision = policy.wait(len(queue), now - queue[0][0], now)
        limit = policy.limit
        if decision.seconds > 0:
            deadline = now + decision.seconds
            while len(queue) < decision.rows and coming and coming[0][0] <= deadline:
                admit(coming[0][0])
            waited_until = deadline if len(queue) < decision.rows else queue[-1][0]
            run.waits.append(waited_until - now)
            now = waited_until
            limit = min(policy.limit, decision.rows)
        else:
            run.waits.append(0.0)
        batch, queue[:] = queue[:limit], queue[limit:]
        took = cost(len(batch))
        now += took
        admit(now)
        policy.ran(len(batch), took, len(queue))
        policy.released(len(batch), now)
        run.sizes.append(len(batch))
        run.ends.append(now)
        for at, caller in batch:
            run.latencies.append(now - at)
            heapq.heappush(coming, (now + think(caller), caller))
    run.end = now - start
    return run


def test_a_lone_caller_never_waits_even_after_heavy_load() -> None:
    for cost, think in (
        (knee_at(8), 0.0005),
        (knee_at(1000, overhead=0.010, per_row=0.0005), 0.005),  # 32 callers merge: limit 32
    ):
        policy = AdaptivePolicy(32)
        loaded = simulate(policy, cost, callers=32, batches=300, think=back_after(think))
        assert policy.limit > 1
        alone = simulate(policy, cost, callers=1, batches=50, start=loaded.end + 1)
        assert alone.sizes == [1] * 50
        assert alone.waits == [0.0] * 50


def test_the_limit_stops_where_per_row_cost_stops_falling() -> None:
    for knee, limit in ((4, 4), (8, 8), (12, 12), (16, 15)):  # 15: the ladder's step below 16
        policy = AdaptivePolicy(32)
        simulate(policy, knee_at(knee), callers=32, batches=400)
        assert policy.limit == limit, (knee, policy)


def test_the_limit_grows_to_max_batch_size_when_batching_always_pays() -> None:
    policy = AdaptivePolicy(24)
    run = simulate(policy, knee_at(1000, overhead=0.02, per_row=0.0001), callers=32, batches=300)
    assert policy.limit == 24
    assert max(run.sizes) == 24  # never past max_batch_size


def test_no_growth_when_batching_does_not_pay() -> None:
    policy = AdaptivePolicy(32)
    run = simulate(policy, knee_at(1, overhead=0.0, per_row=0.005), callers=16, batches=200)
    assert policy.limit == 1  # tried 2, 3 and 4 rows (3 batches each), went back
    assert Counter(run.sizes)[1] >= 185


class Eager(AdaptivePolicy):
    """Learns the limit, never waits: what a fixed batcher with no queue delay does."""

    __slots__ = ()

    def wait(self, queued: int, oldest_age: float, now: float) -> Wait:
        return Wait(0.0, 0)


def test_closed_loop_callers_are_waited_for_when_that_pays() -> None:
    """Eight callers come back 0.5-1.2 ms after their answers: without waiting, the first one
    back would run alone and the rest would queue behind it."""
    policy = AdaptivePolicy(32)
    cost = knee_at(32, overhead=0.010, per_row=0.0005)
    warm = simulate(policy, cost, callers=8, batches=200)
    later = simulate(policy, cost, callers=8, batches=100, start=warm.end + 1)
    assert Counter(later.sizes).most_common(1)[0][0] == 8
    assert max(later.waits) <= cost(8)
    eager = simulate(Eager(32), cost, callers=8, batches=300)
    assert later.throughput > 1.3 * eager.throughput


def test_a_latency_objective_caps_the_batch() -> None:
    cost = knee_at(1000, overhead=0.010, per_row=0.001)  # batching always pays
    free = AdaptivePolicy(32)
    simulate(free, cost, callers=32, batches=300)
    bounded = AdaptivePolicy(32, objective=0.0305)
    run = simulate(bounded, cost, callers=32, batches=300)
    assert free.limit == 32
    assert bounded.limit <= 20  # a batch of 21 alone would miss the objective
    assert cost(max(run.sizes[-100:])) <= 0.0305
    assert max(run.sizes) < 32


def test_a_missed_objective_halves_the_limit() -> None:
    policy = AdaptivePolicy(32, objective=0.050)
    policy.limit = 16
    policy.ran(16, 0.060)  # ran 60 ms: past the 50 ms objective
    assert policy.limit == 8
    policy.ran(8, 0.010)
    assert policy.limit == 8


def test_waiting_respects_the_objective_and_what_a_run_costs() -> None:
    policy = AdaptivePolicy(32, objective=0.020)
    policy.limit = 8
    for rows in (1, 8):
        policy.costs.observe(rows, 0.010)
    policy.released(8, 1.0)
    policy.arrived(1.001)
    # back about 2 ms after the release (twice the one return seen), waited for up to 1.5x
    assert policy.wait(1, 0.0, 1.001) == Wait(pytest.approx(0.002), 8)  # type: ignore[arg-type]
    assert policy.wait(1, 0.0095, 1.001).seconds == 0  # the oldest waited: no time left
    policy.arrived(1.001)
    assert policy.wait(2, 0.0, 1.5).seconds == 0  # they would be back by now: run


def test_a_wait_is_bounded_by_what_it_saves() -> None:
    """Batches of 1 to 8 rows all cost 10 ms, 4 rows queued, 4 callers out. Two groups of 4
    taking turns serve 8 rows every 20 ms (every `back` + 10 ms when they are out longer than
    a batch); one group of 8, every `back` + 10 ms. So the 4 out are waited for when they are
    back within 10 ms of their release, never longer than the queued batch would run."""
    for back, waits in ((0.004, True), (0.009, True), (0.0105, False), (0.012, False)):
        policy = AdaptivePolicy(32)
        policy.limit = 8
        for rows in (1, 4, 8):
            policy.costs.observe(rows, 0.010)
        policy.released(4, 0.0)  # a first release teaches how soon all 4 are back: `back`
        for _ in range(3):
            policy.arrived(back / 2)
        policy.arrived(back)
        policy.released(4, 1.0)
        decision = policy.wait(4, 0.0, 1.0)
        assert (decision.seconds > 0) is waits, (back, decision)
        if waits:
            assert decision.rows == 8
            assert back <= decision.seconds <= 0.010


MEASURED_CNN = {
    1: 3.5,
    2: 7.3,
    3: 15.0,
    4: 10.4,
    6: 9.8,
    8: 14.4,
    12: 18.3,
    16: 20.2,
    24: 31,
    32: 54.8,
}
"""Milliseconds per batch of the example CNN by rows (least of 25 runs, one torch thread on
this project's 2-core VM): 2 and 3 rows cost more per row than 1, 4 and more much less."""


def measured(table: dict[int, float]) -> Callable[[int], float]:
    costs = CostModel()
    for rows, ms in table.items():
        costs.observe(rows, ms / 1000)
    return lambda rows: costs.cost(rows) or 0.0


def test_the_limit_looks_past_sizes_that_cost_more_per_row() -> None:
    """A step that does not pay is not the end when the cost curve is jagged (one row takes a
    matrix-vector path, a few rows a matrix-matrix one that only pays from 4): the limit
    looks up to four times its size (at least 3 rows) before it settles. Stopping at the first
    step that did not pay left the CNN at 1 row, where 16 cost less than half as much per row."""
    cost = measured(MEASURED_CNN)
    for callers, least in ((8, 6), (32, 12)):
        policy = AdaptivePolicy(32)
        run = simulate(policy, cost, callers=callers, batches=1000, think=back_after(0.002))
        assert policy.limit >= least, (callers, policy)
        assert run.settled(300) > 1.6 / cost(1), callers  # rows/s at 1 row a batch


CNN_PLATEAU = {
    1: 1.93,
    2: 2.41,
    4: 4.81,
    6: 5.95,
    8: 8.31,
    10: 10.58,
    12: 12.05,
    16: 14.21,
    20: 15.62,
    24: 18.41,
    32: 36.73,
}
"""The example CNN again (medians of 7 rounds of the least of 3-40 forward passes, one torch
thread, load average 0.5): about 1 ms a row from 6 to 12 rows, 0.78 ms at 20-24, 1.15 ms at
32."""


def test_the_limit_looks_past_a_plateau_of_per_row_cost() -> None:
    """From 6 rows, where it last paid, the CNN's per-row cost does not fall again before 16
    rows, and falls by a fifth only at 20-24. Looking up to twice the last size that paid
    settled on 6 (the plateau's start, 1.0 ms a row); looking up to four times reaches 22."""
    cost = measured(CNN_PLATEAU)
    for back in (0.002, 0.008):
        policy = AdaptivePolicy(32)
        run = simulate(policy, cost, callers=32, batches=1500, think=back_after(back))
        assert 20 <= policy.limit <= 27, (back, policy)
        assert run.settled(300) > 1.1 * 6 / cost(6), back  # rows/s at the plateau's start
        eager = simulate(Eager(32), cost, callers=32, batches=1500, think=back_after(back))
        assert run.settled(300) >= 0.97 * eager.settled(300), back


def test_no_waiting_for_part_of_a_group_that_makes_the_next_batch_anyway() -> None:
    """The CNN's costs, 32 callers, the limit at 18: when a batch of 18 ends with 14 queued,
    the 18 answered come back together. Waiting for 4 of them (to fill 18) left the model idle
    ~5 ms a batch; running the 14 at once lets the 18 make the next batch, as a batcher that
    never waits does (taken for two groups of 14 and 4, waiting looked worth it)."""
    cost = measured(MEASURED_CNN)
    for back in (0.002, 0.005):
        run = simulate(AdaptivePolicy(32), cost, callers=32, batches=1500, think=back_after(back))
        eager = simulate(Eager(32), cost, callers=32, batches=1500, think=back_after(back))
        assert run.settled(300) >= 0.95 * eager.settled(300), back


def test_closed_loop_groups_merge_into_full_batches() -> None:
    """32 closed-loop callers back ~5 ms after their answers, against a model whose batch
    costs 10 ms plus 0.5 ms a row. Weighing only the next batch (run the 17 queued now, or
    wait for the 15 out), the callers split into two groups that took turns for good
    (batches of 15 and 17, the limit stuck at 22); weighing both cycles they merge."""
    cost = knee_at(1000, overhead=0.010, per_row=0.0005)
    think = back_after(0.005)
    policy = AdaptivePolicy(32)
    run = simulate(policy, cost, callers=32, batches=600, think=think)
    tail = Counter(run.sizes[-200:])
    assert policy.limit == 32
    assert tail[32] >= 190, tail
    eager = simulate(Eager(32), cost, callers=32, batches=600, think=think)
    assert run.throughput > 1.1 * eager.throughput


def test_no_waiting_for_callers_who_come_back_after_the_next_batch() -> None:
    """Callers back 10 ms after their answer, batches of ~15 rows take 8 ms: the callers of
    one batch come back after the next batch has ended. Counting each arrival as a return of
    the latest batch made them look back at once, and the model sat idle ~5.6 ms a batch for
    callers who were not coming; waiting must never cost throughput against never waiting."""
    cost = knee_at(1000, overhead=0.005, per_row=0.0002)
    for callers in (8, 32):
        think = back_after(0.010)
        run = simulate(AdaptivePolicy(32), cost, callers=callers, batches=1000, think=think)
        eager = simulate(Eager(32), cost, callers=callers, batches=1000, think=think)
        assert run.throughput >= 0.99 * eager.throughput, callers


def test_waiting_never_costs_much_throughput_against_never_waiting() -> None:
    """Over cost curves, caller counts and return delays: at most 3 % below a batcher that
    never waits (the rule weighs what is left of a wait, so a group it merged may stay merged
    where splitting would have been slightly better), and well above it where waiting pays."""
    gains = []
    for cost in (knee_at(1000, 0.010, 0.0005), knee_at(1000, 0.005, 0.0002), knee_at(8)):
        for callers in (3, 8, 32):
            for back in (0.0005, 0.002, 0.005, 0.010):
                think = back_after(back)
                run = simulate(AdaptivePolicy(32), cost, callers, batches=600, think=think)
                eager = simulate(Eager(32), cost, callers, batches=600, think=think)
                gain = run.throughput / eager.throughput
                assert gain >= 0.97, (callers, back, gain)
                gains.append(gain)
    assert max(gains) > 1.4


def interfered(cost: Callable[[int], float], seed: int) -> Callable[[int], float]:
    """``cost``, but three batches in ten run up to five times as long (other processes on
    the cores, a descheduled inference thread): interference only ever adds time."""
    rng = random.Random(seed)

    def slowed(b: int) -> float:
        return cost(b) * (1 + 4 * rng.random()) if rng.random() < 0.3 else cost(b)

    return slowed


def test_interference_does_not_stop_the_limit_short() -> None:
    """A mean of run times let one stalled batch make a size look worse than the one below,
    and the limit stopped there for good: 1 to 12 on these runs, where the knee is at 8."""
    for seed in range(6):
        knee = AdaptivePolicy(32)
        simulate(knee, interfered(knee_at(8), seed), callers=32, batches=1000)
        assert knee.limit == 8, (seed, knee)
        pays = AdaptivePolicy(32)
        cost = knee_at(1000, overhead=0.005, per_row=0.0002)  # memory-bound: batching pays
        simulate(pays, interfered(cost, seed), callers=32, batches=1000)
        assert pays.limit >= 15, (seed, pays)
        never = AdaptivePolicy(32)
        simulate(never, interfered(knee_at(1, 0.0, 0.005), seed), callers=16, batches=400)
        assert never.limit <= 2, (seed, never)


def dear_past(rows: int, overhead: float, per_row: float, rise: float) -> Callable[[int], float]:
    """Like :func:`knee_at`, but past ``rows`` each row costs ``rise`` more per row beyond the
    knee (caches thrashed, memory bandwidth shared under load): larger batches cost more per
    row."""

    def cost(b: int) -> float:
        if b <= rows:
            return overhead + per_row * b
        return (overhead + per_row * rows) / rows * b * (1 + rise * (b - rows))

    return cost


def test_the_limit_steps_back_down_when_large_batches_grow_dear() -> None:
    """Batching pays up to 32 rows, then the load changes and past 8 rows every row costs
    more the larger the batch (5.6 ms a row at 32, 2.9 at 8). The sizes below the limit keep
    the least of their runs from before, cheaper per row than the limit now: the limit
    re-probes the best of them, on its own fresh runs, and steps down while that pays, to 8
    (without the rule it stayed at 32 for good). Judged on old runs as well, the probes below
    8 would pay too and the limit would sink to 5."""
    policy = AdaptivePolicy(32)
    light = simulate(policy, knee_at(1000, overhead=0.010, per_row=0.0005), 32, batches=400)
    assert policy.limit == 32
    dear = dear_past(8, overhead=0.015, per_row=0.001, rise=0.04)
    run = simulate(policy, dear, callers=32, batches=1500, start=light.end + 1)
    assert policy.limit == 8, policy
    assert run.settled(300) > 1.5 * 32 / dear(32)  # rows/s had the limit stayed at 32
    assert Counter(run.sizes[-300:])[8] >= 270
    # back at light load nothing looks cheaper below, and the limit grows again by probes
    later = simulate(policy, knee_at(1000, 0.010, 0.0005), 32, batches=1500, start=run.end + 1)
    assert policy.limit == 32, policy
    assert Counter(later.sizes[-300:])[32] >= 290


def test_a_re_probe_below_that_does_not_pay_goes_back() -> None:
    """The size below last ran cheaply under a lighter load; re-run now it costs more per row
    than the limit: the limit goes back, and the fresh runs stop it from probing again."""
    policy = AdaptivePolicy(32, probe_every=4)
    policy.limit = 16
    policy.costs.observe(8, 0.008)  # 1 ms a row, once
    for _ in range(4):
        policy.ran(16, 0.024, backlog=0)  # 1.5 ms a row at the limit now
    assert policy.limit == 8  # re-probed
    assert policy.costs.count(8) == 0  # on its own runs only
    for _ in range(3):
        policy.ran(8, 0.016, backlog=8)  # 2 ms a row now
    assert policy.limit == 16
    for _ in range(12):
        policy.ran(16, 0.024, backlog=0)
    assert policy.limit == 16  # 8 now costs more per row: no probe
    policy.costs.observe(4, 0.004)
    policy.ran(16, 0.024, backlog=0)
    assert policy.limit == 4  # another size that looks cheaper: probed too
    for _ in range(3):
        policy.ran(4, 0.005, backlog=12)  # 1.25 ms a row: pays
    assert policy.limit == 4


def test_cost_model_estimates_between_and_beyond_what_it_measured() -> None:
    costs = CostModel(window=2)
    assert costs.cost(4) is None
    assert costs.per_row(4) is None
    costs.observe(2, 0.004)
    costs.observe(8, 0.010)
    assert costs.cost(5) == pytest.approx(0.007)
    assert costs.cost(16) == pytest.approx(0.010)  # optimistic past the largest
    assert costs.cost(1) == pytest.approx(0.002)  # flat per row below the smallest
    assert costs.cautious(16) == pytest.approx(0.020)  # per row as at the largest
    assert costs.cautious(5) == pytest.approx(0.007)
    assert CostModel().cautious(3) == 0.0
    costs.observe(2, 0.008)
    assert costs.cost(2) == pytest.approx(0.004)  # the least of the recent runs
    assert costs.count(2) == 2
    costs.observe(2, 0.006)
    assert costs.cost(2) == pytest.approx(0.006)  # the first run left the window of two
    assert list(costs.measured()) == [2, 8]
    assert "8: 10.00 ms" in repr(costs)
    costs.forget(2)
    assert costs.count(2) == 0
    assert list(costs.measured()) == [8]
    assert costs.cost(2) == pytest.approx(0.0025)  # estimated again, from 8


async def test_a_lone_call_runs_in_its_own_task_and_arrivals_meanwhile_queue() -> None:
    """Adaptive mode, model idle, nobody queued: the call runs at once in the caller's task
    (no hop through a worker); calls arriving meanwhile wait for the model, then run."""
    import asyncio

    from millimcp.tensor import Batching, DynamicBatcher

    seen: list[tuple[asyncio.Task[object] | None, int]] = []
    running = 0
    most = 0
    gate = asyncio.Event()

    async def run(items: list[int]) -> list[int]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        seen.append((asyncio.current_task(), len(items)))
        await gate.wait()
        running -= 1
        return [item * 10 for item in items]

    batcher: DynamicBatcher[int, int] = DynamicBatcher(run, Batching(max_batch_size=8))
    first = asyncio.create_task(batcher.submit(1))
    await asyncio.sleep(0.01)
    assert seen == [(first, 1)]  # ran in the caller's own task
    later = [asyncio.create_task(batcher.submit(i)) for i in (2, 3, 4)]
    await asyncio.sleep(0.01)
    assert len(seen) == 1  # the model is busy: they queue, nothing runs beside it
    gate.set()
    assert await asyncio.gather(first, *later) == [10, 20, 30, 40]
    assert most == 1
    assert seen[1][0] is not first
    assert sum(size for _, size in seen) == 4
    assert batcher.waits == 0
    await batcher.close()
