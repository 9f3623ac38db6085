"""The demo's workload: the agent scenario of S7.3 (``agent.toml``) run against the order
service by the lab (:mod:`millimcp.lab.scenario`), with the client each configuration has.

- ``pooled_client`` off (S6.1): every call opens a new TCP connection (the client sends
  ``Connection: close``, so neither side keeps it); on: one kept-alive pool of up to 50
  connections (S6.3: ``max_connections=50``).
- ``client_cap`` off: nothing bounds the calls in flight (every agent's calls go out at
  once); on: at most 30 (S6.3: ``Semaphore(30)``), the rest wait for a slot: a semaphore in
  front of the client, as the article's agent code has it (:mod:`orders.agents`), so that the
  time a call waited for a slot is known apart from its time from sending to its answer.

The agents pause between iterations (``think_s``, :mod:`orders.agents`): LLM agents.

The server's CPU time is read from ``/proc/<pid>/stat`` (user + system) around the recorded
part of a run; :func:`measure` returns it as a percentage of one core.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orders.config import OrdersConfig

if TYPE_CHECKING:
    from millimcp import Client
    from millimcp.lab.results import Run
    from millimcp.lab.scenario_format import Scenario
    from millimcp.lab.scenario_runner import ScenarioOutcome, Ticket, Window

__all__ = [
    "CLIENT_CAP",
    "POOL_CONNECTIONS",
    "SCENARIO",
    "CpuMeter",
    "Measured",
    "Phase",
    "agent_client",
    "client_cap",
    "hot_customers",
    "load_workload",
    "measure",
    "merge",
    "prime",
    "run_phases",
]

SCENARIO = Path(__file__).with_name("agent.toml")
CLIENT_CAP = 30
"""Calls in flight with ``client_cap`` (S6.3: ``Semaphore(30)``)."""
POOL_CONNECTIONS = 50
"""The pooled client's connections (S6.3: ``Limits(max_connections=50)``)."""
CALL_TIMEOUT_S = 30.0
"""Per call, the client's total timeout (S4.1: ~30 s); a call that takes longer fails."""


def load_workload(last_order: int, hot_orders: int) -> Scenario:
    """``agent.toml`` with the agents drawing from the ``hot_orders`` most recent orders."""
    from millimcp.lab.scenario import load_scenario

    scenario = load_scenario(SCENARIO)
    first = max(1, last_order - hot_orders + 1)
    variables = {**scenario.vars, "first_order": first, "last_order": last_order}
    return dataclasses.replace(scenario, vars=variables)


def agent_client(
    url: str,
    config: OrdersConfig,
    token: str,
    *,
    concurrency: int,
    width: int,
    ssl: Any = None,
    cap_inside: bool = False,
) -> Client:
    """The agents' client as ``config`` has it (``pooled_client``; ``client_cap`` is applied
    in front of it, :func:`client_cap`, unless ``cap_inside``: then the client's own limit
    holds it, for callers that drive the client with the lab's runner directly)."""
    from millimcp import Client
    from millimcp.resilience.policy import Limits, Timeout

    most = max(1, concurrency * width)  # every call the agents can have out at once
    cap = client_cap(config, concurrency, width) if cap_inside else None
    limits = Limits(
        max_in_flight=cap or most,  # else the cap, if any, is in front (client_cap())
        max_queue=most,
        max_connections=POOL_CONNECTIONS if config.pooled_client else most,
    )
    headers = {"Authorization": f"Bearer {token}"}
    if not config.pooled_client:
        headers["Connection"] = "close"
    return Client.over_http(
        url,
        limits=limits,
        timeout=Timeout(total=CALL_TIMEOUT_S),
        retry=None,  # every failure counts: the success rate is the agents' own
        headers=headers,
        client_info=("orders-demo-agent", "1.0"),
        ssl=ssl,
    )


def client_cap(config: OrdersConfig, concurrency: int, width: int) -> int | None:
    """The calls in flight the agents allow themselves (``Semaphore(30)``); None: no cap."""
    if not config.client_cap:
        return None
    return min(CLIENT_CAP, max(1, concurrency * width))


class CpuMeter:
    """CPU seconds (user + system) a process has used, from ``/proc/<pid>/stat``; None where
    there is no such file (not Linux)."""

    def __init__(self, pid: int) -> None:
        self.path = Path(f"/proc/{pid}/stat")
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def seconds(self) -> float | None:
        try:
            text = self.path.read_text()
        except OSError:
            return None
        fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
        return (int(fields[11]) + int(fields[12])) / self.tick  # utime, stime


def hot_customers(db_url: str, first_order: int, last_order: int) -> list[int]:
    """The customers of the orders the agents draw from."""
    from sqlalchemy import select

    from orders.db import sync_engine
    from orders.schema import Order

    engine = sync_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(Order.customer_id)
                .where(Order.id.between(first_order, last_order))
                .distinct()
                .order_by(Order.customer_id)
            )
            return [int(row[0]) for row in rows]
    finally:
        engine.dispose()


async def prime(
    url: str, token: str, customers: Sequence[int], *, parallel: int = 40, ssl: Any = None
) -> int:
    """Ask ``url`` for each customer's recommendations once (a service that has been running
    a while has them cached); returns the calls that failed."""
    from millimcp import Client
    from millimcp.resilience.policy import Limits

    failed = 0
    async with Client.over_http(
        url,
        limits=Limits(max_in_flight=parallel, max_queue=len(customers) + 1),
        retry=None,
        headers={"Authorization": f"Bearer {token}"},
        timeout=CALL_TIMEOUT_S,
        ssl=ssl,
    ) as client:

        async def one(customer: int) -> bool:
            try:
                result = await client.call_tool("get_recommendations", {"customer_id": customer})
            except Exception:  # counted: priming is best effort
                return False
            return not result.is_error

        results = await asyncio.gather(*(one(customer) for customer in customers))
        failed = sum(1 for ok in results if not ok)
    return failed


def _pct(seconds: float | None, wall: float) -> float | None:
    return None if seconds is None or wall <= 0 else 100.0 * seconds / wall


@dataclass
class Measured:
    """The recorded part of one phase: the agents against one configuration."""

    label: str
    config: OrdersConfig
    run: Run
    outcome: ScenarioOutcome
    wall_s: float
    """From the first recorded iteration's start to the last one's end."""
    server_cpu_s: float | None
    """The server process's CPU time (user + system) over ``wall_s``."""
    client_cpu_s: float | None
    """This process's (the agents') CPU time over the same span."""
    connections_opened: int = 0
    connections_reused: int = 0
    asked_ms: dict[str, list[float]] | None = None
    """Per call name, each successful call's time from the agent asking to its answer (queued
    behind the client's cap included); None: no cap, the same as the samples."""

    @property
    def server_cpu_pct(self) -> float | None:
        """The server's CPU while the phase was recorded, in % of one core."""
        return _pct(self.server_cpu_s, self.wall_s)

    @property
    def client_cpu_pct(self) -> float | None:
        return _pct(self.client_cpu_s, self.wall_s)

    @property
    def server_cpu_per_iteration_ms(self) -> float | None:
        """Server CPU (ms) per iteration: its CPU rate over the throughput."""
        rate = self.server_cpu_pct
        if rate is None or self.run.throughput <= 0:
            return None
        return 10.0 * rate / self.run.throughput

    @property
    def iterations(self) -> int:
        return self.outcome.iterations

    def request_samples(self, *, sent: bool = False) -> tuple[list[float], int]:
        """Every tool call's latency (ms, successful calls) and the calls that failed: the
        per-request view (a fan-out's calls one by one, not the fan-out). The agent's view,
        from asking to the answer; ``sent``: from sending (past the client's cap) instead."""
        samples: list[float] = []
        failed = 0
        for call in self.outcome.scenario.calls:
            series = self.outcome.steps.get(call.name)
            if series is not None:
                asked = None if sent or self.asked_ms is None else self.asked_ms.get(call.name)
                samples += series.samples_ms if asked is None else asked
                failed += sum(series.errors.values())
        return samples, failed

    def queued_ms(self) -> float | None:
        """Mean time (ms) a call waited behind the client's cap; None: no cap."""
        if self.asked_ms is None:
            return None
        asked, _ = self.request_samples()
        sent, _ = self.request_samples(sent=True)
        if not asked or len(asked) != len(sent):
            return None
        return (sum(asked) - sum(sent)) / len(asked)

    def per_request(self, *, sent: bool = False) -> dict[str, float | None]:
        """Mean, P95, P99 of one call, the calls' success rate (0 to 1) and the server's CPU
        per call (ms); from asking to the answer, or with ``sent`` from sending it."""
        from millimcp.lab.results import latency_summary

        samples, failed = self.request_samples(sent=sent)
        summary = latency_summary(samples)
        total = len(samples) + failed
        per_iteration = self.server_cpu_per_iteration_ms
        calls = len(self.outcome.scenario.calls)
        return {
            "mean_ms": summary["mean"],
            "p95_ms": summary["p95"],
            "p99_ms": summary["p99"],
            "success_rate": len(samples) / total if total else 0.0,
            "server_cpu_ms": None if per_iteration is None else per_iteration / calls,
        }

    def per_iteration(self) -> dict[str, float | None]:
        latency = self.run.latency_ms
        return {
            "mean_ms": latency["mean"],
            "p95_ms": latency["p95"],
            "p99_ms": latency["p99"],
            "success_rate": self.success_pct / 100.0,
            "server_cpu_ms": self.server_cpu_per_iteration_ms,
        }

    @property
    def failed(self) -> int:
        return sum(self.outcome.errors.values())

    @property
    def success_pct(self) -> float:
        total = self.iterations + self.failed
        return 100.0 * self.iterations / total if total else 0.0


@dataclass
class Phase:
    """A stretch of a run during which the agents call one target through one client."""

    label: str
    url: str
    config: OrdersConfig
    client: Client
    settle_s: float
    """Unrecorded, from the phase's start (and until the last phase's iterations ended)."""
    window_s: float
    """Iterations starting within this long after the settling are recorded."""
    server_pid: int | None = None
    cap: int | None = None
    """Calls in flight the agents allow themselves through this client (:func:`client_cap`)."""


async def measure(
    url: str,
    config: OrdersConfig,
    scenario: Scenario,
    token: str,
    *,
    label: str,
    concurrency: int,
    warmup_s: float,
    duration_s: float,
    server_pid: int | None,
    ssl: Any = None,
    think_s: float = 0.0,
) -> Measured:
    """Run ``scenario`` with ``concurrency`` agents through the client ``config`` calls for,
    ``warmup_s`` unrecorded, then ``duration_s`` recorded (:func:`run_phases`)."""
    client = agent_client(
        url, config, token, concurrency=concurrency, width=scenario.width, ssl=ssl
    )
    cap = client_cap(config, concurrency, scenario.width)
    async with client:
        phase = Phase(label, url, config, client, warmup_s, duration_s, server_pid, cap)
        (measured,) = await run_phases(scenario, [phase], concurrency=concurrency, think_s=think_s)
    return measured


async def run_phases(
    scenario: Scenario,
    phases: Sequence[Phase],
    *,
    concurrency: int,
    on_open: Callable[[Phase], None] = lambda phase: None,
    think_s: float = 0.0,
) -> list[Measured]:
    """``concurrency`` agents run ``scenario`` in a closed loop (pausing ``think_s`` on
    average after each iteration, :mod:`orders.agents`), through each phase's client in turn,
    without a pause between phases: one :class:`Measured` per phase.

    Each phase is a recording window of the lab's with a cooldown
    (:class:`millimcp.lab.scenario_runner.Window`, as ``run_scenario(..., cooldown=True)``):
    the iterations that start within it are recorded, and the agents keep the load on,
    unrecorded, until the last recorded one has ended, so every recorded iteration runs under
    the load being measured from start to end. A phase's window opens after its settling
    time, which starts once the previous phase's iterations have all ended (in the first
    phase: the warm-up, and without a think time at least until every agent has ended its
    first iteration, as they all start at once); the agents then move on to the next phase.

    Each outcome's timeline counts iterations by the second they started in (the
    throughput); its duration is the window's. The server's and this process's CPU time are
    read when the first recorded iteration starts and when the last one ends.
    """
    from millimcp.lab.results import now_iso
    from millimcp.lab.scenario import to_run
    from millimcp.lab.scenario_runner import ScenarioOutcome, Window
    from orders.agents import run_agents

    states = [
        _PhaseState(
            phase,
            Window(
                phase.client,
                ScenarioOutcome.empty(scenario, concurrency, phase.settle_s),
                duration_s=phase.window_s,
                cooldown=True,
            ),
            CpuMeter(phase.server_pid) if phase.server_pid is not None else None,
        )
        for phase in phases
    ]
    schedule = _Phases(states, on_open, concurrency, staggered=think_s > 0)
    opened = [_connections(phase.client) for phase in phases]
    started_at = now_iso()
    caps: dict[int, asyncio.Semaphore] = {}
    for phase in phases:  # one semaphore per client: the phases of one client share it
        if phase.cap is not None:
            caps.setdefault(id(phase.client), asyncio.Semaphore(phase.cap))
    schedule.open(0, time.perf_counter())
    steps = await run_agents(
        scenario, schedule, concurrency=concurrency, think_s=think_s, caps=caps
    )
    results = []
    for state, (opened_before, reused_before) in zip(states, opened, strict=True):
        phase, window = state.phase, state.window
        outcome = window.outcome
        outcome.duration_s = phase.window_s  # the window's (the throughput's denominator)
        client = phase.client
        info = client.server_info
        run = to_run(
            outcome,
            target=phase.url,
            transport="http",
            era=client.era or "modern",
            server=None if info is None else f"{info.name}/{info.version} ({phase.label})",
            started_at=started_at,
        )
        opened_after, reused_after = _connections(client)
        start_mark, end_mark = state.marks.get("start"), state.marks.get("end")
        wall = server_cpu = client_cpu = None
        if start_mark is not None and end_mark is not None:
            wall = end_mark[0] - start_mark[0]
            server_cpu = _spent(start_mark[1], end_mark[1])
            client_cpu = _spent(start_mark[2], end_mark[2])
        results.append(
            Measured(
                label=phase.label,
                config=phase.config,
                run=run,
                outcome=outcome,
                wall_s=wall or 0.0,
                server_cpu_s=server_cpu,
                client_cpu_s=client_cpu,
                connections_opened=opened_after - opened_before,
                connections_reused=reused_after - reused_before,
                asked_ms=(
                    None
                    if id(client) not in caps
                    else {
                        name: steps.asked_ms.get(id(outcome), {}).get(name, [])
                        for name in outcome.steps
                    }
                ),
            )
        )
    return results


def _connections(client: Client) -> tuple[int, int]:
    stats = client.stats
    return stats.connections_opened, stats.connections_reused


def _spent(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start


@dataclass
class _PhaseState:
    phase: Phase
    window: Window
    cpu: CpuMeter | None
    opened_at: float = 0.0
    marks: dict[str, tuple[float, float | None, float | None]] = field(default_factory=dict)


class _Phases:
    """The phases of :func:`run_phases` as one schedule of the lab's agents
    (:class:`millimcp.lab.scenario_runner.Schedule`): the current phase's window hands out
    the tickets, and when it is over the next phase opens."""

    def __init__(
        self,
        states: list[_PhaseState],
        on_open: Callable[[Phase], None],
        concurrency: int,
        staggered: bool = False,
    ) -> None:
        self.states = states
        self.by_window = {id(state.window): state for state in states}
        self.on_open = on_open
        self.concurrency = concurrency
        self.staggered = staggered
        """The agents start at different times (a think time): no burst to wait out."""
        self.first_rounds = 0
        """Agents that have ended their first iteration."""
        self.index = 0
        self.me = CpuMeter(os.getpid())

    def mark(self, state: _PhaseState, name: str) -> None:
        if name not in state.marks:
            state.marks[name] = (
                time.perf_counter(),
                state.cpu.seconds() if state.cpu is not None else None,
                self.me.seconds(),
            )

    def open(self, index: int, now: float) -> None:
        """Move the agents on to phase ``index``; its window opens once the iterations of the
        phase before have all ended (:meth:`start_clock`)."""
        self.index = index
        state = self.states[index]
        state.opened_at = now
        self.on_open(state.phase)
        self.start_clock(state, now)

    def start_clock(self, state: _PhaseState, now: float) -> None:
        """Open the current phase's window once it may: the first phase's after its settling
        time (its warm-up) and, unless the agents' starts are staggered by a think time, once
        every agent has ended its first iteration (they all start at once: that burst is no
        steady state); a later phase's after the iterations of the
        phase before have all ended, then its settling time."""
        if state.window.opened:
            return
        if self.index == 0:
            if self.staggered or self.first_rounds >= self.concurrency:
                state.window.open(max(now, state.opened_at + state.phase.settle_s))
        elif self.states[self.index - 1].window.in_flight == 0:
            state.window.open(now + state.phase.settle_s)

    def claim(self, agent: int, iteration: int, now: float) -> Ticket | None:
        state = self.states[self.index]
        self.start_clock(state, now)
        ticket = state.window.claim(agent, iteration, now)
        while ticket is None:  # the phase is over: on to the next one, if any
            self.mark(state, "end")
            if self.index + 1 == len(self.states):
                return None
            self.open(self.index + 1, now)
            state = self.states[self.index]
            ticket = state.window.claim(agent, iteration, now)
        if ticket.outcome is not None:
            self.mark(state, "start")
        return ticket

    def ended(self, ticket: Ticket, kind: str | None, now: float) -> None:
        window = ticket.window
        assert window is not None
        window.ended(ticket, kind, now)
        self.first_rounds += ticket.iteration == 0
        self.start_clock(self.states[self.index], now)
        if ticket.outcome is not None and window.over(now):
            self.mark(self.by_window[id(window)], "end")


def merge(parts: Sequence[Measured], label: str) -> Measured:
    """Several recorded phases of one configuration as one (samples pooled, windows laid end
    to end): the two tuned phases around a step's."""
    from millimcp.lab.scenario import to_run
    from millimcp.lab.scenario_runner import ScenarioOutcome, StepSeries

    first = parts[0]
    merged = ScenarioOutcome(
        first.outcome.scenario,
        first.outcome.concurrency,
        first.outcome.warmup_s,
        cooldown=all(part.outcome.cooldown for part in parts),
        steps={name: StepSeries() for name in first.outcome.steps},
    )
    offset = 0.0
    asked: dict[str, list[float]] | None = None
    if all(part.asked_ms is not None for part in parts):
        asked = {name: [] for name in first.outcome.steps}
    for part in parts:
        outcome = part.outcome
        if asked is not None and part.asked_ms is not None:
            for name, samples in part.asked_ms.items():
                asked.setdefault(name, []).extend(samples)
        merged.latencies_ms += outcome.latencies_ms
        merged.ended_s += [offset + t for t in outcome.ended_s]
        merged.started_s += [offset + t for t in outcome.started_s]
        merged.failed_s += [offset + t for t in outcome.failed_s]
        merged.failed_started_s += [offset + t for t in outcome.failed_started_s]
        merged.errors.update(outcome.errors)
        for kind, message in outcome.first_error.items():
            merged.first_error.setdefault(kind, message)
        for name, series in outcome.steps.items():
            merged.steps[name].samples_ms += series.samples_ms
            merged.steps[name].errors.update(series.errors)
        offset += outcome.duration_s
    merged.duration_s = offset
    run = to_run(
        merged,
        target=first.run.target,
        transport="http",
        era=first.run.era,
        server=first.run.server,
        started_at=first.run.started_at,
    )

    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    return Measured(
        label=label,
        config=first.config,
        run=run,
        outcome=merged,
        wall_s=sum(p.wall_s for p in parts),
        server_cpu_s=total([p.server_cpu_s for p in parts]),
        client_cpu_s=total([p.client_cpu_s for p in parts]),
        connections_opened=sum(p.connections_opened for p in parts),
        connections_reused=sum(p.connections_reused for p in parts),
        asked_ms=asked,
    )
