"""Coordinated omission: a server that stalls once for 1 s, measured in both loops.

The open loop keeps its schedule through the stall, so every call due during that second
waits and counts its wait: the p99 shows the stall. The closed loop stops sending while its
calls are stuck, so only the few calls in flight see it: its p99 hides the stall, and the run
says that it is a closed loop.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from millimcp.lab.bench import CLOSED_LOOP_NOTE, bench, format_run
from millimcp.lab.target import parse_target
from tests.conftest import free_port, start_server, stop_server

BENCH_SERVER = "tests.integration.lab.bench_server:server"

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

STALL = {"after_s": 1.5, "stall_s": 1.0}
"""The stall comes 1.5 s after the probe call: inside the window (after 0.3 s of warmup)."""


@pytest.fixture(scope="module")
def stalling_url() -> Iterator[str]:
    port = free_port()
    process = start_server(
        [
            "-m",
            "millimcp",
            "serve",
            "tests.integration.lab.bench_server:server",
            "--port",
            str(port),
        ],
        port,
    )
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


async def test_the_open_loop_p99_shows_the_stall(stalling_url: str) -> None:
    run = await bench(
        parse_target(stalling_url),
        "stall_once",
        {"key": "open", **STALL},
        rate=100.0,
        concurrency=16,
        duration_s=4.0,
        warmup_s=0.3,
    )
    assert run.errors == {}
    assert run.mode == "open"
    assert CLOSED_LOOP_NOTE not in run.notes
    # ~100 calls were due during the stall, waiting from ~1 s down to ~0: the top 1% of the
    # 400 calls waited about the whole second.
    assert run.latency_ms["p99"] >= 800.0, format_run(run)
    assert run.latency_ms["max"] >= 900.0
    slow = [sample for sample in run.samples_ms if sample >= 100.0]
    assert len(slow) >= 50, format_run(run)


async def test_the_closed_loop_hides_it_and_says_so(stalling_url: str) -> None:
    run = await bench(
        parse_target(stalling_url),
        "stall_once",
        {"key": "closed", **STALL},
        concurrency=2,
        duration_s=4.0,
        warmup_s=0.3,
    )
    assert run.errors == {}
    assert run.mode == "closed"
    assert CLOSED_LOOP_NOTE in run.notes
    assert "coordinated omission" in CLOSED_LOOP_NOTE
    text = format_run(run)
    assert "closed loop" in text
    assert "coordinated omission" in text
    # The stall happened (the call that hit it took the whole second) ...
    assert run.latency_ms["max"] >= 900.0, text
    # ... but only the two calls in flight saw it: the percentiles do not.
    slow = [sample for sample in run.samples_ms if sample >= 100.0]
    assert len(slow) <= 2, text
    assert run.latency_ms["p99"] < 500.0, text
