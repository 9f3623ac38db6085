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

Its parts: :mod:`orders.fleet` (the processes), :mod:`orders.runs` (each run and its plan),
:mod:`orders.agents` and :mod:`orders.workload` (the agents and what is measured),
:mod:`orders.tables` and :mod:`orders.steps` (what is printed), :mod:`orders.wan` (the network,
the article's claims, ``summary.json``).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `orders` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import asyncio
import functools
import os
import shutil
import signal
import time
from collections.abc import Sequence
from typing import Any

from orders.agents import THINK_S
from orders.auth import mint
from orders.config import (
    CLIENT_FLAGS,
    DEFAULT_ORDERS,
    FLAGS,
    NAIVE,
    TUNED,
    data_dir,
    default_db_url,
)
from orders.fleet import Service, fleet, link_args, recommender_requests, server_args
from orders.runs import (
    LINK_CPU,
    PLANS,
    PROFILE_TOOL,
    THRESHOLD_PCT,
    agents,
    each_step,
    prepare,
    profile_one,
    progress,
    ramp_up,
    response_size,
    seed,
    without,
)
from orders.steps import CONTROL, StepResult, facts_for, steps_table, why
from orders.tables import (
    HELD_PCT,
    breakdown_table,
    ms,
    pct,
    per_request_table,
    per_step_rows,
    profiled_calls,
    s64_table,
    shown,
    table,
)
from orders.tls import client_context, ensure_certificates
from orders.wan import DEFAULT_BANDWIDTH, DEFAULT_RTT, Wan, claims_rows, write_summary
from orders.workload import CLIENT_CAP, Measured, hot_customers, load_workload

__all__ = ["main"]

QUICK_THINK_S = 0.1
"""``--quick``'s think time: its runs last a second or two."""
NETWORK_STEPS = ("pooled_client", "trimmed", "compression")
"""The steps A/B'd by default: keep-alive, trimming and compression, the article's two
largest wins (connect 150 -> 15 ms, transfer 260 -> 30 ms, S6.3), which only a network shows
(``--steps all`` for every step: several minutes more)."""
STEP_AGENTS = 20
"""Without a think time (``--think 0s``), at most this many agents in the A/B runs: enough to
saturate the server (so a step's cost shows) and for the client cap (30 calls) to bind, with
iterations short enough that most of a 2 s run is recorded. With one, the A/B runs the agents
of the naive and tuned runs."""

_BEGAN = time.perf_counter()


def section(title: str) -> None:
    at = f" {time.perf_counter() - _BEGAN:.0f} s"
    print(f"\n== {title} " + "=" * max(0, 87 - len(title) - len(at)) + at, flush=True)


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


def write_report(path: Path, naive: Measured, tuned: Measured, concurrency: int) -> Path:
    from millimcp.lab.report import render_report

    path.parent.mkdir(parents=True, exist_ok=True)
    title = f"Order service (SEEDS S6): naive vs tuned, {concurrency} agents"
    path.write_text(render_report([naive.run, tuned.run], title=title), encoding="utf-8")
    return path.resolve()


if __name__ == "__main__":
    sys.exit(main())
