"""``millimcp compare``: synthetic Run files with known differences, and the exit statuses."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from millimcp.lab.compare import compare_runs, parse_threshold
from millimcp.lab.results import Run, TimelinePoint, host_info, latency_summary, save_run

ROOT = Path(__file__).resolve().parents[3]


def make_run(
    samples: list[float], *, throughput: float = 1000.0, seconds: int = 10, jitter: float = 0.0
) -> Run:
    """A bench Run with these latencies and a per-second timeline around ``throughput``."""
    rng = random.Random(len(samples))
    timeline = [
        TimelinePoint(
            t=float(t), calls=round(throughput * (1 + rng.uniform(-jitter, jitter))), errors=0
        )
        for t in range(seconds)
    ]
    return Run(
        kind="bench",
        started_at="2026-01-01T00:00:00.000Z",
        target="http://127.0.0.1:8000/mcp",
        transport="http",
        era="modern",
        tool="echo",
        args={"text": "hi"},
        concurrency=8,
        duration_s=float(seconds),
        calls=len(samples),
        throughput=throughput,
        latency_ms=latency_summary(samples),
        samples_ms=samples,
        timeline=timeline,
        host=host_info(),
    )


def lognormal(n: int, seed: int, scale: float = 1.0, sigma: float = 0.3) -> list[float]:
    rng = random.Random(seed)
    return [scale * rng.lognormvariate(0.0, sigma) for _ in range(n)]


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "millimcp", "compare", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_identical_runs_do_not_regress() -> None:
    a = make_run(lognormal(5000, 1), jitter=0.05)
    comparison = compare_runs(a, a)
    assert comparison.regressions == []
    assert {m.name: m.verdict for m in comparison.metrics} == {
        "p50": "within threshold",
        "p95": "within threshold",
        "p99": "within threshold",
        "calls/s": "within threshold",
    }
    assert comparison.mann_whitney is not None
    assert comparison.mann_whitney.p_value == 1.0


def test_a_slower_b_regresses_on_every_percentile() -> None:
    base = lognormal(5000, 1)
    a = make_run(base, jitter=0.05)
    b = make_run(lognormal(5000, 2, scale=1.3), jitter=0.05)
    comparison = compare_runs(a, b)
    assert comparison.regressions == ["p50", "p95", "p99"]
    p50 = comparison.metrics[0]
    assert p50.change_pct == pytest.approx(30, abs=4)
    assert p50.interval is not None
    assert p50.interval.low > 0
    assert comparison.mann_whitney is not None
    assert comparison.mann_whitney.p_value < 0.001


def test_noisy_but_equal_runs_are_not_significant() -> None:
    """Few samples from one wide distribution: a percentile moves beyond the threshold by
    chance, and the test says it is not significant."""
    a = make_run(lognormal(40, 12, sigma=1.0), jitter=0.3)
    b = make_run(lognormal(40, 13, sigma=1.0), jitter=0.3)
    comparison = compare_runs(a, b)
    moved = [m for m in comparison.metrics if m.change_pct > comparison.threshold_pct]
    assert moved, "the fixture must move a percentile beyond the threshold by chance"
    assert all(m.verdict == "not significant" for m in moved)
    assert comparison.regressions == []


def test_an_improvement_is_not_a_regression() -> None:
    a = make_run(lognormal(5000, 1, scale=1.5))
    b = make_run(lognormal(5000, 2), throughput=1400.0)
    comparison = compare_runs(a, b)
    assert comparison.regressions == []
    assert {m.verdict for m in comparison.metrics} == {"improved"}


def test_a_throughput_drop_regresses() -> None:
    samples = lognormal(5000, 1)
    a = make_run(samples, throughput=1000.0, jitter=0.05)
    b = make_run(samples, throughput=700.0, jitter=0.05)
    comparison = compare_runs(a, b)
    assert comparison.regressions == ["calls/s"]
    metric = comparison.metrics[-1]
    assert metric.change_pct == pytest.approx(-30)
    assert metric.interval is not None
    assert metric.interval.high < 0


def test_a_small_throughput_drop_within_the_threshold_passes() -> None:
    samples = lognormal(5000, 1)
    a = make_run(samples, throughput=1000.0, jitter=0.02)
    b = make_run(samples, throughput=900.0, jitter=0.02)
    assert compare_runs(a, b).regressions == []
    assert compare_runs(a, b, threshold_pct=5).regressions == ["calls/s"]


def test_runs_without_samples_are_judged_on_the_threshold() -> None:
    a = make_run(lognormal(500, 1), seconds=1)
    b = make_run(lognormal(500, 2, scale=1.5), seconds=1)
    a.samples_ms = []
    comparison = compare_runs(a, b)
    assert comparison.mann_whitney is None
    assert comparison.regressions == ["p50", "p95", "p99"]
    assert {m.verdict for m in comparison.metrics[:3]} == {"regressed (untested)"}
    assert any("no latency samples" in w for w in comparison.warnings)
    assert any("timeline" in w for w in comparison.warnings)


def test_parse_threshold() -> None:
    assert parse_threshold("15%") == 15.0
    assert parse_threshold(" 7.5 ") == 7.5
    for bad in ("abc", "-5%", "0", "inf"):
        with pytest.raises(ValueError, match="threshold"):
            parse_threshold(bad)


def test_cli_exit_statuses(tmp_path: Path) -> None:
    a_path, same_path, slow_path = tmp_path / "a.json", tmp_path / "same.json", tmp_path / "b.json"
    save_run(make_run(lognormal(3000, 1), jitter=0.05), a_path)
    save_run(make_run(lognormal(3000, 1), jitter=0.05), same_path)
    save_run(make_run(lognormal(3000, 2, scale=1.3), jitter=0.05), slow_path)

    same = run_cli(a_path, same_path)
    assert same.returncode == 0, same.stderr
    assert "no significant regression beyond 15%" in same.stdout

    slow = run_cli(a_path, slow_path, "--threshold", "15%")
    assert slow.returncode == 1, slow.stderr
    assert "REGRESSION: B is worse than A beyond 15% on p50, p95, p99" in slow.stdout
    p50_line = next(line for line in slow.stdout.splitlines() if line.startswith("p50"))
    assert p50_line.rstrip().endswith("regressed")
    assert "Mann-Whitney U" in slow.stdout

    assert run_cli(a_path, slow_path, "--threshold", "50%").returncode == 0

    (tmp_path / "junk.json").write_text('{"schema": "something else"}')
    for bad in (
        [a_path, tmp_path / "missing.json"],
        [a_path, tmp_path / "junk.json"],
        [a_path, slow_path, "--threshold", "lots"],
        [a_path],
    ):
        result = run_cli(*bad)
        assert result.returncode == 2, (bad, result.stdout, result.stderr)
        assert result.stderr
