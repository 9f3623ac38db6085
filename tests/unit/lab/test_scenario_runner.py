"""millimcp.lab.scenario_runner without a server: the recording window on a hand-kept clock,
and the steps through a stand-in client."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any, cast

import pytest

from millimcp.client import Client, ToolResult
from millimcp.errors import CallTimeout, ConfigurationError, InvalidParams, NotSent
from millimcp.lab.scenario_format import IterationContext, parse_scenario
from millimcp.lab.scenario_runner import (
    ScenarioOutcome,
    StepRunner,
    Ticket,
    Window,
    run_agents,
    run_scenario,
)
from millimcp.protocol.types import TextContent

SCENARIO = parse_scenario(
    """
[[step]]
name = "order"
tool = "get_order"
args = { order_id = "{{ random_int(1, 9) }}" }
[[step]]
name = "pair"
parallel = [
  { name = "left", tool = "side", args = { of = "{{ order.customer }}" } },
  { name = "right", tool = "side", args = { of = "{{ order.customer }}" } },
]
"""
)


class FakeClient:
    """Answers ``get_order`` with a customer and ``side`` with text; ``fail`` says how the
    next calls of a tool fail."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls: list[tuple[str, Mapping[str, Any] | None]] = []
        self.fail: dict[str, BaseException | str] = {}
        self.delay_s = delay_s

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: Any = None,  # noqa: ASYNC109 (the Client's signature)
    ) -> ToolResult:
        self.calls.append((name, arguments))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        failure = self.fail.get(name)
        if isinstance(failure, BaseException):
            raise failure
        if isinstance(failure, str):
            return ToolResult([TextContent(text=failure)], None, is_error=True)
        if name == "get_order":
            return ToolResult([TextContent(text="{}")], {"customer": 42})
        return ToolResult([TextContent(text="ok")], None)


def client_of(fake: FakeClient) -> Client:
    return cast("Client", fake)


def outcome() -> ScenarioOutcome:
    return ScenarioOutcome.empty(SCENARIO, 1, 0.0)


def test_a_window_records_what_starts_in_it_and_cools_down_on_request() -> None:
    fake = client_of(FakeClient())
    for cooldown in (False, True):
        window = Window(fake, outcome(), duration_s=5.0, cooldown=cooldown)
        warm = window.claim(0, 0, 1.0)
        assert warm is not None
        assert warm.outcome is None  # not opened yet: a warm-up
        window.open(10.0)
        assert window.claim(1, 0, 9.9).outcome is None  # type: ignore[union-attr]
        first = window.claim(0, 1, 10.0)
        last = window.claim(1, 1, 14.9)
        assert first is not None
        assert last is not None
        assert first.outcome is last.outcome is window.outcome
        window.ended(first, None, 12.0)
        after = window.claim(0, 2, 15.0)  # past the window, one recorded still in flight
        if cooldown:
            assert after is not None
            assert after.outcome is None
            window.ended(after, None, 15.5)
        else:
            assert after is None
        assert not window.over(15.5)
        window.ended(last, "timeout", 16.0)
        assert window.over(16.0)
        assert window.claim(0, 3, 16.0) is None  # every recorded one ended: the agents stop
        window.close(17.0)
        recorded = window.outcome
        assert recorded.latencies_ms == [2000.0]
        assert (recorded.started_s, recorded.ended_s) == ([0.0], [2.0])
        assert recorded.errors == {"timeout": 1}
        assert recorded.failed_s == [6.0]
        assert recorded.failed_started_s == pytest.approx([4.9])
        assert recorded.duration_s == (5.0 if cooldown else 7.0)
        assert recorded.cooldown is cooldown
        assert (window.first_start, window.last_end) == (10.0, 16.0)


def test_a_window_of_iterations_counts_them_and_ends_at_the_last_recorded() -> None:
    window = Window(client_of(FakeClient()), outcome(), iterations=2, cooldown=True)
    window.open(0.0)
    tickets = [window.claim(agent, 0, 1.0) for agent in range(3)]
    assert [ticket.outcome is not None for ticket in tickets if ticket] == [True, True, False]
    for ticket, end in zip(tickets, (2.0, 3.0, 9.0), strict=True):
        assert ticket is not None
        window.ended(ticket, None, end)
    window.close(10.0)
    assert window.outcome.iterations == 2
    assert window.outcome.duration_s == 3.0  # the cooldown's unrecorded tail left out
    with pytest.raises(ConfigurationError, match="not both"):
        Window(client_of(FakeClient()), outcome())


async def test_the_steps_pass_values_on_and_record_into_the_ticket() -> None:
    fake = FakeClient()
    steps = StepRunner(SCENARIO)
    recorded = outcome()
    ticket = Ticket(client_of(fake), recorded, 0.0, 0, 0)
    context = IterationContext({}, {}, 0, 0, random.Random(1), {})
    assert await steps.iterate(ticket, context) is None
    assert [name for name, _ in fake.calls] == ["get_order", "side", "side"]
    assert fake.calls[1][1] == {"of": 42}
    assert {name: series.calls for name, series in recorded.steps.items()} == {
        "order": 1,
        "pair": 1,
        "left": 1,
        "right": 1,
    }
    unrecorded = Ticket(client_of(fake), None, 0.0, 0, 1)
    assert await steps.iterate(unrecorded, context) is None
    assert recorded.steps["order"].calls == 1


@pytest.mark.parametrize(
    ("failure", "kind", "message"),
    [
        ("no such order", "tool_error", "order: no such order"),
        (CallTimeout("late"), "timeout", "order: CallTimeout: late"),
        (InvalidParams("bad"), "jsonrpc_-32602", "order: InvalidParams: bad"),
        (NotSent("refused"), "connection", "order: NotSent: refused"),
        (KeyError("odd"), "KeyError", "order: KeyError: 'odd'"),
    ],
)
async def test_a_failing_step_ends_the_iteration_counted_by_kind(
    failure: BaseException | str, kind: str, message: str
) -> None:
    fake = FakeClient()
    fake.fail["get_order"] = failure
    recorded = outcome()
    ticket = Ticket(client_of(fake), recorded, 0.0, 0, 0)
    context = IterationContext({}, {}, 0, 0, random.Random(1), {})
    assert await StepRunner(SCENARIO).iterate(ticket, context) == kind
    assert [name for name, _ in fake.calls] == ["get_order"]
    assert recorded.steps["order"].errors == {kind: 1}
    assert recorded.first_error == {kind: message}


async def test_a_fan_out_fails_as_its_first_failing_call_after_all_ended() -> None:
    fake = FakeClient()
    fake.fail["side"] = "one side broke"
    recorded = outcome()
    ticket = Ticket(client_of(fake), recorded, 0.0, 0, 0)
    context = IterationContext({}, {}, 0, 0, random.Random(1), {})
    assert await StepRunner(SCENARIO).iterate(ticket, context) == "tool_error"
    assert [name for name, _ in fake.calls] == ["get_order", "side", "side"]
    assert recorded.steps["pair"].errors == {"tool_error": 1}
    assert recorded.steps["left"].errors == recorded.steps["right"].errors == {"tool_error": 1}


async def test_run_scenario_with_a_cooldown_keeps_the_load_on_to_the_end() -> None:
    fake = FakeClient(delay_s=0.01)
    result = await run_scenario(
        SCENARIO, client_of(fake), concurrency=3, duration_s=0.2, cooldown=True
    )
    assert result.cooldown
    assert result.duration_s == 0.2
    assert result.iterations > 0
    assert all(0.0 <= started < 0.2 for started in result.started_s)
    assert max(result.ended_s) > 0.2  # the last recorded ones ended after the window...
    orders = sum(1 for name, _ in fake.calls if name == "get_order")
    assert orders > result.iterations  # ...while iterations that were not recorded ran


async def test_run_agents_stops_each_agent_the_schedule_refuses() -> None:
    class Twice:
        def __init__(self) -> None:
            self.seen: list[tuple[int, int, str | None]] = []

        def claim(self, agent: int, iteration: int, now: float) -> Ticket | None:
            if iteration == 2:
                return None
            return Ticket(client_of(FakeClient()), None, now, agent, iteration)

        def ended(self, ticket: Ticket, kind: str | None, now: float) -> None:
            self.seen.append((ticket.agent, ticket.iteration, kind))

    schedule = Twice()
    await run_agents(SCENARIO, schedule, concurrency=2, seed=1)
    assert sorted(schedule.seen) == [(0, 0, None), (0, 1, None), (1, 0, None), (1, 1, None)]
