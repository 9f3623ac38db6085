"""``make demo``: the order-analysis service of SEEDS S6, naive vs tuned, measured here.

    python examples/orders/demo.py [-c 200] [--think 8s] [--quick | --full]
        [--steps network|all|none|a,b] [--db URL] [--rtt 50ms] [--bandwidth 2mbit] [--loss 0]
        [--jitter 0ms] [--no-wan] [--no-tls]

What it does, every number measured on this machine:

1. seeds the SQLite database on first run (200,000 orders; reused afterwards; ``.demo/``), or
   a server database given with ``--db`` (MariaDB, PostgreSQL);
2. starts the recommendation service (400 ms a call) and the order service as real server
   processes on 127.0.0.1: ``naive`` (S6.1), ``tuned`` (S6.3) and, for the per-step A/B, one
   more per server-side step: tuned with that one step turned off; each serves HTTPS (a local
   CA in ``.demo/tls/``) behind its own link emulator (``millimcp link``: the WAN of
   ``orders.wan``, RTT 50 ms and 2 Mbit/s per connection by default), which the agents call;
3. primes each service's recommendation cache with the customers of the workload (a service
   that has run a while has them; the naive one has no cache);
4. runs the agent scenario of S7.3 (``agent.toml``: get_order, then get_recommendations, then
   3 x get_profile at once) with N agents in a closed loop (each starts its next iteration
   when the last one ends) against naive, then tuned, through the lab's scenario runner with a
   cooldown (:mod:`millimcp.lab.scenario_runner`: the load stays on until the recorded
   iterations end), each with its own client: naive opens a new connection per call and
   sends every call at once, tuned keeps a pool alive and caps calls in flight;
5. profiles one ``analyze_orders`` call on each (the lab's profile: connect, encode, upload,
   the server's stages from ``Server-Timing``, download, decode);
6. A/B tests each S6.3 step alone: tuned, tuned without that step, tuned again (the two tuned
   halves pooled, so a drift of the machine's load hits both sides), judged on P50, P95 and
   P99 together with the lab's compare (bootstrap intervals, S6.5);
7. prints the S6.4 tables (per iteration and per request), the S6.2 breakdown and the
   per-step table with the article's claim for each step, and writes the HTML report (the
   lab's report, naive vs tuned), the run files and ``summary.json``.

``--quick`` is for tests (a second or two per run), ``--full`` for steadier numbers and a
concurrency ramp (several minutes).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `orders` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import math
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orders.agents import THINK_S
from orders.auth import mint
from orders.config import (
    DEFAULT_ORDERS,
    FLAGS,
    NAIVE,
    TUNED,
    OrdersConfig,
    data_dir,
    default_db_url,
)
from orders.tls import Certificates, client_context, ensure_certificates
from orders.wan import DEFAULT_BANDWIDTH, DEFAULT_RTT, Wan, claims_rows, write_summary
from orders.workload import (
    CLIENT_CAP,
    CpuMeter,
    Measured,
    Phase,
    agent_client,
    client_cap,
    hot_customers,
    load_workload,
    measure,
    merge,
    prime,
    run_phases,
)

if TYPE_CHECKING:
    from millimcp.lab.compare import Comparison
    from millimcp.lab.profile import Profile
    from millimcp.lab.scenario import Scenario
    from orders.db import Seeded

__all__ = ["main"]

EXAMPLES = Path(__file__).resolve().parents[1]
QUICK_THINK_S = 0.1
"""``--quick``'s think time: its runs last a second or two."""
NETWORK_STEPS = ("pooled_client", "trimmed", "compression")
"""The steps A/B'd by default: keep-alive, trimming and compression, the article's two
largest wins (connect 150 -> 15 ms, transfer 260 -> 30 ms, S6.3), which only a network shows
(``--steps all`` for every step: several minutes more)."""
CLIENT_FLAGS = ("pooled_client", "client_cap")
"""Steps the agents' client takes (the server ignores them)."""
PROFILE_TOOL = "analyze_orders"
THRESHOLD_PCT = 10.0
"""A step's effect counts when a metric moves by more than this and significantly."""
HELD_PCT = 99.0
"""A concurrency is held while at least this share of iterations succeeds."""
CONTROL = "nothing (A/A)"
"""The control row of the A/B: tuned against a second tuned process, the same way (the noise
floor, the differences between two processes of one configuration included)."""
STEP_AGENTS = 20
"""Without a think time (``--think 0s``), at most this many agents in the A/B runs: enough to
saturate the server (so a step's cost shows) and for the client cap (30 calls) to bind, with
iterations short enough that most of a 2 s run is recorded. With one, the A/B runs the agents
of the naive and tuned runs."""
MIN_SAMPLES = 5
LINK_CPU: dict[str, float] = {}
"""The link emulator's CPU (% of one core) during each run of the agents, by label."""
"""Fewer recorded iterations than this: the latency of that run is not compared."""


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


# -- processes --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Process:
    """A server process this demo started (``python -m ...`` from ``examples/``)."""

    name: str
    port: int
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode}:\n{tail}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: nothing listening on port {self.port}")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


@dataclass
class Fleet:
    """The processes the demo started; all stopped when it ends, however it ends."""

    logs: Path
    processes: list[Process] = field(default_factory=list)

    def start(
        self,
        name: str,
        args: Sequence[str],
        port_args: Callable[[int], Sequence[str]] = lambda port: ("--port", str(port)),
    ) -> Process:
        port = free_port()
        log = self.logs / f"{name}.out"
        path = [str(EXAMPLES), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                [sys.executable, "-m", *args, *port_args(port)],
                cwd=EXAMPLES,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        process = Process(name, port, popen, log)
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in self.processes:  # all at once, then wait for each
            if process.popen.poll() is None:
                process.popen.terminate()
        for process in self.processes:
            process.stop()


@contextlib.contextmanager
def fleet(logs: Path) -> Iterator[Fleet]:
    started = Fleet(logs)
    try:
        yield started
    finally:
        started.stop()


@dataclass
class Service:
    """One configuration of the order service, running."""

    label: str
    config: OrdersConfig
    process: Process
    front: Process | None = None
    """The link emulator in front of it (the WAN), if any: the agents call through it."""
    ssl: ssl.SSLContext | None = None
    """The agents' TLS context (trusting the demo's CA); None: plain HTTP."""

    @property
    def url(self) -> str:
        port = (self.front or self.process).port
        return f"http{'s' if self.ssl else ''}://127.0.0.1:{port}/mcp"

    @property
    def direct_url(self) -> str:
        """The service itself, not through the link (for the setup: priming its cache)."""
        return f"http{'s' if self.ssl else ''}://127.0.0.1:{self.process.port}/mcp"


def server_args(
    config: OrdersConfig,
    db_url: str,
    recommender: str,
    orders: int,
    log: Path,
    tls: Certificates | None = None,
) -> list[str]:
    args = ["orders.server", "--preset", "naive", "--db", db_url, "--recommender", recommender]
    args += ["--orders", str(orders), "--log-file", str(log)]
    if tls is not None:
        args += ["--certfile", str(tls.certfile), "--keyfile", str(tls.keyfile)]
    for flag in FLAGS:
        if flag not in CLIENT_FLAGS and getattr(config, flag):
            args += ["--set", f"{flag}=true"]
    return args


def link_args(wan: Wan, target: int, port: int) -> list[str]:
    """The link emulator's arguments: listening on ``port``, in front of ``target``."""
    return wan.link_args(port, target)


def without(flag: str) -> OrdersConfig:
    if flag == CONTROL:
        return TUNED
    return dataclasses.replace(TUNED, **{flag: False})  # type: ignore[arg-type]


def recommender_requests(base: str) -> int | None:
    """How often the recommendation service has been asked so far."""
    try:
        with urllib.request.urlopen(f"{base}/stats", timeout=10) as response:
            return int(json.loads(response.read())["requests"])
    except (OSError, ValueError, KeyError):
        return None


# -- formatting -------------------------------------------------------------------------------


def ms(value: float | None) -> str:
    """A duration given in ms, with three significant digits in a fitting unit."""
    if value is None or value != value:
        return "-"
    if abs(value) < 1.0:
        return f"{value * 1000:.0f} µs"
    if abs(value) < 100.0:
        return f"{value:.3g} ms"
    if abs(value) < 1000.0:
        return f"{value:.0f} ms"
    return f"{value / 1000:.3g} s"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def shown(path: Path) -> str:
    """``path`` relative to the current directory when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def kb(size: int) -> str:
    return f"{size / 1000:.1f} KB"


def table(head: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """Plain aligned text; ``align`` has an 'l' or 'r' per column (default: first left)."""
    align = align or "l" + "r" * (len(head) - 1)
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(width) if side == "l" else cell.rjust(width)
            for cell, width, side in zip(cells, widths, align, strict=True)
        ]
        return "  " + "  ".join(parts).rstrip()

    rule = "  " + "  ".join("-" * width for width in widths)
    return "\n".join([line(head), rule, *(line(row) for row in rows)])


def ratio(before: float | None, after: float | None, *, lower_is_better: bool = True) -> str:
    if before is None or after is None or before <= 0 or after <= 0:
        return "-"
    factor = before / after if lower_is_better else after / before
    if 1 / 1.05 < factor < 1.05:
        return "same"
    return f"{factor:.1f}x better" if factor > 1 else f"{1 / factor:.1f}x worse"


_BEGAN = time.perf_counter()


def section(title: str) -> None:
    at = f" {time.perf_counter() - _BEGAN:.0f} s"
    print(f"\n== {title} " + "=" * max(0, 87 - len(title) - len(at)) + at, flush=True)


def progress(text: str) -> None:
    print(f"  .. {text}", flush=True)


# -- S6.4 -------------------------------------------------------------------------------------


def cpu_per_iteration(measured: Measured) -> float | None:
    """Server CPU time (ms) per iteration."""
    return measured.server_cpu_per_iteration_ms


def held(measured: Measured, concurrency: int, ramp: dict[str, int | None] | None) -> str:
    if ramp is not None and measured.label in ramp:
        level = ramp[measured.label]
        return "below 25" if level is None else str(level)
    return f">= {concurrency}" if measured.success_pct >= HELD_PCT else f"< {concurrency}"


def s64_table(
    naive: Measured,
    tuned: Measured,
    concurrency: int,
    ramp: dict[str, int | None] | None,
    asked: dict[str, int | None],
) -> str:
    a, b = naive.run.latency_ms, tuned.run.latency_ms

    def asked_text(measured: Measured) -> str:
        count = asked.get(measured.label)
        return "-" if count is None else f"{count:,}"

    rows = [
        ["mean", ms(a["mean"]), ms(b["mean"]), ratio(a["mean"], b["mean"])],
        ["P95", ms(a["p95"]), ms(b["p95"]), ratio(a["p95"], b["p95"])],
        ["P99", ms(a["p99"]), ms(b["p99"]), ratio(a["p99"], b["p99"])],
        [
            "server CPU (% of one core)",
            pct(naive.server_cpu_pct),
            pct(tuned.server_cpu_pct),
            "",
        ],
        [
            "server CPU per iteration",
            ms(cpu_per_iteration(naive)),
            ms(cpu_per_iteration(tuned)),
            ratio(cpu_per_iteration(naive), cpu_per_iteration(tuned)),
        ],
        [
            "highest concurrency held",
            held(naive, concurrency, ramp),
            held(tuned, concurrency, ramp),
            "",
        ],
        ["success rate", f"{naive.success_pct:.1f}%", f"{tuned.success_pct:.1f}%", ""],
        [
            "iterations/s",
            f"{naive.run.throughput:,.1f}",
            f"{tuned.run.throughput:,.1f}",
            ratio(naive.run.throughput, tuned.run.throughput, lower_is_better=False),
        ],
        [
            "iterations recorded (failed)",
            f"{naive.iterations:,} ({naive.failed:,})",
            f"{tuned.iterations:,} ({tuned.failed:,})",
            "",
        ],
        [
            "connections opened / reused",
            f"{naive.connections_opened:,} / {naive.connections_reused:,}",
            f"{tuned.connections_opened:,} / {tuned.connections_reused:,}",
            "",
        ],
        ["recommender calls (+ warm-up)", asked_text(naive), asked_text(tuned), ""],
        ["agents' client CPU", pct(naive.client_cpu_pct), pct(tuned.client_cpu_pct), ""],
    ]
    return table(["", "naive (before)", "tuned (after)", "after vs before"], rows)


def per_step_rows(naive: Measured, tuned: Measured) -> list[list[str]]:
    rows = []
    for name in ("order", "recs", "profiles"):
        cells = [name]
        for measured in (naive, tuned):
            found = (measured.run.steps or {}).get(name)
            if found is None:
                cells += ["-", "-", "-"]
                continue
            numbers = found.latency_ms
            cells += [ms(numbers["mean"]), ms(numbers["p95"]), ms(numbers["p99"])]
        rows.append(cells)
    return rows


def per_request_table(naive: Measured, tuned: Measured, *, sent: bool = False) -> str:
    """Per call: from the agent asking to the answer (queued behind the client's cap
    included), or with ``sent`` from sending the call (past the cap) to its answer."""
    a, b = naive.per_request(sent=sent), tuned.per_request(sent=sent)

    def cell(numbers: dict[str, float | None], key: str) -> str:
        value = numbers[key]
        if key == "success_rate":
            return "-" if value is None else f"{100.0 * value:.2f}%"
        return ms(value)

    rows = []
    for key, name in (
        ("mean_ms", "mean"),
        ("p95_ms", "P95"),
        ("p99_ms", "P99"),
        ("server_cpu_ms", "server CPU per call"),
        ("success_rate", "success rate"),
    ):
        after = ratio(a[key], b[key], lower_is_better=key != "success_rate")
        rows.append([name, cell(a, key), cell(b, key), after if key != "success_rate" else ""])
    calls = [len(m.request_samples()[0]) for m in (naive, tuned)]
    failed = [m.request_samples()[1] for m in (naive, tuned)]
    rows.append(
        ["calls (failed)", f"{calls[0]:,} ({failed[0]:,})", f"{calls[1]:,} ({failed[1]:,})", ""]
    )
    if not sent:
        rows.append(
            [
                "of which queued behind the cap (mean)",
                ms(naive.queued_ms()) if naive.asked_ms is not None else "no cap",
                ms(tuned.queued_ms()) if tuned.asked_ms is not None else "no cap",
                "",
            ]
        )
    head = "per request, sent to answer" if sent else "per request, asked to answer"
    return table([head, "naive (before)", "tuned (after)", "after vs before"], rows)


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


def profiled_calls(profile: Profile, config: OrdersConfig) -> list[dict[str, int]]:
    calls = profile.warm if config.pooled_client else profile.cold
    return [{k: v for k, v in call.items() if not k.startswith("_")} for call in calls]


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


def breakdown_table(naive: Profile, tuned: Profile, sizes: dict[str, tuple[int, int]]) -> str:
    from millimcp.lab.stages import stage_order, summarize, transport_share

    a_calls, b_calls = profiled_calls(naive, NAIVE), profiled_calls(tuned, TUNED)
    a, a_total = summarize(a_calls)
    b, b_total = summarize(b_calls)
    rows = []
    for name in stage_order([*a_calls, *b_calls]):
        sa, sb = a.get(name), b.get(name)
        rows.append(
            [
                name,
                ms(sa.mean_ms) if sa else "-",
                f"{sa.share:.1f}%" if sa else "",
                ms(sb.mean_ms) if sb else "-",
                f"{sb.share:.1f}%" if sb else "",
            ]
        )
    rows.append(["total", ms(a_total.mean_ms), "100%", ms(b_total.mean_ms), "100%"])
    rows.append(
        ["transport + serialization", "", pct(transport_share(a)), "", pct(transport_share(b))]
    )
    (na, nw), (ta, tw) = sizes["naive"], sizes["tuned"]
    rows.append(["response: JSON / wire", f"{kb(na)} / {kb(nw)}", "", f"{kb(ta)} / {kb(tw)}", ""])
    head = [
        "stage (mean)",
        f"naive: new conn. ({len(a_calls)} calls)",
        "share",
        f"tuned: kept alive ({len(b_calls)})",
        "share",
    ]
    return table(head, rows)


# -- S6.3 / S6.5 ------------------------------------------------------------------------------


@dataclass
class StepResult:
    flag: str
    measured: Measured
    """Tuned without the step."""
    baseline: Measured
    """Tuned, just before and just after (pooled)."""
    comparison: Comparison

    def noise_pct(self) -> float:
        """The largest change of P50, P95 or P99 (of the A/A control: the noise)."""
        return max(
            (
                abs(m.change_pct)
                for m in self.comparison.metrics
                if m.name != "calls/s" and math.isfinite(m.change_pct)
            ),
            default=0.0,
        )

    @property
    def comparable(self) -> bool:
        return self.measured.iterations >= MIN_SAMPLES and self.baseline.iterations >= MIN_SAMPLES

    def verdict(self) -> str:
        """ "helped" when turning the step off made a metric significantly worse, beyond the
        threshold, and none better; "did NOT help" the other way round."""
        if self.flag == CONTROL:
            return f"noise: up to {self.noise_pct():.0f}%"
        worse = better = False
        for metric in self.comparison.metrics:
            if metric.name != "calls/s" and not self.comparable:
                continue
            worse = worse or metric.verdict == "regressed"
            better = better or metric.verdict == "improved"
        if not self.comparable and self.measured.iterations < self.baseline.iterations:
            worse = True  # without it, (almost) nothing finished in the window
        if worse and not better:
            return "helped"
        if better and not worse:
            return "did NOT help"
        return "mixed" if worse else "no clear effect"

    def cells(self) -> list[str]:
        out = [self.flag]
        for metric in self.comparison.metrics:
            latency = metric.name != "calls/s"
            if latency and not self.comparable:
                out.append(f"({self.measured.iterations} it.)")
                continue
            mark = "*" if metric.verdict in ("regressed", "improved") else ""
            change = f"{metric.change_pct:+.0f}%" if math.isfinite(metric.change_pct) else ""
            value = ms(metric.b) if latency else f"{metric.b:,.1f}"
            out.append(f"{value} {change}{mark}")
        before, after = cpu_per_iteration(self.baseline), cpu_per_iteration(self.measured)
        change = ""
        if before and after:
            change = f" {100.0 * (after - before) / before:+.0f}%"
        out.append(ms(after) + change)
        out.append(self.verdict())
        return out


def steps_table(results: Sequence[StepResult]) -> str:
    head = ["without", "P50", "P95", "P99", "iterations/s", "srv CPU/it.", "the step"]
    return table(head, [result.cells() for result in results])


WAN_WHY = {
    "pooled_client": "a new connection costs {connect} over the emulated path here (TCP's and "
    "TLS's round trips, the profile's cold calls); where the server's queue is longer than "
    "that, the queue sets the latency",
    "trimmed": "the tuned service compresses, so the untrimmed answer's extra {extra} cost "
    "only a few KB more on the wire ({naive_wire} compressed vs {tuned_wire})",
    "compression": "the trimmed answer is {tuned_json}, {tuned_wire} compressed: at "
    "{bandwidth} the difference is {saved} a call, against {compress} of server CPU; but the "
    "link emulator's token bucket lets {burst} through at once after an idle spell "
    "(docs/link.md), and with the agents' think time most connections have been idle, so "
    "an uncompressed trimmed answer mostly crosses in one burst",
}
"""Why a network step may not show over the emulated WAN (the mechanism; figures measured)."""


def why(flag: str, facts: dict[str, str], wan: bool = False) -> str:
    """Why a step may not pay off on this machine (the mechanism; figures measured)."""
    if wan and flag in WAN_WHY:
        return WAN_WHY[flag].format(**facts)
    texts = {
        "pooled_client": "a new connection costs {connect} on loopback here (the profile's cold "
        "calls), not the 150 ms of a TCP+TLS handshake across a network (S6.2)",
        "fast_codec": "the trimmed answer is {tuned_json}: the standard library's json encodes "
        "that in well under a millisecond (S3.1's gains are on 30-50 KB)",
        "async_db": "SQLite is in-process and, with the covering index, each query takes well "
        "under a millisecond: the sync ORM on the thread pool costs no more than aiosqlite, "
        "which runs every query on a thread of its own and hands each result back to the "
        "event loop (server CPU per iteration above)",
        "covering_index": "with this data the query finds its rows fast enough without it",
        "async_recs": "with the cache primed almost no call reaches the recommendation service "
        "({tuned_asked} calls in the tuned run), so how it is called barely matters; a blocking "
        "call matters on a miss (400 ms holding a thread)",
        "recs_cache": "the recommendation service answered every call in 400 ms regardless",
        "trimmed": "on loopback the extra {extra} move in microseconds: only the CPU to build "
        "and encode them is left",
        "compression": "on loopback there is no bandwidth to save: compressing costs the server "
        "{compress} per call ('server compress' in the profile) and the client the "
        "decompression, to save a transfer that takes microseconds here (S3.5's 30 -> 5 ms is "
        "at 10 Mbit/s)",
        "quiet_logging": "the DEBUG lines go to a local file through the page cache, where a "
        "synchronous write of a 16 KB body costs microseconds; logging off the hot path pays "
        "where a write can block (a slow disk, a network log sink, S5.5's 40% of P99)",
        "client_cap": "the server, not the client, is the bottleneck at this concurrency: the "
        "cap moves the waiting from the server's queue to the client's (S2.2, S7.4: a pool or "
        "cap of the wrong size is a false optimization)",
    }
    return texts.get(flag, "").format(**facts)


def facts_for(
    tuned: Profile,
    sizes: dict[str, tuple[int, int]],
    asked: dict[str, int | None],
    bandwidth_mbit: float = 0.0,
) -> dict[str, str]:
    from millimcp.lab.link import LinkConfig
    from millimcp.lab.stages import summarize

    cold, _ = summarize(tuned.cold)
    warm, _ = summarize(tuned.warm)
    connect = sum(cold[name].mean_ms for name in ("dns", "connect", "tls") if name in cold)
    compress = warm.get("server compress")
    return {
        "connect": ms(connect),
        "compress": ms(compress.mean_ms) if compress else "-",
        "tuned_json": kb(sizes["tuned"][0]),
        "extra": kb(sizes["naive"][0] - sizes["tuned"][0]),
        "tuned_asked": str(asked.get("tuned", "?")),
        "naive_wire": kb(sizes["naive"][1]),
        "tuned_wire": kb(sizes["tuned"][1]),
        "bandwidth": f"{bandwidth_mbit:g} Mbit/s",
        "burst": kb(LinkConfig().burst),
        "saved": ms(
            (sizes["tuned"][0] - sizes["tuned"][1]) * 8 / (bandwidth_mbit * 1e3)
            if bandwidth_mbit
            else None
        ),
    }


# -- the demo ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python examples/orders/demo.py",
        description="The order-analysis service of the case study, naive vs tuned, measured.",
    )
    parser.add_argument(
        "-c",
        "--concurrency",
        type=int,
        default=200,
        metavar="N",
        help="agents in the closed loop (default 200, as in S6.4)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="a second or two per run (tests)")
    mode.add_argument(
        "--full", action="store_true", help="longer runs and a concurrency ramp (minutes)"
    )
    parser.add_argument(
        "--steps",
        default="network",
        help="S6.3 steps to A/B: network (default: the steps the WAN is for, "
        f"{', '.join(NETWORK_STEPS)}), all, none, or some of {', '.join(FLAGS)}",
    )
    parser.add_argument(
        "--think",
        metavar="DURATION",
        help=f"the agents' mean pause after each iteration, their LLM turns (default "
        f"{THINK_S:g}s, with --quick {QUICK_THINK_S:g}s; 0s: a closed loop without pauses, "
        "which saturates the server: latency is then agents / throughput)",
    )
    parser.add_argument(
        "--db",
        metavar="URL",
        help="the order database, a SQLAlchemy URL (default: SQLite in the data folder); "
        "e.g. mariadb://root@127.0.0.1:3306/test: naive ignores the covering index there, "
        "tuned uses it, both at once",
    )
    parser.add_argument(
        "--orders", type=int, default=DEFAULT_ORDERS, help="orders to seed (%(default)s)"
    )
    parser.add_argument(
        "--hot-orders",
        type=int,
        default=200,
        metavar="N",
        help="the agents look up the N most recent orders (default 200: ~200 customers)",
    )
    parser.add_argument(
        "--recommender-latency-ms",
        type=float,
        default=NAIVE.recommender_latency_ms,
        metavar="MS",
        help="the recommendation service's latency (default %(default)g)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="database, logs and run files (default: .demo/ at the repository root)",
    )
    parser.add_argument("--report", type=Path, help="the HTML report (default: <data>/report.html)")
    wan = parser.add_argument_group("the network (the lab's link emulator, millimcp link)")
    wan.add_argument("--rtt", default=DEFAULT_RTT, help="round trip (default %(default)s)")
    wan.add_argument(
        "--bandwidth", default=DEFAULT_BANDWIDTH, help="each way, per connection (%(default)s)"
    )
    wan.add_argument("--loss", default="0", help="share of segments lost (e.g. 0.1%%)")
    wan.add_argument("--jitter", default="0ms", help="added to each delay, either way")
    wan.add_argument("--no-wan", action="store_true", help="loopback only, no link emulator")
    wan.add_argument("--no-tls", action="store_true", help="plain HTTP instead of HTTPS")
    args = parser.parse_args(argv)
    if not 1 <= args.concurrency <= 1000:
        parser.error("--concurrency takes 1 to 1000 agents")
    from millimcp.errors import ConfigurationError
    from millimcp.lab.link import parse_duration

    try:
        args.think_s = (
            parse_duration(args.think)
            if args.think is not None
            else QUICK_THINK_S
            if args.quick
            else THINK_S
        )
    except ConfigurationError as exc:
        parser.error(f"--think: {exc}")
    if args.steps in ("all", ""):
        args.step_flags = list(FLAGS)
    elif args.steps == "network":
        args.step_flags = list(NETWORK_STEPS)
    elif args.steps == "none":
        args.step_flags = []
    else:
        args.step_flags = [s.strip() for s in args.steps.split(",") if s.strip()]
        unknown = [s for s in args.step_flags if s not in FLAGS]
        if unknown:
            parser.error(f"unknown step(s) {', '.join(unknown)}; known: {', '.join(FLAGS)}")
    return args


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # so that the processes the demo started are stopped too


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupted)
    if args.data_dir is not None:
        os.environ["ORDERS_DATA_DIR"] = str(args.data_dir.resolve())
    args.certs = None
    if not args.no_tls:
        # a CA of the demo's own; every TLS context made in this process trusts it (the
        # lab's too), and only it: nothing here talks to anything but 127.0.0.1
        args.certs = ensure_certificates(data_dir() / "tls")
        os.environ["SSL_CERT_FILE"] = str(args.certs.ca)
    try:
        return asyncio.run(demo(args))
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


async def demo(args: argparse.Namespace) -> int:
    global _BEGAN
    began = _BEGAN = time.perf_counter()
    plan = PLANS["quick" if args.quick else "full" if args.full else "default"]
    folder = data_dir()
    results, logs = folder / "results", folder / "logs"
    for path in (results, logs):
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    db_url = args.db or default_db_url()
    concurrency = args.concurrency
    token = mint(os.environ.get("ORDERS_AUTH_SECRET") or NAIVE.auth_secret, "demo-agent")

    from millimcp.lab.link import netem_status

    wan = None if args.no_wan else Wan(args.rtt, args.bandwidth, args.loss, args.jitter)
    context = None if args.certs is None else client_context(args.certs)
    _, why_not = netem_status()
    link_path = "none" if wan is None else f"userspace (kernel netem not used: {why_not})"
    print(
        "millimcp case study (SEEDS S6): the order-analysis service, naive vs tuned, "
        f"{concurrency} agents, {os.cpu_count()} CPUs"
    )
    print(
        "  network: "
        + (
            "loopback (no link emulator)"
            if wan is None
            else f"{wan.describe()} (the lab's link emulator, {link_path})"
        )
        + f"; {'TLS (a local CA in ' + shown(args.certs.folder) + ')' if args.certs else 'no TLS'}"
    )
    with fleet(logs) as processes:
        section("1. database and services")
        # SQLite: the services start while the database is seeded: each waits for the
        # seeding lock, then finds the database ready (their imports overlap the seeding); a
        # server database is seeded first (its seeding takes no lock across processes)

        from sqlalchemy.engine import make_url

        embedded = make_url(db_url).get_backend_name() == "sqlite"
        where = shown(folder / "orders.db") if embedded else make_url(db_url).render_as_string()
        progress(f"{args.orders:,} orders in {where} (seeded on first run, reused afterwards)")
        seeding = None if embedded else await seed(db_url, args.orders)
        started = time.perf_counter()
        recommender = processes.start(
            "recommender", ["orders.recommender", "--latency-ms", f"{args.recommender_latency_ms}"]
        )
        recommender_url = f"http://127.0.0.1:{recommender.port}"
        configs = {"naive": NAIVE, "tuned": TUNED}
        if args.step_flags:  # the A/A control: a second tuned process (process-to-process noise)
            configs["tuned-control"] = TUNED
        for flag in args.step_flags:
            if flag not in CLIENT_FLAGS:
                configs[f"tuned-{flag}"] = without(flag)
        services: dict[str, Service] = {}
        for label, config in configs.items():
            log = logs / f"{label}.log"
            args_ = server_args(config, db_url, recommender_url, args.orders, log, args.certs)
            service = Service(label, config, processes.start(label, args_), None, context)
            if wan is not None:
                target = service.process.port
                service.front = processes.start(
                    f"link-{label}", [], functools.partial(link_args, wan, target)
                )
            services[label] = service

        plain, covered = seeding or await seed(db_url, args.orders)
        print(
            f"  {plain.orders:,} orders of {plain.customers:,} customers: "
            + (f"seeded in {plain.seconds:.1f} s" if plain.seeded_now else "reused")
            + (
                f", covering index in {covered.index_seconds:.1f} s"
                if covered.index_seconds
                else ""
            )
        )
        scenario = load_workload(args.orders, args.hot_orders)
        first, last = scenario.vars["first_order"], scenario.vars["last_order"]
        customers = await asyncio.to_thread(hot_customers, db_url, first, last)
        print(f"  the agents' orders: {first:,}..{last:,} ({len(customers)} customers)")
        deadline = time.monotonic() + 120
        for process in processes.processes:
            await asyncio.to_thread(process.wait_ready, deadline)
        print(
            f"  the recommendation service ({args.recommender_latency_ms:g} ms a call) and "
            f"{len(services)} order services up ({time.perf_counter() - started:.1f} s)"
        )
        started = time.perf_counter()
        primed = [s for s in services.values() if s.config.recs_cache]
        warmed = [s for s in services.values() if s.label != "naive"] if len(services) > 2 else []
        one_at_a_time = asyncio.Lock()  # the services share one recommendation service
        failed = await asyncio.gather(
            *(
                prepare(
                    s,
                    token,
                    customers,
                    scenario,
                    s in primed,
                    s in warmed,
                    concurrency,
                    plan,
                    one_at_a_time,
                )
                for s in services.values()
            )
        )
        print(
            f"  recommendation cache primed with {len(customers)} customers in "
            f"{len(primed)} service{'s' if len(primed) != 1 else ''}"
            + (f", {len(warmed)} tuned services warmed up" if warmed else "")
            + f" ({time.perf_counter() - started:.1f} s)"
            + (f"; {sum(failed)} calls failed" if any(failed) else "")
        )

        pause = f"{args.think_s:g} s think time" if args.think_s else "no think time"
        section(f"2. {concurrency} agents, closed loop ({pause}): naive, then tuned")
        asked: dict[str, int | None] = {}
        runs: dict[str, Measured] = {}
        for label, seconds in (("naive", plan.naive_s), ("tuned", plan.tuned_s)):
            before = await asyncio.to_thread(recommender_requests, recommender_url)
            runs[label] = await agents(
                services[label],
                label,
                scenario,
                token,
                concurrency,
                plan.warmup_s,
                seconds,
                args.think_s,
            )
            after = await asyncio.to_thread(recommender_requests, recommender_url)
            asked[label] = None if before is None or after is None else after - before
        naive, tuned = runs["naive"], runs["tuned"]
        ramp: dict[str, int | None] | None = None
        if plan.ramp:
            ramp = {
                label: await ramp_up(services[label], scenario, token, plan, args.think_s)
                for label in runs
            }

        section(f"3. one {PROFILE_TOOL} call, profiled (no other load)")
        arguments = {"customer_id": customers[0]}
        profiles = {}
        sizes = {}
        for label in ("naive", "tuned"):
            profiles[label] = await profile_one(services[label], token, arguments, plan)
            sizes[label] = await response_size(
                services[label].url, token, arguments, services[label].ssl
            )
            total = sum(
                sum(call.values())
                for call in profiled_calls(profiles[label], services[label].config)
            )
            count = max(1, len(profiled_calls(profiles[label], services[label].config)))
            progress(f"{label}: {ms(total / count / 1e6)} a call")

        steps: list[StepResult] = []
        step_agents = concurrency if args.think_s else min(concurrency, STEP_AGENTS)
        threshold = THRESHOLD_PCT
        if args.step_flags:
            section(
                f"4. each step alone, {step_agents} agents: tuned, tuned without a step, tuned, ..."
            )
            steps, threshold = await each_step(
                services,
                args.step_flags,
                scenario,
                token,
                step_agents,
                plan,
                args.think_s,
                customers[0],
            )

    # -- what it found ---------------------------------------------------------------------
    from millimcp.lab.profile import to_run as profile_run
    from millimcp.lab.results import save_run

    for measured in (naive, tuned, *(s.measured for s in steps), *(s.baseline for s in steps)):
        save_run(measured.run, results / f"{measured.label}.json")
    for label, profile in profiles.items():
        save_run(profile_run(profile), results / f"profile-{label}.json")
    report = write_report(args.report or folder / "report.html", naive, tuned, concurrency)

    section(f"S6.4: naive vs tuned, {concurrency} agents")
    print(s64_table(naive, tuned, concurrency, ramp, asked))
    print(
        "\n  Latency: one agent iteration, end to end (get_order, get_recommendations, "
        "3 x get_profile).\n  Closed loop: each agent starts its next iteration "
        + (
            f"after a think time (an LLM turn, {args.think_s:g} s on average)\n  once its last "
            "one ended; the pause is not part of the latency. "
            if args.think_s
            else "when the last one ends, so latency is\n  agents / throughput once the server "
            "is saturated. "
        )
        + f"Highest concurrency held: >= {concurrency} when at least\n  {HELD_PCT:g}% of the "
        "iterations succeeded at this concurrency (calls time out after 30 s; --full tries "
        "25\n  to 800 agents). Each step of the iteration:\n"
    )
    head = ["", "naive mean", "P95", "P99", "tuned mean", "P95", "P99"]
    print(table(head, per_step_rows(naive, tuned)))

    section(f"S6.4 per request: one tool call, {concurrency} agents")
    print(per_request_table(naive, tuned))
    print()
    print(per_request_table(naive, tuned, sent=True))
    print(
        "\n  Every call of the recorded iterations (get_order, get_recommendations and each "
        "get_profile\n  of the fan-out): the article's figures (mean 1,200 -> 245 ms, P99 4 s "
        "-> 680 ms, success\n  96% -> 99.9%) are per request. 'asked to answer' is the "
        "agent's view: from asking for\n  the call to its answer, the wait for a slot of the "
        f"tuned client's cap ({CLIENT_CAP} calls in flight,\n  the article's Semaphore(30)) "
        "included; 'sent to answer' starts when the call leaves for the\n  server (past the "
        "cap). Naive has no cap: its two tables are the same. Server CPU per call: per\n  "
        "iteration over its five calls."
        + (
            f"\n  The link emulator's own CPU: {pct(LINK_CPU.get('naive'))} of a core in the "
            f"naive run, {pct(LINK_CPU.get('tuned'))} in the tuned one."
            if LINK_CPU
            else ""
        )
    )

    section(f"S6.2: where the time of one {PROFILE_TOOL} call goes (no other load)")
    print(breakdown_table(profiles["naive"], profiles["tuned"], sizes))
    print(
        "\n  naive: each call on a new connection, as its client does; tuned: calls on one "
        "kept-alive\n  connection. 'server handler' is the tool itself: auth, database, the "
        "recommendation call\n  (400 ms, or a cache hit), building the answer."
    )

    if steps:
        section("S6.3 / S6.5: each step alone (tuned vs tuned without it, P50/P95/P99)")
        print(steps_table(steps))
        print(
            f"\n  {step_agents} agents. Each cell: tuned without the step, and its change "
            "against tuned measured just\n  before and after it. * = significant (the lab's "
            f"compare: bootstrap interval of the difference)\n  and beyond {threshold:.0f}% "
            f"(the larger of {THRESHOLD_PCT:g}% and the A/A control's largest change).\n"
            "  'helped': slower or fewer iterations without it."
        )
        print(
            "\n  The article's claim for each step, next to what turning it off did here "
            "(tuned -> without):\n"
        )
        print(table(["step", "article (S6.3)", "here P50", "here P99", ""], claims_rows(steps, ms)))
        print()
        facts = facts_for(
            profiles["tuned"], sizes, asked, wan.numbers()[1] if wan is not None else 0.0
        )
        for result in steps:
            if result.flag == CONTROL:
                print(
                    f"  - {CONTROL}: tuned against a second tuned process, the same way: "
                    "what differences "
                    "the machine's own noise makes."
                )
            elif not result.comparable:
                print(
                    f"  - {result.flag}: {result.verdict()}: without it, "
                    f"{result.measured.iterations} iterations started in the "
                    f"{plan.step_s:g} s window: the agents' iterations took longer than that."
                )
            elif result.verdict() != "helped":
                reason = why(result.flag, facts, wan is not None)
                print(f"  - {result.flag}: {result.verdict()} here: {reason}.")

    summary_path = folder / "summary.json"
    write_summary(
        summary_path,
        agents=concurrency,
        wan=wan,
        tls=args.certs is not None,
        link=link_path,
        naive=naive,
        tuned=tuned,
        steps=[s for s in steps if s.flag != CONTROL],
        think_s=args.think_s,
    )
    section("files")
    print(f"  summary (compare runs with it): {shown(summary_path)}")
    print(f"  report: {shown(report)}")
    print(f"  run files (millimcp compare and report take them): {shown(results)}/")
    print(f"  service logs: {shown(logs)}/")
    print(f"\ndone in {time.perf_counter() - began:.0f} s")
    return 0


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


def write_report(path: Path, naive: Measured, tuned: Measured, concurrency: int) -> Path:
    from millimcp.lab.report import render_report

    path.parent.mkdir(parents=True, exist_ok=True)
    title = f"Order service (SEEDS S6): naive vs tuned, {concurrency} agents"
    path.write_text(render_report([naive.run, tuned.run], title=title), encoding="utf-8")
    return path.resolve()


if __name__ == "__main__":
    sys.exit(main())
