"""The demo's agents (``orders.agents``) without a server: the think time they draw, and
the tuned client's cap in front of a stand-in client, with the wait behind it recorded apart
from the call's own time. And the tuned service's batched logging (``orders.quietlog``)."""

from __future__ import annotations

import asyncio
import logging
import random
import statistics
from pathlib import Path
from typing import Any, cast

from orders.agents import THINK_CAP, AgentSteps, run_agents, think_pause
from orders.quietlog import BatchedLogging

from millimcp.client import Client, ToolResult
from millimcp.lab.scenario_format import parse_scenario
from millimcp.lab.scenario_runner import ScenarioOutcome, Ticket
from millimcp.protocol.types import TextContent

SCENARIO = parse_scenario(
    """
[[step]]
name = "fan"
parallel = [
  { name = "a", tool = "t", args = {} },
  { name = "b", tool = "t", args = {} },
  { name = "c", tool = "t", args = {} },
]
"""
)


class HeldClient:
    """Answers ``t`` once :attr:`go` is set; counts the calls in it at once."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.inside = 0
        self.most_inside = 0
        self.entered = 0

    async def call_tool(self, name: str, arguments: Any = None, *, timeout: Any = None) -> Any:  # noqa: ASYNC109
        self.inside += 1
        self.entered += 1
        self.most_inside = max(self.most_inside, self.inside)
        await self.go.wait()
        await asyncio.sleep(0)  # the others may come in meanwhile
        self.inside -= 1
        return ToolResult([TextContent(text="ok")], None)


def test_think_times_are_exponential_around_their_mean_and_capped() -> None:
    rng = random.Random(1)
    pauses = [think_pause(rng, 8.0) for _ in range(20_000)]
    assert 7.6 < statistics.fmean(pauses) < 8.4
    assert max(pauses) <= THINK_CAP * 8.0
    assert statistics.median(pauses) < 8.0  # skewed as an exponential is (median ln 2 x mean)
    assert think_pause(rng, 0.0) == 0.0


async def test_the_cap_holds_calls_back_and_their_wait_is_recorded_apart() -> None:
    fake = HeldClient()
    client = cast("Client", fake)
    steps = AgentSteps(SCENARIO, {id(client): asyncio.Semaphore(1)})
    outcome = ScenarioOutcome.empty(SCENARIO, 1, 0.0)
    ticket = Ticket(client, outcome, 0.0, 0, 0)
    from millimcp.lab.scenario_format import IterationContext

    context = IterationContext({}, {}, 0, 0, random.Random(0), {})
    iteration = asyncio.ensure_future(steps.iterate(ticket, context))
    for _ in range(20):
        await asyncio.sleep(0)
    assert fake.entered == 1  # the other two wait for the semaphore, not in the client
    fake.go.set()
    assert await iteration is None
    assert fake.most_inside == 1
    asked = steps.asked_ms[id(outcome)]
    assert sorted(asked) == ["a", "b", "c"]
    for name in "abc":
        (sent_ms,) = outcome.steps[name].samples_ms
        (asked_ms,) = asked[name]
        assert asked_ms >= sent_ms  # from asking: the wait for the slot included


async def test_agents_without_a_cap_record_no_wait_and_stop_when_refused() -> None:
    fake = HeldClient()
    fake.go.set()
    client = cast("Client", fake)
    outcome = ScenarioOutcome.empty(SCENARIO, 2, 0.0)

    class Twice:
        def claim(self, agent: int, iteration: int, now: float) -> Ticket | None:
            return Ticket(client, outcome, now, agent, iteration) if iteration < 2 else None

        def ended(self, ticket: Ticket, kind: str | None, now: float) -> None:
            assert kind is None

    steps = await run_agents(SCENARIO, Twice(), concurrency=2, think_s=0.0, caps={})
    assert fake.entered == 2 * 2 * 3
    assert fake.most_inside >= 2  # no cap: a fan-out's calls go out together
    assert steps.asked_ms == {}
    assert len(outcome.steps["a"].samples_ms) == 4


async def test_the_run_ends_with_the_schedule_not_with_the_longest_pause() -> None:
    """One agent is refused: the others, thinking for long (or in an unrecorded iteration),
    are stopped, not waited for."""
    fake = HeldClient()
    fake.go.set()
    client = cast("Client", fake)
    outcome = ScenarioOutcome.empty(SCENARIO, 200, 0.0)
    claims: list[int] = []

    class Once:
        def claim(self, agent: int, iteration: int, now: float) -> Ticket | None:
            claims.append(agent)
            if len(claims) == 1:
                return Ticket(client, outcome, now, agent, iteration)
            return None

        def ended(self, ticket: Ticket, kind: str | None, now: float) -> None:
            assert kind is None

    # the first pauses are drawn from 0 to 60 s: waiting for every agent to wake would take
    # about a minute, stopping them when the second is refused a fraction of a second
    async with asyncio.timeout(30):
        await run_agents(SCENARIO, Once(), concurrency=200, think_s=60.0, caps={})
    assert len(claims) < 200  # most agents never woke: they were stopped


def test_batched_logging_writes_every_record_off_the_caller(tmp_path: Path) -> None:
    logger = logging.getLogger("orders.test-quietlog")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    path = tmp_path / "service.log"
    batched = BatchedLogging(
        logger, path, logging.Formatter("%(levelname)s %(message)s"), interval_s=60.0
    )
    try:
        for number in range(50):
            logger.info("call %d of %s", number, "t")
        assert len(batched.records) == 50  # gathered, not written, until the thread wakes
        assert path.read_text() == ""
    finally:
        batched.stop()
    lines = path.read_text().splitlines()
    assert lines == [f"INFO call {number} of t" for number in range(50)]
    assert logger.handlers == []


def test_batched_logging_drops_beyond_its_bound_and_counts(tmp_path: Path) -> None:
    logger = logging.getLogger("orders.test-quietlog-bound")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    path = tmp_path / "service.log"
    batched = BatchedLogging(
        logger, path, logging.Formatter("%(message)s"), interval_s=60.0, max_queued=10
    )
    try:
        for number in range(25):
            logger.info("line %d", number)
        assert batched.handler.dropped == 15
        assert "dropped=15" in repr(batched)
    finally:
        batched.stop()
    assert path.read_text().splitlines() == [f"line {number}" for number in range(10)]
