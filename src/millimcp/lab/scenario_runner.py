"""Running a scenario: virtual agents in a closed loop, and when their iterations are recorded.

Each of ``concurrency`` agents runs the scenario's steps (:class:`StepRunner`) again and again,
starting its next iteration when the last one ends. Before each iteration it asks a
:class:`Schedule` for a :class:`Ticket`: the client to call through and, when the iteration is
recorded, the :class:`ScenarioOutcome` it records into; no ticket, and the agent stops.
:func:`run_agents` runs agents on any schedule.

:func:`run_scenario` runs them on one :class:`Window`: a warm-up (unrecorded), then a
recording window (a duration, or a number of iterations), and then

- without a cooldown, no new iteration starts: the last recorded ones finish on an emptying
  server, faster than under load (a bias that grows as the window gets short next to an
  iteration);
- with ``cooldown=True``, the agents keep the load on, starting iterations that are run but
  not recorded, until every recorded iteration has ended: every recorded iteration runs
  under the load being measured, from its start to its end.

An iteration fails at the first step that fails (an exception, ``isError: true``, or a
reference its result cannot satisfy); the calls of a fan-out all finish first. Failures are
counted by kind (:func:`millimcp.lab.results.error_kind`, ``tool_error``, ``reference``).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from millimcp.errors import ConfigurationError
from millimcp.lab.results import TOOL_ERROR, error_kind
from millimcp.lab.scenario_format import (
    Call,
    IterationContext,
    ReferenceFailed,
    Scenario,
)

if TYPE_CHECKING:
    from millimcp.client import Client, ToolResult

__all__ = [
    "REFERENCE_ERROR",
    "ScenarioOutcome",
    "Schedule",
    "StepRunner",
    "StepSeries",
    "Ticket",
    "Window",
    "run_agents",
    "run_scenario",
]

REFERENCE_ERROR = "reference"
"""The error kind of arguments that could not be built from earlier results."""


@dataclass(slots=True)
class StepSeries:
    """What one step (a call, or a named fan-out) saw while recording."""

    samples_ms: list[float] = field(default_factory=list)
    """Latencies of the successful calls, in milliseconds."""
    errors: Counter[str] = field(default_factory=Counter)
    """Failures by kind: an exception's kind, ``tool_error``, ``reference``."""

    @property
    def calls(self) -> int:
        return len(self.samples_ms)


@dataclass(slots=True)
class ScenarioOutcome:
    """The recorded part of a scenario run (warm-up and cooldown iterations left out).

    Times are seconds after recording began.
    """

    scenario: Scenario
    concurrency: int
    warmup_s: float
    duration_s: float = 0.0
    """From the end of the warm-up to the last recorded iteration's end; with a cooldown and a
    duration, the recording window itself (the iterations that started in it)."""
    cooldown: bool = False
    """The load stayed on until the recorded iterations ended."""
    latencies_ms: list[float] = field(default_factory=list)
    """End-to-end latency of each successful iteration, in the order they ended."""
    ended_s: list[float] = field(default_factory=list)
    """When each successful iteration ended."""
    started_s: list[float] = field(default_factory=list)
    """When each successful iteration started."""
    errors: Counter[str] = field(default_factory=Counter)
    """Failed iterations by the kind of their first failure."""
    failed_s: list[float] = field(default_factory=list)
    """When each failed iteration ended."""
    failed_started_s: list[float] = field(default_factory=list)
    """When each failed iteration started."""
    steps: dict[str, StepSeries] = field(default_factory=dict)
    first_error: dict[str, str] = field(default_factory=dict)
    """The message of the first failure of each kind (``"recs: InvalidParams: ..."``)."""

    @classmethod
    def empty(cls, scenario: Scenario, concurrency: int, warmup_s: float) -> ScenarioOutcome:
        """An outcome with a series for each of ``scenario``'s steps, nothing recorded."""
        steps = {name: StepSeries() for name in scenario.stat_names}
        return cls(scenario, concurrency, warmup_s, steps=steps)

    @property
    def iterations(self) -> int:
        """Successful iterations."""
        return len(self.latencies_ms)

    @property
    def throughput(self) -> float:
        """Successful iterations per second."""
        return self.iterations / self.duration_s if self.duration_s > 0 else 0.0


# -- the schedule -----------------------------------------------------------------------------


@dataclass(slots=True)
class Ticket:
    """One iteration's assignment: the client it calls through, and where it is recorded."""

    client: Client
    outcome: ScenarioOutcome | None
    """Where the iteration and its steps are recorded; None: run, not recorded."""
    started: float
    """When it started (``time.perf_counter()``)."""
    agent: int
    iteration: int
    """The agent's iteration number (from 0)."""
    window: Window | None = None
    """The :class:`Window` that issued it, if one did."""


class Schedule(Protocol):
    """When the agents run, through which client, and which iterations are recorded."""

    def claim(self, agent: int, iteration: int, now: float) -> Ticket | None:
        """The ticket of the iteration ``agent`` would start ``now``; None: it stops."""

    def ended(self, ticket: Ticket, kind: str | None, now: float) -> None:
        """``ticket``'s iteration ended ``now`` (``kind``: its failure, None: success)."""


class Window:
    """One client's recording window (the schedule of :func:`run_scenario`).

    Until :meth:`open` is called, and before the time it gives, iterations run unrecorded (a
    warm-up). From then on, the iterations that start within ``duration_s`` (or the first
    ``iterations`` of them) are recorded into ``outcome``; after that, the agents stop, or
    with ``cooldown`` go on (unrecorded) until every recorded iteration has ended.
    """

    def __init__(
        self,
        client: Client,
        outcome: ScenarioOutcome,
        *,
        duration_s: float | None = None,
        iterations: int | None = None,
        cooldown: bool = False,
    ) -> None:
        if (duration_s is None) == (iterations is None):
            raise ConfigurationError("give a duration or a number of iterations, not both")
        self.client = client
        self.outcome = outcome
        self.duration_s = duration_s
        self.iterations = iterations
        self.cooldown = cooldown
        outcome.cooldown = cooldown
        self.record_from = math.inf
        self.record_to = math.inf
        self.claimed = 0
        self.in_flight = 0
        """Iterations started on this window and not ended (recorded or not)."""
        self.recorded_in_flight = 0
        self.first_start: float | None = None
        """When the first recorded iteration started."""
        self.last_end: float | None = None
        """When the last recorded iteration ended."""

    def __repr__(self) -> str:
        return (
            f"<Window claimed={self.claimed} in_flight={self.in_flight} "
            f"recorded_in_flight={self.recorded_in_flight}>"
        )

    @property
    def opened(self) -> bool:
        return self.record_from != math.inf

    def open(self, record_from: float) -> None:
        """Record the iterations that start from ``record_from`` on (``perf_counter`` time)."""
        self.record_from = record_from
        if self.duration_s is not None:
            self.record_to = record_from + self.duration_s

    def recording(self, now: float) -> bool:
        """Whether an iteration starting ``now`` is recorded."""
        if now < self.record_from:
            return False
        if self.iterations is not None:
            return self.claimed < self.iterations
        return now < self.record_to

    def over(self, now: float) -> bool:
        """Past the window, with every recorded iteration ended."""
        return now >= self.record_from and not self.recording(now) and not self.recorded_in_flight

    def claim(self, agent: int, iteration: int, now: float) -> Ticket | None:
        recorded = self.recording(now)
        if recorded:
            self.claimed += 1
            self.recorded_in_flight += 1
            if self.first_start is None:
                self.first_start = now
        elif now >= self.record_from and not (self.cooldown and self.recorded_in_flight):
            return None
        self.in_flight += 1
        outcome = self.outcome if recorded else None
        return Ticket(self.client, outcome, now, agent, iteration, self)

    def ended(self, ticket: Ticket, kind: str | None, now: float) -> None:
        self.in_flight -= 1
        outcome = ticket.outcome
        if outcome is None:
            return
        self.recorded_in_flight -= 1
        self.last_end = now if self.last_end is None else max(self.last_end, now)
        started, ended = ticket.started - self.record_from, now - self.record_from
        if kind is None:
            outcome.latencies_ms.append((now - ticket.started) * 1000.0)
            outcome.ended_s.append(ended)
            outcome.started_s.append(started)
        else:
            outcome.errors[kind] += 1
            outcome.failed_s.append(ended)
            outcome.failed_started_s.append(started)

    def close(self, now: float) -> None:
        """The run is over (at ``now``): the outcome's duration."""
        if not self.opened:
            return
        if self.cooldown and self.duration_s is not None:
            self.outcome.duration_s = self.duration_s
        else:  # to the last recorded end (a cooldown's unrecorded tail is not counted)
            end = self.last_end if self.cooldown and self.last_end is not None else now
            self.outcome.duration_s = max(end - self.record_from, 0.0)


# -- the agents -------------------------------------------------------------------------------


class StepRunner:
    """Runs one iteration of a scenario's steps through a ticket's client, recording each
    step into the ticket's outcome when it has one."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    async def iterate(self, ticket: Ticket, context: IterationContext) -> str | None:
        """One pass over the steps; the kind of the first failure, or None. Steps started
        as tasks run on while the next ones do; the iteration waits for them at its end."""
        background: list[asyncio.Task[str | None]] = []  # as_task steps still running
        try:
            kind = await self._steps(ticket, context, background)
        finally:
            ended = await asyncio.gather(*background)
        return kind or next((found for found in ended if found is not None), None)

    async def _steps(
        self, ticket: Ticket, context: IterationContext, background: list[asyncio.Task[Any]]
    ) -> str | None:
        outcome = ticket.outcome
        for step in self.scenario.steps:
            if isinstance(step, Call) and step.as_task:
                background.append(asyncio.ensure_future(self.call(ticket, step, context)))
                continue
            if isinstance(step, Call):
                kind = await self.call(ticket, step, context)
            else:
                started = time.perf_counter()
                kinds = await asyncio.gather(
                    *(self.call(ticket, call, context) for call in step.calls)
                )
                kind = next((found for found in kinds if found is not None), None)
                if outcome is not None and step.name is not None:
                    series = outcome.steps[step.name]
                    if kind is None:
                        series.samples_ms.append((time.perf_counter() - started) * 1000.0)
                    else:
                        series.errors[kind] += 1
            if kind is not None:
                return kind
        return None

    async def call(self, ticket: Ticket, call: Call, context: IterationContext) -> str | None:
        """One tool call; the kind of its failure, or None."""
        try:
            arguments = call.build(context)
        except ReferenceFailed as exc:
            return self.failed(ticket, call, REFERENCE_ERROR, str(exc))
        timeout = call.timeout if call.timeout is not None else self.scenario.timeout
        started = time.perf_counter()
        try:
            if call.as_task:
                result = await _as_task(ticket.client, call.tool, arguments, timeout)
            else:
                result = await ticket.client.call_tool(call.tool, arguments, timeout=timeout)
        except Exception as exc:  # every failure is counted, none stops the run
            return self.failed(ticket, call, error_kind(exc), f"{type(exc).__name__}: {exc}")
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        if result.is_error:
            return self.failed(ticket, call, TOOL_ERROR, result.text)
        if ticket.outcome is not None:
            ticket.outcome.steps[call.name].samples_ms.append(elapsed_ms)
        if call.name in self.scenario.referenced:
            context.results[call.name] = result
        return None

    def failed(self, ticket: Ticket, call: Call, kind: str, message: str) -> str:
        outcome = ticket.outcome
        if outcome is not None:
            outcome.steps[call.name].errors[kind] += 1
            outcome.first_error.setdefault(kind, f"{call.name}: {message}"[:500])
        return kind


async def _as_task(client: Client, tool: str, arguments: Any, seconds: float | None) -> ToolResult:
    """A call started as a task, to its result (within ``seconds``, if given)."""
    task = await client.call_tool(tool, arguments, timeout=seconds, as_task=True)
    async with asyncio.timeout(seconds):
        return await task.result()


async def run_agents(
    scenario: Scenario, schedule: Schedule, *, concurrency: int, seed: int | None = None
) -> None:
    """Run ``concurrency`` agents on ``schedule`` until each is refused a ticket.

    Agent ``i`` draws from ``Random(f"{seed}:{i}")`` (``seed``: the file's unless given; no
    seed at all: unseeded).
    """
    steps = StepRunner(scenario)
    seed = scenario.seed if seed is None else seed
    async with asyncio.TaskGroup() as agents:
        for index in range(concurrency):
            agents.create_task(_agent(steps, schedule, index, seed))


async def _agent(steps: StepRunner, schedule: Schedule, index: int, seed: int | None) -> None:
    rng = random.Random(f"{seed}:{index}") if seed is not None else random.Random()
    variables = steps.scenario.vars
    iteration = 0
    while True:
        ticket = schedule.claim(index, iteration, time.perf_counter())
        if ticket is None:
            return
        context = IterationContext({}, {}, index, iteration, rng, variables)
        kind = await steps.iterate(ticket, context)
        schedule.ended(ticket, kind, time.perf_counter())
        iteration += 1


async def run_scenario(
    scenario: Scenario,
    client: Client,
    *,
    concurrency: int = 1,
    duration_s: float | None = None,
    iterations: int | None = None,
    warmup_s: float = 0.0,
    seed: int | None = None,
    cooldown: bool = False,
) -> ScenarioOutcome:
    """Run ``scenario`` with ``concurrency`` virtual agents sharing ``client`` (closed loop:
    each agent starts its next iteration when the last one ends).

    Give ``duration_s`` (iterations that start within it are recorded) or ``iterations``
    (successful or not, counted after the warm-up). Iterations that start during the first
    ``warmup_s`` seconds are not recorded. Without ``cooldown`` the agents then stop starting
    iterations (those in flight finish); with it they keep the load on, unrecorded, until
    every recorded iteration has ended (see the module docstring). ``seed`` overrides the
    file's.
    """
    if (duration_s is None) == (iterations is None):
        raise ConfigurationError("give a duration or a number of iterations, not both")
    if concurrency < 1:
        raise ConfigurationError("concurrency must be at least 1")
    if (duration_s is not None and duration_s <= 0) or (iterations is not None and iterations < 1):
        raise ConfigurationError("the duration and the number of iterations must be positive")
    if warmup_s < 0:
        raise ConfigurationError("the warm-up cannot be negative")
    outcome = ScenarioOutcome.empty(scenario, concurrency, warmup_s)
    window = Window(
        client, outcome, duration_s=duration_s, iterations=iterations, cooldown=cooldown
    )
    window.open(time.perf_counter() + warmup_s)
    await run_agents(scenario, window, concurrency=concurrency, seed=seed)
    window.close(time.perf_counter())
    return outcome
