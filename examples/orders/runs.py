"""The demo's runs: how long each part lasts (:class:`Plan`), the agents against one
service, the priming and warming before, the A/B of each step in one continuous run, the
concurrency ramp, and the profile of one call; each prints its progress as it goes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orders.config import CLIENT_FLAGS, TUNED, OrdersConfig
from orders.fleet import Service
from orders.steps import CONTROL, StepResult
from orders.tables import HELD_PCT, ms, pct
from orders.workload import (
    CLIENT_CAP,
    CpuMeter,
    Measured,
    Phase,
    agent_client,
    client_cap,
    measure,
    merge,
    prime,
    run_phases,
)

if TYPE_CHECKING:
    from millimcp.lab.profile import Profile
    from millimcp.lab.scenario import Scenario
    from orders.db import Seeded

__all__ = [
    "LINK_CPU",
    "PLANS",
    "PROFILE_TOOL",
    "THRESHOLD_PCT",
    "Plan",
    "agents",
    "each_step",
    "prepare",
    "profile_one",
    "progress",
    "ramp_up",
    "response_size",
    "seed",
    "without",
]

PROFILE_TOOL = "analyze_orders"
THRESHOLD_PCT = 10.0
"""A step's effect counts when a metric moves by more than this and significantly."""
LINK_CPU: dict[str, float] = {}
"""The link emulator's CPU (% of one core) during each run of the agents, by label."""


@dataclass(frozen=True)
class Plan:
    """How long each part runs and how many calls the profiles make."""

    warmup_s: float
    """Before the naive and the tuned run (unrecorded)."""
    naive_s: float
    tuned_s: float
    step_settle_s: float
    """Each phase of the A/B: unrecorded at its start."""
    step_s: float
    """Each A/B: the phase without the step; the tuned phases around it run half as long."""
    profile_warm: int
    profile_cold: int
    ramp: bool = False


PLANS = {
    "quick": Plan(0.5, 1.5, 1.5, 0.2, 1.0, 5, 2),
    "default": Plan(2.0, 5.0, 10.0, 0.5, 3.0, 20, 2),
    "full": Plan(8.0, 30.0, 30.0, 1.0, 10.0, 100, 10, ramp=True),
}


def without(flag: str) -> OrdersConfig:
    if flag == CONTROL:
        return TUNED
    return dataclasses.replace(TUNED, **{flag: False})  # type: ignore[arg-type]


def progress(text: str) -> None:
    print(f"  .. {text}", flush=True)


# -- S6.2 -------------------------------------------------------------------------------------


async def profile_one(
    service: Service, token: str, arguments: dict[str, Any], plan: Plan
) -> Profile:
    """The lab's profile of one call; calls on a new connection each where the
    configuration's client opens one per call."""
    from millimcp.lab.profile import profile_http

    cold_only = not service.config.pooled_client
    return await profile_http(
        service.url,
        PROFILE_TOOL,
        arguments,
        requests=1 if cold_only else plan.profile_warm,
        warmup=1 if cold_only else max(2, plan.profile_warm // 5),
        cold=plan.profile_cold,
        headers={"Authorization": f"Bearer {token}"},
        ssl=service.ssl,
    )


async def response_size(
    url: str, token: str, arguments: dict[str, Any], context: ssl.SSLContext | None = None
) -> tuple[int, int]:
    """(JSON-RPC response bytes, bytes on the wire) of one call, asking for compression as
    the millimcp Client does."""
    import aiohttp

    from millimcp.codec.compress import decompress
    from millimcp.lab.target import connect, parse_target

    target = parse_target(url, headers={"Authorization": f"Bearer {token}"})
    async with connect(target, call_timeout=30.0) as connection:
        _, template = await connection.call_template(PROFILE_TOOL, arguments)
    headers = {**dict(template.headers), "Accept-Encoding": "zstd, gzip"}
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.post(url, data=template.body(1), headers=headers, ssl=context or True) as response,
    ):
        wire = await response.read()
        coding = response.headers.get("Content-Encoding")
    payload = decompress(wire, coding, 1 << 26) if coding else wire
    return len(payload), len(wire)


# -- the demo ---------------------------------------------------------------------------------


async def seed(db_url: str, orders: int) -> tuple[Seeded, Seeded]:
    """The database without and with the covering index (each made unless already there)."""
    from orders.db import ensure_database

    plain = await asyncio.to_thread(ensure_database, db_url, orders=orders, covering=False)
    covered = await asyncio.to_thread(ensure_database, db_url, orders=orders, covering=True)
    return plain, covered


async def agents(
    service: Service,
    label: str,
    scenario: Scenario,
    token: str,
    concurrency: int,
    warmup_s: float,
    seconds: float,
    think_s: float,
) -> Measured:
    warmup_s = max(warmup_s, think_s)  # until the agents' staggered starts are a steady flow
    progress(f"{label}: {warmup_s:g} s warm-up, then iterations starting for {seconds:g} s")
    meter = None if service.front is None else CpuMeter(service.front.pid)
    link_before, wall_before = (meter.seconds() if meter else None), time.perf_counter()
    measured = await measure(
        service.url,
        service.config,
        scenario,
        token,
        label=label,
        concurrency=concurrency,
        warmup_s=warmup_s,
        duration_s=seconds,
        server_pid=service.process.pid,
        ssl=service.ssl,
        think_s=think_s,
    )
    link_after = meter.seconds() if meter else None
    if link_before is not None and link_after is not None:
        LINK_CPU[label] = 100.0 * (link_after - link_before) / (time.perf_counter() - wall_before)
    latency = measured.run.latency_ms
    progress(
        f"{label}: {measured.iterations:,} iterations, {measured.failed:,} failed, mean "
        f"{ms(latency['mean'])}, P99 {ms(latency['p99'])}, server CPU "
        f"{pct(measured.server_cpu_pct)}"
        + (f", link emulator CPU {pct(LINK_CPU[label])}" if label in LINK_CPU else "")
    )
    for kind, message in list(measured.outcome.first_error.items())[:3]:
        progress(f"{label}: first '{kind}' failure: {message[:300]}")
    return measured


async def prepare(
    service: Service,
    token: str,
    customers: Sequence[int],
    scenario: Scenario,
    primed: bool,
    warmed: bool,
    concurrency: int,
    plan: Plan,
    priming: asyncio.Lock,
) -> int:
    """Prime the service's recommendation cache with ``customers`` (one service at a time:
    nine at once, 40 calls each, overran the shared recommendation service and most calls
    timed out); then, for the A/B (which compares tuned, warmed by its own runs, with
    services that only just started), run a few agents against it unrecorded (connections,
    page caches). Returns failed calls."""
    failed = 0
    if primed:
        async with priming:
            failed = await prime(service.direct_url, token, customers, ssl=service.ssl)
    if warmed:
        await measure(
            service.url,
            service.config,
            scenario,
            token,
            label=f"warm-{service.label}",
            concurrency=min(concurrency, 5),
            warmup_s=0.0,
            duration_s=min(plan.warmup_s, 0.5),
            server_pid=None,
            ssl=service.ssl,
        )
    return failed


async def each_step(
    services: dict[str, Service],
    flags: Sequence[str],
    scenario: Scenario,
    token: str,
    concurrency: int,
    plan: Plan,
    think_s: float,
    customer: int,
) -> tuple[list[StepResult], float]:
    """One run, without a pause: tuned, tuned without the first step, tuned, tuned without
    the next, ..., tuned (the A/A control first: tuned "without nothing", a second tuned
    process). Each step is compared with the two tuned phases around it, pooled, so that a
    drift of the machine's load hits both sides; an effect must stand out of the control's
    changes. Returns the results and the threshold used."""
    from millimcp.lab.compare import compare_runs

    tuned = services["tuned"]
    order = [CONTROL, *flags]
    async with contextlib.AsyncExitStack() as stack:

        async def client_for(service: Service, config: OrdersConfig) -> Any:
            client = agent_client(
                service.url,
                config,
                token,
                concurrency=concurrency,
                width=scenario.width,
                ssl=service.ssl,
            )
            entered = await stack.enter_async_context(client)
            if config.pooled_client:  # its pool open and its TLS done before it is measured
                # (with a think time, calls come too sparsely for a settling time to do it)
                await asyncio.gather(
                    *(
                        entered.call_tool("get_profile", {"customer_id": customer})
                        for _ in range(min(CLIENT_CAP, concurrency * scenario.width))
                    ),
                    return_exceptions=True,  # best effort: the phases count the failures
                )
            return entered

        base = await client_for(tuned, TUNED)

        def tuned_phase(number: int) -> Phase:
            return Phase(
                f"tuned-{number}",
                tuned.url,
                TUNED,
                base,
                # the first: until the agents' staggered starts are a steady flow
                max(plan.step_settle_s, think_s) if number == 0 else plan.step_settle_s,
                plan.step_s / 2,
                tuned.process.pid,
                client_cap(TUNED, concurrency, scenario.width),
            )

        phases = [tuned_phase(0)]
        for number, flag in enumerate(order, 1):
            if flag == CONTROL:
                service = services["tuned-control"]
            else:
                service = services["tuned" if flag in CLIENT_FLAGS else f"tuned-{flag}"]
            config = without(flag)
            phases.append(
                Phase(
                    f"without-{'control' if flag == CONTROL else flag}",
                    service.url,
                    config,
                    await client_for(service, config),
                    plan.step_settle_s,
                    plan.step_s,
                    service.process.pid,
                    client_cap(config, concurrency, scenario.width),
                )
            )
            phases.append(tuned_phase(number))

        def opened(phase: Phase) -> None:
            if phase.label.startswith("without-"):
                progress(phase.label.replace("-", " ", 1))

        measured = await run_phases(
            scenario, phases, concurrency=concurrency, on_open=opened, think_s=think_s
        )
    results = []
    threshold = THRESHOLD_PCT
    for number, flag in enumerate(order):
        before, variant, after = measured[2 * number : 2 * number + 3]
        name = "control" if flag == CONTROL else flag
        baseline = merge([before, after], f"tuned-around-{name}")
        comparison = compare_runs(baseline.run, variant.run, threshold_pct=threshold)
        result = StepResult(flag, variant, baseline, comparison)
        if flag == CONTROL:  # an effect must stand out of the machine's own noise
            threshold = max(THRESHOLD_PCT, result.noise_pct())
        results.append(result)
    return results, threshold


async def ramp_up(
    service: Service, scenario: Scenario, token: str, plan: Plan, think_s: float
) -> int | None:
    """The highest concurrency of 25, 50, 100, ... 800 at which >= 99% of iterations
    succeed (calls time out after 30 s)."""
    level_held = None
    for level in (25, 50, 100, 200, 400, 800):
        measured = await measure(
            service.url,
            service.config,
            scenario,
            token,
            label=f"{service.label}-c{level}",
            concurrency=level,
            warmup_s=plan.warmup_s,
            duration_s=plan.step_s,
            server_pid=service.process.pid,
            ssl=service.ssl,
            think_s=think_s,
        )
        progress(f"{service.label} at {level}: {measured.success_pct:.1f}% succeeded")
        if measured.success_pct < HELD_PCT:
            break
        level_held = level
    return level_held
