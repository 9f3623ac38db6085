"""Scenario steps started as tasks (``as_task = true``): the next steps do not wait."""

from __future__ import annotations

import asyncio
import random

import pytest

from millimcp import Server, ServerConfig
from millimcp.errors import ConfigurationError
from millimcp.lab.scenario_format import IterationContext, parse_scenario
from millimcp.lab.scenario_runner import ScenarioOutcome, StepRunner, Ticket, run_scenario
from millimcp.tasks import TaskConfig
from millimcp.testing import connect

SCENARIO = """
[[step]]
name = "analysis"
tool = "analyze"
as_task = true
[[step]]
name = "lookup"
tool = "lookup"
"""


def make_server(events: list[str]) -> Server:
    server = Server("lab-tasks", config=ServerConfig(tasks=TaskConfig(poll_interval_ms=5)))
    lookup_done = asyncio.Event()

    @server.tool(task="optional")
    async def analyze() -> str:
        events.append("analyze started")
        await asyncio.wait_for(lookup_done.wait(), 10)  # ends only after the lookup ran
        events.append("analyze ended")
        lookup_done.clear()
        return "analysed"

    @server.tool()
    async def lookup() -> str:
        events.append("lookup")
        lookup_done.set()
        return "found"

    return server


async def test_a_task_step_lets_the_next_steps_run_and_the_iteration_waits_for_it() -> None:
    events: list[str] = []
    server = make_server(events)
    scenario = parse_scenario(SCENARIO)
    assert scenario.calls[0].as_task
    async with server.running(), connect(server) as client:
        recorded = ScenarioOutcome.empty(scenario, 1, 0.0)
        ticket = Ticket(client, recorded, 0.0, 0, 0)
        context = IterationContext({}, {}, 0, 0, random.Random(1), {})
        assert await StepRunner(scenario).iterate(ticket, context) is None
        assert sorted(events) == ["analyze ended", "analyze started", "lookup"]
        assert events.index("lookup") < events.index("analyze ended")  # it did not wait
        assert recorded.steps["analysis"].calls == recorded.steps["lookup"].calls == 1
        run = await run_scenario(scenario, client, concurrency=1, iterations=4)
    assert run.iterations == 4
    assert not run.errors


async def test_a_failing_task_step_fails_the_iteration() -> None:
    server = Server("lab-tasks")

    @server.tool(task="optional")
    async def analyze() -> str:
        raise RuntimeError("broken")

    @server.tool()
    async def lookup() -> str:
        return "found"

    scenario = parse_scenario(SCENARIO)
    async with server.running(), connect(server) as client:
        recorded = ScenarioOutcome.empty(scenario, 1, 0.0)
        ticket = Ticket(client, recorded, 0.0, 0, 0)
        context = IterationContext({}, {}, 0, 0, random.Random(1), {})
        assert await StepRunner(scenario).iterate(ticket, context) == "tool_error"
    assert recorded.steps["lookup"].calls == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('args = { of = "{{ analysis }}" }', "analysis"),
        ("as_task = 1", None),
    ],
)
def test_task_steps_are_checked_when_loaded(extra: str, message: str | None) -> None:
    text = SCENARIO + extra + "\n"
    if message is None:
        text = SCENARIO.replace("as_task = true", "as_task = 1")
    with pytest.raises(ConfigurationError) as caught:
        parse_scenario(text)
    assert (message or "as_task") in str(caught.value)
