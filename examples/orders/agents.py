"""The demo's agents: LLM agents that think between answers, and the client's cap, timed.

The lab's agents (:func:`millimcp.lab.scenario_runner.run_agents`) run a closed loop with no
pause: each starts its next iteration the moment its last one ends. That saturates any server,
so the latency it measures is ``agents / throughput`` (Little's law), set by the queue and not
by the service. The article's agents are LLM agents (S6.4's after-state has the server at 35%
of its CPU: its load did not saturate it): between two answers, and their five tool calls,
the model takes a turn of its own. :func:`run_agents` here runs the same loop with a **think
time** after each iteration: drawn from an exponential distribution of mean ``think_s`` (the
negative-exponential think time of TPC-C, capped at ten times the mean), seeded per agent,
and a first pause drawn uniformly from zero to the mean, so that the agents do not all start
at once.

The tuned client's cap (S6.3: ``Semaphore(30)``) is applied here, in front of the client, as
the article's agent code applies it: a call waits for one of the semaphore's slots, then goes
to the client. :class:`AgentSteps` times both: the per-call samples the lab records (its step
series) run from sending the call to its answer, and ``asked_ms`` holds, per call name, the
agent's own view, from asking (queued behind the cap included) to the answer. Without a cap the
two are the same.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING

from millimcp.lab.scenario_format import IterationContext
from millimcp.lab.scenario_runner import StepRunner, Ticket

if TYPE_CHECKING:
    from millimcp.lab.scenario_format import Call, Scenario
    from millimcp.lab.scenario_runner import Schedule

__all__ = ["THINK_S", "AgentSteps", "run_agents", "think_pause"]

THINK_S = 8.0
"""Mean think time (s) after each iteration, by default: what the article's own after-state
implies. Its tuned client holds at most 30 calls in flight (``Semaphore(30)``) and its calls
took 245 ms on average, so by Little's law its 200 agents made at most 30 / 0.245 s = 122
calls a second: each agent at most one call every 1.6 s, an iteration of five calls every
8.2 s or more, of which the calls themselves take a few hundred milliseconds. The rest is the
model's turns: here three per answer (after the order, after the recommendations, after the
profiles), about 2.7 s each, in the range of an LLM's turn."""
THINK_CAP = 10.0
"""A pause is at most this many times the mean (TPC-C's cap)."""


def think_pause(rng: random.Random, mean_s: float) -> float:
    """One think time: exponential of mean ``mean_s``, at most ``THINK_CAP`` times it."""
    if mean_s <= 0:
        return 0.0
    return min(rng.expovariate(1.0 / mean_s), THINK_CAP * mean_s)


class AgentSteps(StepRunner):
    """The lab's steps, with a cap (an ``asyncio.Semaphore``) in front of the clients that
    have one (``caps``: by ``id(client)``), and each successful call's time from asking to
    its answer recorded in :attr:`asked_ms` (by ``id(outcome)``, then call name)."""

    def __init__(self, scenario: Scenario, caps: dict[int, asyncio.Semaphore]) -> None:
        super().__init__(scenario)
        self.caps = caps
        self.asked_ms: dict[int, dict[str, list[float]]] = {}

    async def call(self, ticket: Ticket, call: Call, context: IterationContext) -> str | None:
        cap = self.caps.get(id(ticket.client))
        if cap is None:
            return await super().call(ticket, call, context)
        asked = time.perf_counter()
        async with cap:
            kind = await super().call(ticket, call, context)
        outcome = ticket.outcome
        if outcome is not None and kind is None:
            samples = self.asked_ms.setdefault(id(outcome), {}).setdefault(call.name, [])
            samples.append((time.perf_counter() - asked) * 1000.0)
        return kind


async def run_agents(
    scenario: Scenario,
    schedule: Schedule,
    *,
    concurrency: int,
    think_s: float,
    caps: dict[int, asyncio.Semaphore],
    seed: int | None = None,
) -> AgentSteps:
    """``concurrency`` agents on ``schedule`` until each is refused a ticket, each pausing
    :func:`think_pause` after each iteration (and up to ``think_s`` before its first). Agent
    ``i`` draws its arguments from ``Random(f"{seed}:{i}")`` as the lab's agents do, its
    pauses from a generator of their own. Once one agent is refused a ticket, the schedule is
    over: the agents still thinking, or in an iteration that is not recorded, are cancelled
    rather than waited for (a pause may last ten means, a naive iteration its calls'
    timeouts); those in a recorded iteration finish it. Returns the steps (their
    :attr:`AgentSteps.asked_ms`)."""
    steps = AgentSteps(scenario, caps)
    seed = scenario.seed if seed is None else seed
    over = asyncio.Event()
    current: list[Ticket | None] = [None] * concurrency
    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(_agent(steps, schedule, index, seed, think_s, over, current))
            for index in range(concurrency)
        ]
        await over.wait()  # the schedule is over: what is left is not recorded
        for task, ticket in zip(tasks, current, strict=True):
            if ticket is None or ticket.outcome is None:
                task.cancel()  # thinking (up to ten means), or in an unrecorded iteration
    return steps


async def _agent(
    steps: AgentSteps,
    schedule: Schedule,
    index: int,
    seed: int | None,
    think_s: float,
    over: asyncio.Event,
    current: list[Ticket | None],
) -> None:
    rng = random.Random(f"{seed}:{index}") if seed is not None else random.Random()
    pauses = random.Random(f"{seed}:think:{index}") if seed is not None else random.Random()
    variables = steps.scenario.vars
    iteration = 0
    pause = pauses.uniform(0.0, think_s) if think_s > 0 else 0.0
    try:
        while True:
            if pause:
                await asyncio.sleep(pause)
            ticket = schedule.claim(index, iteration, time.perf_counter())
            if ticket is None:
                return
            current[index] = ticket
            context = IterationContext({}, {}, index, iteration, rng, variables)
            kind = await steps.iterate(ticket, context)
            current[index] = None
            schedule.ended(ticket, kind, time.perf_counter())
            iteration += 1
            pause = think_pause(pauses, think_s)
    finally:
        current[index] = None
        over.set()  # refused (the schedule's end) or stopped otherwise: the run is over
