"""``make demo`` end to end, shortened: ``examples/orders/demo.py --quick`` on a small
database in a temporary folder, a few agents, one step A/B'd; real processes throughout, over
the lab's link emulator (the demo's default WAN, with TLS) as ``make demo`` runs it, the
agents pausing between iterations as ``--quick`` has them (0.1 s).

The checks are on what the demo prints and writes: the S6.4 table with measured numbers in
both columns, the S6.2 breakdown with the server's stages, the A/B rows, the run files and
the HTML report. The only figures compared are floors the setup guarantees: every naive
iteration waits for the recommendation service (300 ms here), and the tuned service, its
cache primed with every customer of the workload, never asks it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from millimcp.lab.results import load_run
from tests.integration.orders.conftest import EXAMPLES

DEMO = EXAMPLES / "orders" / "demo.py"
LATENCY_MS = 300.0
DURATION = r"([\d.]+) (µs|ms|s)\b"


def _ms(value: str, unit: str) -> float:
    return float(value) * {"µs": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def _row(output: str, name: str) -> str:
    found = re.search(rf"^  {re.escape(name)}  .*$", output, re.MULTILINE)
    assert found, f"no row {name!r} in:\n{output}"
    return found.group(0)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    folder = tmp_path_factory.mktemp("demo")
    command = [
        sys.executable,
        str(DEMO),
        "--quick",
        "--orders",
        "5000",
        "--hot-orders",
        "20",
        "--concurrency",
        "4",
        "--steps",
        "compression",
        "--recommender-latency-ms",
        str(LATENCY_MS),
        "--data-dir",
        str(folder),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    # the demo prints paths relative to its working directory, this one's
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, folder


def test_s64_table_has_measured_numbers(demo_run: tuple[str, Path]) -> None:
    output, _ = demo_run
    assert "S6.4: naive vs tuned, 4 agents" in output
    for name in ("mean", "P95", "P99", "server CPU per iteration"):
        cells = re.findall(DURATION, _row(output, name))
        assert len(cells) >= 2, _row(output, name)
        naive, tuned = (_ms(*cell) for cell in cells[:2])
        assert naive > 0
        assert tuned > 0
    naive_mean = _ms(*re.findall(DURATION, _row(output, "mean"))[0])
    assert naive_mean >= LATENCY_MS  # each naive iteration calls the recommender, uncached
    cpu = re.findall(r"(\d+)%", _row(output, "server CPU (% of one core)"))
    assert len(cpu) == 2
    assert all(int(value) > 0 for value in cpu)
    assert re.search(r"success rate\s+\d+\.\d%\s+\d+\.\d%", output)
    assert re.search(r"highest concurrency held\s+(>=|<) 4\s+(>=|<) 4", output)
    asked = re.findall(r"[\d,]+", _row(output, "recommender calls (+ warm-up)").split(")", 1)[1])
    assert int(asked[0].replace(",", "")) > 0  # naive: no cache
    assert asked[1] == "0"  # tuned: every customer's answer was cached before the run


def test_breakdown_and_steps(demo_run: tuple[str, Path]) -> None:
    output, _ = demo_run
    assert "S6.2: where the time of one analyze_orders call goes" in output
    for stage in ("connect", "server handler", "response decode", "total"):
        assert re.findall(DURATION, _row(output, stage)), stage
    handler = re.findall(DURATION, _row(output, "server handler"))
    assert _ms(*handler[0]) >= LATENCY_MS  # the naive handler waits for the recommender
    assert re.search(r"response: JSON / wire\s+[\d.]+ KB / [\d.]+ KB", output)
    assert "S6.3 / S6.5: each step alone" in output
    for name in ("nothing (A/A)", "compression"):
        row = _row(output, name)
        assert len(re.findall(DURATION, row)) >= 3, row


def test_files(demo_run: tuple[str, Path]) -> None:
    output, folder = demo_run
    found = re.search(r"report: (\S+)", output)
    assert found
    report = (Path.cwd() / found.group(1)).resolve()  # relative when under the cwd
    assert report.is_file()
    assert report.parent == folder.resolve()
    page = report.read_text(encoding="utf-8")
    assert "naive vs tuned" in page
    assert 'id="report-data"' in page
    naive = load_run(folder / "results" / "naive.json")
    tuned = load_run(folder / "results" / "tuned.json")
    assert naive.kind == tuned.kind == "scenario"
    assert naive.calls > 0
    assert tuned.calls > 0
    assert naive.steps is not None
    assert set(naive.steps) >= {"order", "recs", "profiles"}
    profile = load_run(folder / "results" / "profile-tuned.json")
    assert profile.kind == "profile"
    assert profile.stages
    assert "server handler" in profile.stages
    assert (folder / "logs" / "naive.log").stat().st_size > 0


def test_the_wan_and_the_summary(demo_run: tuple[str, Path]) -> None:
    output, folder = demo_run
    assert "network: RTT 50 ms, 2 Mbit/s each way (the lab's link emulator, userspace" in output
    assert "TLS (a local CA in" in output
    assert (folder / "tls" / "ca.pem").is_file()
    assert (folder / "logs" / "link-tuned.out").read_text().startswith("link: userspace path")
    # the handshake crosses the emulated path: at least TCP's and TLS's round trips (2 x 50 ms)
    connect = sum(
        _ms(*cell)
        for stage in ("connect", "tls")
        for cell in re.findall(DURATION, _row(output, stage))[:1]
    )
    assert connect >= 100.0
    assert "S6.4 per request: one tool call, 4 agents" in output
    summary = json.loads((folder / "summary.json").read_text())
    conditions = summary["conditions"]
    assert conditions["agents"] == 4
    assert conditions["rtt_ms"] == 50.0
    assert conditions["bandwidth_mbit"] == 2.0
    assert conditions["tls"] is True
    assert conditions["link"].startswith("userspace")
    assert conditions["think_s"] == 0.1  # --quick's think time
    for label in ("naive", "tuned"):
        for view in ("per_request", "per_iteration"):
            numbers = summary[label][view]
            assert set(numbers) == {"mean_ms", "p95_ms", "p99_ms", "success_rate", "server_cpu_ms"}
            assert numbers["mean_ms"] > 0
            assert 0.0 <= numbers["success_rate"] <= 1.0
        # a call is shorter than an iteration of five of them
        assert summary[label]["per_request"]["mean_ms"] < summary[label]["per_iteration"]["mean_ms"]
        sent = summary[label]["per_request_sent"]
        assert set(sent) == set(summary[label]["per_request"])
        # from sending is never longer than from asking (the wait for the cap's slot)
        assert sent["mean_ms"] <= summary[label]["per_request"]["mean_ms"] + 1e-6
    assert summary["naive"]["queued_mean_ms"] is None  # naive's client has no cap
    assert summary["tuned"]["queued_mean_ms"] >= 0.0
    assert "per request, sent to answer" in output
    assert re.search(r"of which queued behind the cap \(mean\)\s+no cap\s+[\d.]+ (µs|ms)", output)
    step = summary["steps"]["compression"]
    assert set(step) == {"p50_change", "p95_change", "p99_change", "significant"}
    assert isinstance(step["significant"], bool)
    assert "gzip + trimmed: transfer 260 -> 30 ms" in output  # the article's claim, printed
