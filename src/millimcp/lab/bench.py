"""Load one tool of any MCP server and report its latency: ``millimcp bench``.

::

    millimcp bench http://127.0.0.1:8000/mcp --tool echo --args '{"text": "hi"}' -c 8 -d 10
    millimcp bench http://127.0.0.1:8000/mcp --tool echo --rate 2000 -d 30 --export-json a.json
    millimcp bench --tool echo --args '{"text": "hi"}' -n 2000 -- python server.py --stdio

``-c N`` alone is a closed loop (N calls in flight, each sent when the previous one is
answered); ``--rate R`` is an open loop (R calls per second on a fixed schedule, latency from
each call's due time, at most ``-c`` in flight, default 64, the rest queued: their wait
counts). ``--processes P`` splits the load over P client processes when one core cannot
drive it; their HDR histograms merge exactly.

Over HTTP the calls are pre-serialized requests on raw keep-alive connections (the request
the millimcp Client made once, resent with a new id); ``--client full`` makes every call
through the Client instead, and stdio targets always do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import os
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from millimcp.errors import ConfigurationError, MillimcpError, MissingExtra
from millimcp.lab.loadgen import ChildSpec, Plan, prepare_full, prepare_lean, run_event_loop
from millimcp.lab.recording import LoadReport, Merger, TickReport
from millimcp.lab.results import Run, host_info, now_iso, save_run
from millimcp.lab.target import (
    Connection,
    Target,
    add_call_arguments,
    connect,
    ssl_context,
    target_from_args,
)

__all__ = ["CLOSED_LOOP_NOTE", "add_arguments", "bench", "format_run", "run", "write_csv"]

CLOSED_LOOP_NOTE: Final = (
    "closed loop: each slot sends its next call only when the previous one is answered, so "
    "a server stall holds back the calls that would have been sent and the percentiles hide "
    "it (coordinated omission); use --rate for an open loop"
)
DEFAULT_OPEN_CONCURRENCY: Final = 64
CPU_BOUND: Final = 0.9
"""Above this share of a core, a note says the generator may be the bottleneck."""
_ID_SPACE: Final = 10**12
CSV_FIELDS: Final = (
    "target",
    "tool",
    "mode",
    "concurrency",
    "rate",
    "processes",
    "duration_s",
    "calls",
    "errors",
    "throughput",
    "min_ms",
    "mean_ms",
    "stdev_ms",
    "p50_ms",
    "p90_ms",
    "p95_ms",
    "p99_ms",
    "p999_ms",
    "max_ms",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_call_arguments(parser)
    parser.add_argument(
        "-c",
        "--concurrency",
        type=int,
        metavar="N",
        help="closed loop: calls in flight (default 1 per process); open loop: the most in flight "
        f"(default {DEFAULT_OPEN_CONCURRENCY})",
    )
    parser.add_argument(
        "--rate", type=float, metavar="R", help="open loop: calls per second, fixed schedule"
    )
    length = parser.add_mutually_exclusive_group()
    length.add_argument(
        "-d", "--duration", type=float, metavar="S", help="measured seconds (default 10)"
    )
    length.add_argument("-n", "--requests", type=int, metavar="N", help="measured calls")
    parser.add_argument(
        "--warmup", type=float, default=1.0, metavar="S", help="unmeasured seconds first"
    )
    parser.add_argument(
        "--processes", type=int, default=1, metavar="P", help="client processes (default 1)"
    )
    parser.add_argument(
        "--client",
        choices=("lean", "full"),
        default="lean",
        help="HTTP: pre-serialized requests on raw connections (lean), or the millimcp "
        "Client for every call (full); stdio always uses the Client",
    )
    parser.add_argument(
        "--as-task",
        action="store_true",
        help="run every call as a task (io.modelcontextprotocol/tasks) and wait for its result: "
        "the latency is the task's whole round trip, polling included (the full client, one "
        "process)",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a live progress bar on stderr (default: when stderr is a terminal)",
    )
    parser.add_argument("--export-json", metavar="PATH", help="write the Run file")
    parser.add_argument("--export-csv", metavar="PATH", help="write the summary as CSV")


def run(args: argparse.Namespace) -> int:
    try:
        target = target_from_args(args)
        arguments = json.loads(args.args)
        if not isinstance(arguments, dict):
            raise ConfigurationError("--args must be a JSON object")
        _check(args)
    except (ConfigurationError, json.JSONDecodeError) as exc:
        print(f"millimcp bench: {exc}", file=sys.stderr)
        return 2
    progress = args.progress if args.progress is not None else sys.stderr.isatty()
    try:
        result = run_event_loop(
            bench(
                target,
                args.tool,
                arguments,
                concurrency=args.concurrency,
                rate=args.rate,
                duration_s=args.duration,
                requests=args.requests,
                warmup_s=args.warmup,
                processes=args.processes,
                client=args.client,
                era=args.era,
                timeout_s=args.timeout,
                progress=progress,
                as_task=args.as_task,
            )
        )
    except MissingExtra:
        raise  # the command line says which extra to install
    except (MillimcpError, OSError) as exc:
        print(f"millimcp bench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("millimcp bench: interrupted", file=sys.stderr)
        return 130
    print(format_run(result))
    if args.export_json:
        save_run(result, args.export_json)
    if args.export_csv:
        write_csv(result, args.export_csv)
    return 0 if result.calls else 1


def _check(args: argparse.Namespace) -> None:
    if args.rate is not None and args.rate <= 0:
        raise ConfigurationError("--rate must be above 0")
    if args.concurrency is not None and args.concurrency < 1:
        raise ConfigurationError("-c must be at least 1")
    if args.processes < 1:
        raise ConfigurationError("--processes must be at least 1")
    if args.concurrency is not None and args.concurrency < args.processes:
        raise ConfigurationError("-c must be at least --processes (each process needs one)")
    if args.duration is not None and args.duration <= 0:
        raise ConfigurationError("-d must be above 0")
    if args.requests is not None and args.requests < 1:
        raise ConfigurationError("-n must be at least 1")
    if args.warmup < 0:
        raise ConfigurationError("--warmup must not be negative")
    if args.as_task and args.processes > 1:
        raise ConfigurationError("--as-task runs in one process (drop --processes)")


# -- running --------------------------------------------------------------------------------


async def bench(
    target: Target,
    tool: str,
    arguments: dict[str, Any] | None,
    *,
    concurrency: int | None = None,
    rate: float | None = None,
    duration_s: float | None = None,
    requests: int | None = None,
    warmup_s: float = 1.0,
    processes: int = 1,
    client: Literal["lean", "full"] = "lean",
    era: Literal["auto", "modern", "handshake"] = "auto",
    timeout_s: float | None = 30.0,
    progress: bool = False,
    as_task: bool = False,
) -> Run:
    """Run one benchmark and return its :class:`~millimcp.lab.results.Run`.

    One call goes through the Client first (it finds the era, checks the tool and arguments,
    and gives the lean generator its request); a protocol error there is raised. ``as_task``:
    every call starts a task and waits for its result (the full Client, one process).
    """
    if as_task and processes > 1:
        raise ConfigurationError("as_task runs in one process")
    mode: Literal["closed", "open"] = "open" if rate is not None else "closed"
    slots = concurrency or (DEFAULT_OPEN_CONCURRENCY if mode == "open" else processes)
    if duration_s is None and requests is None:
        duration_s = 10.0
    lean = client == "lean" and target.kind == "http" and not as_task
    started_at = now_iso()
    merger = Merger(processes)
    async with connect(target, era=era, call_timeout=timeout_s, max_in_flight=slots) as link:
        if lean:
            probe, template = await link.call_template(tool, arguments)
        else:
            probe, template = await link.client.call_tool(tool, arguments), None
        if probe.is_error:
            print(
                f"millimcp bench: {tool} answered with isError ({probe.text[:200]!r}); "
                "such calls count as tool_error",
                file=sys.stderr,
            )
        plans = _split(mode, slots, rate, duration_s, requests, warmup_s, timeout_s, processes)
        with _progress(progress, merger, duration_s, requests, warmup_s) as on_tick:
            if processes == 1:
                if template is not None:
                    ready = await prepare_lean(
                        template, plans[0], on_tick, id_base=_ID_SPACE, ssl=ssl_context(target)
                    )
                else:
                    ready = await prepare_full(
                        link.client, tool, arguments, plans[0], on_tick, as_task=as_task
                    )
                merger.add_report(await ready.go(time.perf_counter_ns()))
            else:
                specs = [
                    ChildSpec(
                        plan=plan,
                        tool=tool,
                        arguments=arguments,
                        id_base=(k + 1) * _ID_SPACE,
                        template=template,
                        target=target,
                        era=link.era,
                    )
                    for k, plan in enumerate(plans)
                ]
                await _run_children(specs, merger, on_tick)
        return _run_record(
            link,
            target,
            tool,
            arguments,
            mode,
            slots,
            rate,
            processes,
            warmup_s,
            lean,
            merger,
            started_at,
        )


def _split(
    mode: Literal["closed", "open"],
    slots: int,
    rate: float | None,
    duration_s: float | None,
    requests: int | None,
    warmup_s: float,
    timeout_s: float | None,
    processes: int,
) -> list[Plan]:
    """Each process's share: slots and calls split as evenly as integers allow, the rate
    split with interleaved phases."""
    plans = []
    for k in range(processes):
        share = slots // processes + (1 if k < slots % processes else 0)
        calls = None
        if requests is not None:
            calls = requests // processes + (1 if k < requests % processes else 0)
        plans.append(
            Plan(
                mode=mode,
                concurrency=max(1, share),
                duration_s=duration_s if requests is None else None,
                requests=calls,
                warmup_s=warmup_s,
                rate=None if rate is None else rate / processes,
                phase_s=0.0 if rate is None else k / rate,
                timeout_s=timeout_s,
            )
        )
    return plans


class _ChildLine(msgspec.Struct):
    ready: bool = False
    tick: TickReport | None = None
    report: LoadReport | None = None
    failed: str | None = None


_CHILD_LINE: Final = msgspec.json.Decoder(_ChildLine)


async def _run_children(
    specs: list[ChildSpec], merger: Merger, on_tick: Callable[[TickReport], None]
) -> None:
    """Start one ``python -m millimcp.lab.loadgen`` per spec, start them together, merge."""
    children: list[asyncio.subprocess.Process] = []
    try:
        for spec in specs:
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "millimcp.lab.loadgen",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            children.append(child)
            assert child.stdin is not None
            child.stdin.write(msgspec.json.encode(spec) + b"\n")
        for child in children:
            line = await _read_line(child)
            if not line.ready:
                raise ConfigurationError(f"a client process failed to start: {line.failed}")
        start_at = time.time() + 0.05 * len(children)
        for child in children:
            assert child.stdin is not None
            child.stdin.write(b'{"start_at": %r}\n' % start_at)
            await child.stdin.drain()
        await asyncio.gather(*(_follow(child, merger, on_tick) for child in children))
    finally:
        for child in children:
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
            if child.stdin is not None:
                child.stdin.close()
            await child.wait()


async def _read_line(child: asyncio.subprocess.Process) -> _ChildLine:
    assert child.stdout is not None
    raw = await child.stdout.readline()
    if not raw:
        await child.wait()
        return _ChildLine(failed=f"exited with status {child.returncode}")
    return _CHILD_LINE.decode(raw)


async def _follow(
    child: asyncio.subprocess.Process, merger: Merger, on_tick: Callable[[TickReport], None]
) -> None:
    while True:
        line = await _read_line(child)
        if line.tick is not None:
            on_tick(line.tick)
        elif line.report is not None:
            merger.add_report(line.report)
            return
        elif line.failed is not None:
            raise ConfigurationError(f"a client process failed: {line.failed}")


@contextlib.contextmanager
def _progress(
    enabled: bool,
    merger: Merger,
    duration_s: float | None,
    requests: int | None,
    warmup_s: float,
) -> Any:
    """The tick callback: it merges each tick and, when ``enabled``, draws a rich progress
    bar on stderr with the running p50/p99."""
    if not enabled:
        yield merger.add_tick
        return
    try:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError as exc:
        raise MissingExtra("lab", "the progress bar", "rich") from exc

    bar = Progress(
        TextColumn("[bold]bench"),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[status]}"),
        console=Console(stderr=True),
        transient=True,
    )
    total = float(requests) if requests is not None else float(duration_s or 0.0)
    task = bar.add_task("bench", total=total, status=f"warming up ({warmup_s:g} s)")
    began = time.monotonic() + warmup_s

    def on_tick(tick: TickReport) -> None:
        merger.add_tick(tick)
        elapsed = max(time.monotonic() - began, 1e-9)
        done = merger.running_calls if requests is not None else elapsed
        percentiles = merger.running_percentiles_ms()
        status = f"{merger.running_calls / elapsed:,.0f} calls/s"
        if percentiles is not None:
            status += f"  p50 {_ms(percentiles[0])}  p99 {_ms(percentiles[1])}"
        if merger.running_errors:
            status += f"  errors {merger.running_errors:,}"
        bar.update(task, completed=min(done, total), status=status)

    with bar:
        yield on_tick


def _run_record(
    link: Connection,
    target: Target,
    tool: str,
    arguments: dict[str, Any] | None,
    mode: Literal["closed", "open"],
    slots: int,
    rate: float | None,
    processes: int,
    warmup_s: float,
    lean: bool,
    merger: Merger,
    started_at: str,
) -> Run:
    reports = merger.reports
    window_s = max(r.window_s for r in reports)
    calls = merger.calls()
    notes = [CLOSED_LOOP_NOTE] if mode == "closed" else []
    busiest = max(r.cpu_s / r.window_s if r.window_s >= 0.5 else 0.0 for r in reports)
    if busiest > CPU_BOUND:
        notes.append(
            f"a client process used {busiest:.0%} of a core: the generator may be the "
            "bottleneck (try --processes)"
        )
    return Run(
        kind="bench",
        started_at=started_at,
        target=str(target),
        transport=target.kind,
        era=link.era,
        server=link.server,
        tool=tool,
        args=arguments,
        mode=mode,
        concurrency=slots,
        rate=rate,
        processes=processes,
        duration_s=window_s,
        warmup_s=warmup_s,
        calls=calls,
        errors=merger.errors(),
        throughput=calls / window_s if window_s else 0.0,
        latency_ms=merger.latency_ms(),
        samples_ms=merger.samples_ms(),
        histogram=merger.encoded_histogram(),
        timeline=merger.timeline(),
        host=host_info(),
        notes=notes,
        client="lean" if lean else "full",
    )


# -- output ---------------------------------------------------------------------------------


def _ms(value: float) -> str:
    if value < 10:
        return f"{value:.3f} ms"
    if value < 100:
        return f"{value:.2f} ms"
    return f"{value:,.1f} ms"


def format_run(run: Run) -> str:
    """The summary, in the style of hyperfine."""
    lat = run.latency_ms
    args = json.dumps(run.args, separators=(",", ":")) if run.args else "{}"
    era = f"{run.era} era"
    if run.mode == "open":
        load = f"open loop, {run.rate:,.6g} calls/s, at most {run.concurrency} in flight"
    else:
        load = f"closed loop, {run.concurrency} in flight"
    processes = "1 process" if run.processes == 1 else f"{run.processes} processes"
    length = f"{run.duration_s:.3g} s after {run.warmup_s:g} s warmup"
    total = run.calls + run.error_count
    errors = "none"
    if run.errors:
        share = run.error_count / total if total else 1.0
        errors = ", ".join(f"{k}: {v:,}" for k, v in run.errors.items()) + f" ({share:.2%})"
    lines = [
        f"Benchmark: {run.tool} {args} on {run.target}",
        f"  Server:              {run.server or 'unnamed'}, {era}, {run.transport.upper()}, "
        f"{run.client or 'full'} client",
        f"  Mode:                {load}, {processes}, {length}",
        f"  Time (mean ± σ):     {_ms(lat['mean'])} ± {_ms(lat['stdev'])}",  # noqa: RUF001
        f"  Range (min … max):   {_ms(lat['min'])} … {_ms(lat['max'])}    {run.calls:,} calls",
        f"  Percentiles:         p50 {_ms(lat['p50'])}   p90 {_ms(lat['p90'])}   "
        f"p95 {_ms(lat['p95'])}   p99 {_ms(lat['p99'])}   p99.9 {_ms(lat['p999'])}",
        f"  Throughput:          {run.throughput:,.0f} calls/s",
        f"  Errors:              {errors}",
    ]
    for note in run.notes:
        lines += textwrap.wrap(
            note, width=100, initial_indent="  Note: ", subsequent_indent="        "
        )
    return "\n".join(lines)


def write_csv(run: Run, path: str | os.PathLike[str]) -> None:
    """One header line and one row: the run's summary (latencies in ms)."""
    lat = run.latency_ms
    row: dict[str, Any] = {
        "target": run.target,
        "tool": run.tool,
        "mode": run.mode,
        "concurrency": run.concurrency,
        "rate": "" if run.rate is None else repr(run.rate),
        "processes": run.processes,
        "duration_s": repr(run.duration_s),
        "calls": run.calls,
        "errors": run.error_count,
        "throughput": repr(run.throughput),
    }
    for key in ("min", "mean", "stdev", "p50", "p90", "p95", "p99", "p999", "max"):
        row[f"{key}_ms"] = repr(lat[key])
    with Path(path).open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerow(row)
