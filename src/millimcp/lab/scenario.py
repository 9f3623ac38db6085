"""``millimcp scenario FILE.toml TARGET``: N virtual agents run a scenario (sequences and
fan-outs of tool calls, values passed between steps) in a closed loop through one pooled
millimcp Client, and report the end-to-end latency of an iteration and each step's.

The agents and their recording window are in :mod:`millimcp.lab.scenario_runner`
(:func:`run_scenario`, with ``cooldown=True`` to keep the load on until the recorded
iterations end); this module adds the Run file, the terminal summary and the command.

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
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from millimcp.errors import ConfigurationError, MillimcpError, MissingExtra
from millimcp.lab._table import duration
from millimcp.lab.recording import histogram_class
from millimcp.lab.results import TOOL_ERROR, error_kind
from millimcp.lab.scenario_format import (
    Call,
    Parallel,
    Scenario,
    load_scenario,
    parse_scenario,
    step_value,
)
from millimcp.lab.scenario_runner import (
    REFERENCE_ERROR,
    ScenarioOutcome,
    StepSeries,
    run_scenario,
)

if TYPE_CHECKING:
    from millimcp.lab.results import Run, TimelinePoint

__all__ = [
    "CLOSED_LOOP_NOTE",
    "COOLDOWN_NOTE",
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

CLOSED_LOOP_NOTE = (
    "closed loop: each agent starts its next iteration when the last one ends, so a stall "
    "slows the agents down instead of showing in the latency (coordinated omission)"
)
COOLDOWN_NOTE = (
    "cooldown: the load stayed on until the recorded iterations ended (the iterations that "
    "started after the window ran, unrecorded)"
)


def _timeline(outcome: ScenarioOutcome) -> list[TimelinePoint]:
    from millimcp.lab.results import TimelinePoint, percentile

    # Whole seconds: the few iterations of a last, partial second join the one before. With
    # a cooldown, an iteration counts in the second it started (the window's seconds hold
    # exactly the recorded iterations); without, in the second it ended.
    seconds = max(1, round(outcome.duration_s))
    latencies: list[list[float]] = [[] for _ in range(seconds)]
    errors = [0] * seconds
    if outcome.cooldown:
        times, failed = outcome.started_s, outcome.failed_started_s
    else:
        times, failed = outcome.ended_s, outcome.failed_s
    for at, latency in zip(times, outcome.latencies_ms, strict=True):
        latencies[min(int(at), seconds - 1)].append(latency)
    for at in failed:
        errors[min(max(int(at), 0), seconds - 1)] += 1
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
        notes=[CLOSED_LOOP_NOTE, *([COOLDOWN_NOTE] if outcome.cooldown else [])],
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
    parser.add_argument(
        "--cooldown",
        action="store_true",
        help="keep the load on (unrecorded) until the recorded iterations end",
    )
    parser.add_argument("--seed", type=int, help="seed of the generators (overrides the file's)")
    parser.add_argument("--export-json", metavar="PATH", help="write the Run file here")


def run(args: argparse.Namespace) -> int:
    try:
        histogram_class()  # the Run file needs it: say so before running, not after
        scenario = load_scenario(args.file)
        return asyncio.run(_run_command(args, scenario))
    except MissingExtra:
        raise  # the command line says which extra to install
    except ConfigurationError as exc:
        print(f"millimcp scenario: {exc}", file=sys.stderr)
        return 2
    except (MillimcpError, OSError) as exc:  # the target could not be reached or set up
        print(f"millimcp scenario: {exc}", file=sys.stderr)
        return 1


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
            cooldown=args.cooldown,
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
        + (", load kept on to the end" if outcome.cooldown else "")
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
