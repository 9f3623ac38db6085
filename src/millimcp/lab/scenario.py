"""``millimcp scenario FILE.toml TARGET``: N virtual agents run a scenario (sequences and
fan-outs of tool calls, values passed between steps) in a closed loop through one pooled
millimcp Client, and report the end-to-end latency of an iteration and each step's.

The file format is in :mod:`millimcp.lab.scenario_format` and docs/scenarios.md::

    [[step]]
    name = "order"
    tool = "get_order"
    args = { order_id = "{{ random_int(1, 1000000) }}" }
    [[step]]
    name = "recs"
    tool = "get_recommendations"
    args = { customer_id = "{{ order.customer_id }}" }

An iteration fails at the first step that fails (an exception, ``isError: true``, or a
reference its result cannot satisfy); the calls of a fan-out all finish first. The end-to-end
latency counts successful iterations only; failures are counted by kind.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from millimcp.errors import ConfigurationError
from millimcp.lab._table import duration
from millimcp.lab.scenario_format import (
    Call,
    IterationContext,
    Parallel,
    ReferenceFailed,
    Scenario,
    load_scenario,
    parse_scenario,
    step_value,
)

if TYPE_CHECKING:
    from millimcp.client import Client
    from millimcp.lab.results import Run, TimelinePoint

__all__ = [
    "CLOSED_LOOP_NOTE",
    "REFERENCE_ERROR",
    "TOOL_ERROR",
    "Call",
    "Parallel",
    "Scenario",
    "ScenarioOutcome",
    "StepSeries",
    "add_arguments",
    "error_kind",
    "format_outcome",
    "load_scenario",
    "parse_scenario",
    "run",
    "run_scenario",
    "step_value",
    "to_run",
]

TOOL_ERROR = "tool_error"
"""The error kind of a result with ``isError: true``."""
REFERENCE_ERROR = "reference"
"""The error kind of arguments that could not be built from earlier results."""


# -- running ----------------------------------------------------------------------------------


@dataclass(slots=True)
class StepSeries:
    """What one step (a call, or a named fan-out) saw while recording."""

    samples_ms: list[float] = field(default_factory=list)
    """Latencies of the successful calls, in milliseconds."""
    errors: Counter[str] = field(default_factory=Counter)
    """Failures by kind: an exception's class name, ``tool_error``, ``reference``."""

    @property
    def calls(self) -> int:
        return len(self.samples_ms)


@dataclass(slots=True)
class ScenarioOutcome:
    """The recorded part of a scenario run (warm-up iterations left out)."""

    scenario: Scenario
    concurrency: int
    warmup_s: float
    duration_s: float = 0.0
    """Wall time from the end of the warm-up to the last iteration's end."""
    latencies_ms: list[float] = field(default_factory=list)
    """End-to-end latency of each successful iteration, in the order they ended."""
    ended_s: list[float] = field(default_factory=list)
    """When each successful iteration ended, seconds after recording began."""
    errors: Counter[str] = field(default_factory=Counter)
    """Failed iterations by the kind of their first failure."""
    failed_s: list[float] = field(default_factory=list)
    """When each failed iteration ended, seconds after recording began."""
    steps: dict[str, StepSeries] = field(default_factory=dict)
    first_error: dict[str, str] = field(default_factory=dict)
    """The message of the first failure of each kind (``"recs: InvalidParams: ..."``)."""

    @property
    def iterations(self) -> int:
        """Successful iterations."""
        return len(self.latencies_ms)

    @property
    def throughput(self) -> float:
        """Successful iterations per second."""
        return self.iterations / self.duration_s if self.duration_s > 0 else 0.0


async def run_scenario(
    scenario: Scenario,
    client: Client,
    *,
    concurrency: int = 1,
    duration_s: float | None = None,
    iterations: int | None = None,
    warmup_s: float = 0.0,
    seed: int | None = None,
) -> ScenarioOutcome:
    """Run ``scenario`` with ``concurrency`` virtual agents sharing ``client`` (closed loop:
    each agent starts its next iteration when the last one ends).

    Give ``duration_s`` (agents stop starting iterations after it; those in flight finish) or
    ``iterations`` (successful or not, counted after the warm-up). Iterations that start
    during the first ``warmup_s`` seconds are not recorded. ``seed`` overrides the file's.
    """
    if (duration_s is None) == (iterations is None):
        raise ConfigurationError("give a duration or a number of iterations, not both")
    if concurrency < 1:
        raise ConfigurationError("concurrency must be at least 1")
    if (duration_s is not None and duration_s <= 0) or (iterations is not None and iterations < 1):
        raise ConfigurationError("the duration and the number of iterations must be positive")
    if warmup_s < 0:
        raise ConfigurationError("the warm-up cannot be negative")
    runner = _Runner(scenario, client, concurrency, duration_s, iterations, warmup_s, seed)
    return await runner.run()


class _Runner:
    """The virtual agents of one run and what they record."""

    def __init__(
        self,
        scenario: Scenario,
        client: Client,
        concurrency: int,
        duration_s: float | None,
        iterations: int | None,
        warmup_s: float,
        seed: int | None,
    ) -> None:
        self.scenario = scenario
        self.client = client
        self.concurrency = concurrency
        self.duration_s = duration_s
        self.iterations = iterations
        self.seed = scenario.seed if seed is None else seed
        self.outcome = ScenarioOutcome(
            scenario,
            concurrency,
            warmup_s,
            steps={name: StepSeries() for name in scenario.stat_names},
        )
        self.record_from = 0.0
        self.stop_at = float("inf")
        self.claimed = 0

    async def run(self) -> ScenarioOutcome:
        start = time.perf_counter()
        self.record_from = start + self.outcome.warmup_s
        if self.duration_s is not None:
            self.stop_at = self.record_from + self.duration_s
        async with asyncio.TaskGroup() as agents:
            for index in range(self.concurrency):
                agents.create_task(self.agent(index))
        self.outcome.duration_s = max(time.perf_counter() - self.record_from, 0.0)
        return self.outcome

    def claim(self, now: float) -> bool:
        """Whether an agent may start an iteration now."""
        if now < self.record_from:
            return True
        if self.iterations is not None:
            if self.claimed >= self.iterations:
                return False
            self.claimed += 1
            return True
        return now < self.stop_at

    async def agent(self, index: int) -> None:
        rng = random.Random(f"{self.seed}:{index}") if self.seed is not None else random.Random()
        outcome = self.outcome
        iteration = 0
        while True:
            started = time.perf_counter()
            if not self.claim(started):
                return
            recording = started >= self.record_from
            context = IterationContext({}, {}, index, iteration, rng, self.scenario.vars)
            kind = await self.iterate(context, recording)
            ended = time.perf_counter()
            if recording:
                if kind is None:
                    outcome.latencies_ms.append((ended - started) * 1000.0)
                    outcome.ended_s.append(ended - self.record_from)
                else:
                    outcome.errors[kind] += 1
                    outcome.failed_s.append(ended - self.record_from)
            iteration += 1

    async def iterate(self, context: IterationContext, recording: bool) -> str | None:
        """One pass over the steps; the kind of the first failure, or None."""
        for step in self.scenario.steps:
            if isinstance(step, Call):
                kind = await self.call(step, context, recording)
            else:
                started = time.perf_counter()
                kinds = await asyncio.gather(
                    *(self.call(call, context, recording) for call in step.calls)
                )
                kind = next((found for found in kinds if found is not None), None)
                if recording and step.name is not None:
                    series = self.outcome.steps[step.name]
                    if kind is None:
                        series.samples_ms.append((time.perf_counter() - started) * 1000.0)
                    else:
                        series.errors[kind] += 1
            if kind is not None:
                return kind
        return None

    async def call(self, call: Call, context: IterationContext, recording: bool) -> str | None:
        """One tool call; the kind of its failure, or None."""
        try:
            arguments = call.build(context)
        except ReferenceFailed as exc:
            return self.failed(call, REFERENCE_ERROR, str(exc), recording)
        timeout = call.timeout if call.timeout is not None else self.scenario.timeout
        started = time.perf_counter()
        try:
            result = await self.client.call_tool(call.tool, arguments, timeout=timeout)
        except Exception as exc:  # every failure is counted, none stops the run
            return self.failed(call, error_kind(exc), f"{type(exc).__name__}: {exc}", recording)
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        if result.is_error:
            return self.failed(call, TOOL_ERROR, result.text, recording)
        if recording:
            self.outcome.steps[call.name].samples_ms.append(elapsed_ms)
        if call.name in self.scenario.referenced:
            context.results[call.name] = result
        return None

    def failed(self, call: Call, kind: str, message: str, recording: bool) -> str:
        if recording:
            self.outcome.steps[call.name].errors[kind] += 1
            self.outcome.first_error.setdefault(kind, f"{call.name}: {message}"[:500])
        return kind


# -- the Run file -----------------------------------------------------------------------------


def error_kind(error: BaseException) -> str:
    """The kind a failure is counted under, in the words of ``millimcp bench`` (``timeout``,
    ``connection``, ``http_503``, ``jsonrpc_-32602``, ``protocol``); an exception from
    outside millimcp keeps its class name, so a surprise shows as itself."""
    from millimcp.errors import (
        CallTimeout,
        ConnectionLost,
        MillimcpError,
        NotSent,
        ProtocolError,
        RequestRejected,
    )

    if isinstance(error, CallTimeout):
        return "timeout"
    if isinstance(error, ProtocolError):
        return f"jsonrpc_{error.code}"
    if isinstance(error, RequestRejected):
        return f"http_{error.status}"
    if isinstance(error, NotSent | ConnectionLost | OSError):
        return "connection"
    if isinstance(error, MillimcpError):
        return "protocol"
    return type(error).__name__


CLOSED_LOOP_NOTE = (
    "closed loop: each agent starts its next iteration when the last one ends, so a stall "
    "slows the agents down instead of showing in the latency (coordinated omission)"
)


def _timeline(outcome: ScenarioOutcome) -> list[TimelinePoint]:
    from millimcp.lab.results import TimelinePoint, percentile

    # Whole seconds: the few iterations of a last, partial second join the one before.
    seconds = max(1, round(outcome.duration_s))
    latencies: list[list[float]] = [[] for _ in range(seconds)]
    errors = [0] * seconds
    for ended, latency in zip(outcome.ended_s, outcome.latencies_ms, strict=True):
        latencies[min(int(ended), seconds - 1)].append(latency)
    for ended in outcome.failed_s:
        errors[min(int(ended), seconds - 1)] += 1
    points = []
    for second, values in enumerate(latencies):
        values.sort()
        points.append(
            TimelinePoint(
                t=float(second),
                calls=len(values),
                errors=errors[second],
                p50_ms=percentile(values, 50.0) if values else None,
                p99_ms=percentile(values, 99.0) if values else None,
            )
        )
    return points


def _histogram(latencies_ms: Sequence[float]) -> str | None:
    """The HDR histogram of the latencies, as ``millimcp bench`` writes it (microseconds)."""
    if not latencies_ms:
        return None
    from millimcp.lab.recording import HIGHEST_US, encode_histogram, new_histogram

    histogram = new_histogram()
    microseconds = Counter(min(max(1, round(ms * 1000.0)), HIGHEST_US) for ms in latencies_ms)
    for value, count in microseconds.items():
        histogram.record_value(value, count)
    return encode_histogram(histogram)


def to_run(
    outcome: ScenarioOutcome,
    *,
    target: str,
    transport: Literal["http", "stdio"],
    era: Literal["modern", "handshake"],
    server: str | None = None,
    started_at: str | None = None,
    seed: int | None = None,
) -> Run:
    """The Run file of a scenario run: ``calls`` are successful iterations, ``latency_ms``
    their end-to-end latency, ``steps`` one entry per call and named fan-out."""
    from millimcp.lab.results import MAX_SAMPLES, Run, Step, host_info, latency_summary, now_iso

    latencies = outcome.latencies_ms
    samples = list(latencies)
    if len(samples) > MAX_SAMPLES:
        samples = random.Random(0).sample(samples, MAX_SAMPLES)
    steps = {
        name: Step(
            calls=series.calls,
            errors=sum(series.errors.values()),
            latency_ms=latency_summary(series.samples_ms),
        )
        for name, series in outcome.steps.items()
    }
    scenario = outcome.scenario
    return Run(
        kind="scenario",
        started_at=started_at or now_iso(),
        target=target,
        transport=transport,
        era=era,
        server=server,
        args={"scenario": scenario.name, "seed": scenario.seed if seed is None else seed},
        mode="closed",
        concurrency=outcome.concurrency,
        duration_s=round(outcome.duration_s, 6),
        warmup_s=outcome.warmup_s,
        calls=outcome.iterations,
        errors=dict(outcome.errors),
        throughput=outcome.throughput,
        latency_ms=latency_summary(latencies),
        samples_ms=samples,
        histogram=_histogram(latencies),
        timeline=_timeline(outcome),
        steps=steps,
        host=host_info(),
        notes=[CLOSED_LOOP_NOTE],
        client="full",
    )


# -- the command ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from millimcp.lab.target import add_target_arguments

    parser.add_argument("file", metavar="FILE.toml", help="the scenario (see --help-format)")
    add_target_arguments(parser)
    parser.add_argument(
        "-c", "--concurrency", type=int, default=1, metavar="N", help="virtual agents (closed loop)"
    )
    length = parser.add_mutually_exclusive_group()
    length.add_argument(
        "-d", "--duration", type=float, metavar="S", help="seconds to run (default 10)"
    )
    length.add_argument("-n", "--iterations", type=int, metavar="N", help="iterations to run")
    parser.add_argument(
        "--warmup", type=float, default=0.0, metavar="S", help="seconds run before recording"
    )
    parser.add_argument("--seed", type=int, help="seed of the generators (overrides the file's)")
    parser.add_argument("--export-json", metavar="PATH", help="write the Run file here")


def run(args: argparse.Namespace) -> int:
    try:
        scenario = load_scenario(args.file)
        return asyncio.run(_run_command(args, scenario))
    except ConfigurationError as exc:
        print(f"millimcp scenario: {exc}", file=sys.stderr)
        return 2


async def _run_command(args: argparse.Namespace, scenario: Scenario) -> int:
    from millimcp.lab.results import now_iso, save_run
    from millimcp.lab.target import connect, target_from_args

    target = target_from_args(args)
    duration = args.duration if args.iterations is None and args.duration is not None else None
    if args.iterations is None and duration is None:
        duration = 10.0
    started_at = now_iso()
    async with connect(
        target,
        era=args.era,
        call_timeout=args.timeout,
        max_in_flight=max(1, args.concurrency) * scenario.width,
    ) as connection:
        outcome = await run_scenario(
            scenario,
            connection.client,
            concurrency=args.concurrency,
            duration_s=duration,
            iterations=args.iterations,
            warmup_s=args.warmup,
            seed=args.seed,
        )
        result = to_run(
            outcome,
            target=str(target),
            transport=connection.transport,
            era=connection.era,
            server=connection.server,
            started_at=started_at,
            seed=args.seed,
        )
    print(format_outcome(outcome, result))
    if args.export_json:
        save_run(result, args.export_json)
        print(f"\nwrote {args.export_json}")
    return 0 if outcome.iterations else 1


def format_outcome(outcome: ScenarioOutcome, result: Run) -> str:
    """The terminal summary: end-to-end latency, then one line per step."""
    scenario = outcome.scenario
    latency = result.latency_ms
    failed = sum(outcome.errors.values())
    where = f"{result.target} ({result.transport}, {result.era} era"
    where += f", {result.server})" if result.server else ")"
    lines = [
        f"Scenario {scenario.name!r} against {where}",
        f"  {outcome.concurrency} agent(s), closed loop, {outcome.duration_s:.1f} s"
        + (f" after {outcome.warmup_s:g} s warm-up" if outcome.warmup_s else "")
        + f": {outcome.iterations:,} iterations, {outcome.throughput:,.1f}/s, {failed:,} failed",
        "",
    ]
    if outcome.iterations:
        lines += [
            f"  Iteration:  {duration(latency['mean'])} ± {duration(latency['stdev'])}"
            f"   (min {duration(latency['min'])} … max {duration(latency['max'])})",
            f"              p50 {duration(latency['p50'])}   p90 {duration(latency['p90'])}"
            f"   p95 {duration(latency['p95'])}   p99 {duration(latency['p99'])}"
            f"   p99.9 {duration(latency['p999'])}",
            "",
        ]
    header = f"  {'step':<22}{'calls':>9}{'errors':>8}{'mean':>11}{'p50':>11}{'p95':>11}"
    lines.append(header + f"{'p99':>11}{'max':>11}")
    steps = result.steps or {}
    for step in scenario.steps:
        rows: list[tuple[str, str]] = []
        if isinstance(step, Parallel):
            if step.name is not None:
                rows.append((step.name, f"{step.name} (fan-out)"))
            rows += [(call.name, f"  {call.name}") for call in step.calls]
        else:
            rows.append((step.name, step.name))
        for name, shown in rows:
            found = steps.get(name)
            if found is None:
                continue
            numbers = found.latency_ms
            row = f"  {shown:<22}{found.calls:>9,}{found.errors:>8,}"
            row += "".join(
                f"{duration(numbers[key]) if found.calls else '-':>11}"
                for key in ("mean", "p50", "p95", "p99", "max")
            )
            lines.append(row)
    if outcome.errors:
        lines.append("")
        for kind, count in outcome.errors.most_common():
            first = outcome.first_error.get(kind, "")
            lines.append(f"  {count:,} failed with {kind}" + (f"; first: {first}" if first else ""))
    note = textwrap.fill(
        CLOSED_LOOP_NOTE + ".", width=96, initial_indent="  Note: ", subsequent_indent=" " * 8
    )
    lines += ["", note]
    return "\n".join(lines)
