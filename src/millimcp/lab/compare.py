"""``millimcp compare A.json B.json [--threshold 15%]``: did B get slower than A?

p50, p95, p99 and throughput of two Run files side by side, with the change in percent and
a significance test for each (S6.5: judge a change on P50, P95 and P99 together):

* a latency percentile: the bootstrap interval (``--confidence``, a fixed seed) of the
  difference ``B - A`` of that percentile, from the runs' latency samples (``samples_ms``);
  the difference is significant when the interval excludes zero;
* throughput: the bootstrap interval of the difference of the mean calls per second, over
  the runs' per-second timelines (the last, partial second left out);
* and, for the distribution as a whole, the Mann-Whitney U test on the samples (its
  p-value and the probability that a call of B is slower than a call of A).

The exit status is 1 when B regresses, 0 otherwise, 2 for unusable input, so a CI job can
run a fixed workload and fail on a regression (S7.3). B regresses when a percentile grows,
or the throughput drops, by more than ``--threshold`` **and** the difference is
significant. A metric that cannot be tested (a run without samples or timeline) is judged
on the threshold alone, and the output says so.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from millimcp.lab import _table
from millimcp.lab.results import Run, load_run
from millimcp.lab.stats import (
    DEFAULT_SEED,
    Interval,
    MannWhitney,
    bootstrap_mean_diff,
    bootstrap_quantile_diff,
    mann_whitney,
)

__all__ = ["Comparison", "MetricChange", "add_arguments", "compare_runs", "parse_threshold", "run"]

DEFAULT_THRESHOLD: Final = 15.0
"""Percent (S7.3: alarm at more than 15% deviation from the baseline)."""
_PERCENTILES: Final = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
METRICS: Final = ("p50", "p95", "p99", "calls/s")
MIN_TAIL_SAMPLES: Final = 10
"""Samples each run needs beyond a percentile for its bootstrap to be trusted (the
bootstrap of an extreme order statistic, such as the maximum, is not)."""
_MIN_TIMELINE: Final = 3
"""Per-second points each run needs for the throughput test."""

Verdict = Literal[
    "regressed", "improved", "within threshold", "not significant", "regressed (untested)"
]


@dataclass(frozen=True, slots=True)
class MetricChange:
    """One metric of A and B, its change and what it means."""

    name: str
    a: float
    b: float
    change_pct: float
    """(B - A) / A in percent; positive = B is larger."""
    interval: Interval | None
    """The bootstrap interval of B - A; None when it could not be computed."""
    verdict: Verdict
    higher_is_worse: bool = True
    test: Literal["bootstrap", "mann-whitney", "none"] = "none"
    """How significance was judged."""

    @property
    def regressed(self) -> bool:
        return self.verdict in ("regressed", "regressed (untested)")


@dataclass
class Comparison:
    """Everything :func:`compare_runs` found."""

    threshold_pct: float
    confidence: float
    metrics: list[MetricChange] = field(default_factory=list)
    mann_whitney: MannWhitney | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[str]:
        return [metric.name for metric in self.metrics if metric.regressed]


def parse_threshold(text: str) -> float:
    """``"15%"`` or ``"15"`` -> 15.0 (percent); must be positive."""
    value = text.strip().removesuffix("%").strip()
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"a threshold is a percentage such as 15%, not {text!r}") from None
    if not number > 0 or math.isinf(number):
        raise ValueError(f"a threshold must be a positive percentage, not {text!r}")
    return number


def _change(a: float, b: float) -> float:
    if a == 0:
        return 0.0 if b == 0 else math.copysign(math.inf, b)
    return 100.0 * (b - a) / a


def _verdict(
    change: float, threshold: float, direction: int | None, higher_is_worse: bool
) -> Verdict:
    """``direction``: +1 when the test finds B significantly larger, -1 smaller, 0 neither,
    None when there was nothing to test."""
    worse = change > threshold if higher_is_worse else change < -threshold
    better = change < -threshold if higher_is_worse else change > threshold
    if not worse and not better:
        return "within threshold"
    if direction is None:
        return "regressed (untested)" if worse else "within threshold"
    worse_way = 1 if higher_is_worse else -1
    if worse:
        return "regressed" if direction == worse_way else "not significant"
    return "improved" if direction == -worse_way else "within threshold"


def _direction(interval: Interval) -> int:
    return 1 if interval.low > 0 else -1 if interval.high < 0 else 0


def _rates(run: Run) -> list[float]:
    """Calls per second, one per second of the run's timeline (the last one, usually
    partial, left out)."""
    points = [float(point.calls) for point in run.timeline]
    return points[:-1] if len(points) > _MIN_TIMELINE else points


def compare_runs(
    a: Run,
    b: Run,
    *,
    threshold_pct: float = DEFAULT_THRESHOLD,
    confidence: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> Comparison:
    """Compare B against A (the baseline).

    ``confidence`` holds for the four tests together: each is run at
    ``1 - (1 - confidence) / 4`` (Bonferroni), so two runs of one unchanged build raise a
    false alarm in at most ``1 - confidence`` of comparisons.
    """
    result = Comparison(threshold_pct, confidence)
    each = 1.0 - (1.0 - confidence) / len(METRICS)
    samples_a, samples_b = a.samples_ms, b.samples_ms
    tested = bool(samples_a) and bool(samples_b)
    if tested:
        result.mann_whitney = mann_whitney(samples_a, samples_b)
    else:
        result.warnings.append(
            "a run has no latency samples: the percentiles are judged on the threshold alone"
        )
    fewest = min(len(samples_a), len(samples_b))
    for name, q in _PERCENTILES:
        value_a = float(a.latency_ms.get(name, math.nan))
        value_b = float(b.latency_ms.get(name, math.nan))
        if math.isnan(value_a) or math.isnan(value_b):
            raise ValueError(f"a run has no {name} in latency_ms")
        interval = None
        direction = None
        test: Literal["bootstrap", "mann-whitney", "none"] = "none"
        if tested and fewest * (1.0 - q) >= MIN_TAIL_SAMPLES:
            interval = bootstrap_quantile_diff(samples_a, samples_b, q, confidence=each, seed=seed)
            direction = _direction(interval)
            test = "bootstrap"
        elif result.mann_whitney is not None:
            # too few samples beyond this percentile for its bootstrap: the rank test
            mw = result.mann_whitney
            direction = 0 if mw.p_value >= 1.0 - each else (1 if mw.z > 0 else -1)
            test = "mann-whitney"
        change = _change(value_a, value_b)
        verdict = _verdict(change, threshold_pct, direction, True)
        result.metrics.append(
            MetricChange(name, value_a, value_b, change, interval, verdict, test=test)
        )
    if tested and fewest * 0.01 < MIN_TAIL_SAMPLES:
        result.warnings.append(
            f"{fewest} samples leave fewer than {MIN_TAIL_SAMPLES} beyond p99: the tail "
            "percentiles are tested with Mann-Whitney U (a shift of the whole distribution)"
        )
    rates_a, rates_b = _rates(a), _rates(b)
    interval = None
    direction = None
    if len(rates_a) >= _MIN_TIMELINE and len(rates_b) >= _MIN_TIMELINE:
        interval = bootstrap_mean_diff(rates_a, rates_b, confidence=each, seed=seed)
        direction = _direction(interval)
    else:
        result.warnings.append(
            "a run has too short a timeline: throughput is judged on the threshold alone"
        )
    change = _change(a.throughput, b.throughput)
    verdict = _verdict(change, threshold_pct, direction, False)
    result.metrics.append(
        MetricChange(
            "calls/s",
            a.throughput,
            b.throughput,
            change,
            interval,
            verdict,
            higher_is_worse=False,
            test="none" if interval is None else "bootstrap",
        )
    )
    if (a.tool, a.args) != (b.tool, b.args):
        result.warnings.append(
            f"A and B called different things: {a.tool} {a.args} vs {b.tool} {b.args}"
        )
    if (a.mode, a.concurrency, a.rate) != (b.mode, b.concurrency, b.rate):
        result.warnings.append(
            f"A and B ran different loads: {_load(a)} vs {_load(b)}; the comparison may not be fair"
        )
    return result


def _load(run: Run) -> str:
    if run.mode == "open":
        return f"open loop at {run.rate:g}/s"
    return f"closed loop, concurrency {run.concurrency}"


# -- output -----------------------------------------------------------------------------------


def _value(metric: MetricChange, value: float) -> str:
    if metric.name == "calls/s":
        return f"{value:,.1f}"
    return _table.duration(value)


def _interval_text(metric: MetricChange, comparison: Comparison) -> str:
    interval = metric.interval
    test = comparison.mann_whitney
    if metric.test == "mann-whitney" and test is not None:
        return f"(U test, p = {test.p_value:.2g})"
    if interval is None:
        return "(untested)"
    if metric.name == "calls/s":
        return f"[{interval.low:+,.1f}, {interval.high:+,.1f}]"
    return f"[{_signed(interval.low)}, {_signed(interval.high)}]"


def _signed(ms: float) -> str:
    return ("+" if ms >= 0 else "-") + _table.duration(abs(ms))


def _describe(label: str, path: str, run: Run) -> str:
    what = f"{run.tool}" if run.tool else run.kind
    errors = f", {run.error_count} errors" if run.error_count else ""
    return (
        f"{label}  {path}: {run.kind} of {what} on {run.target} ({run.era}), "
        f"{run.calls:,} calls{errors}, {_load(run)}, {run.started_at}"
    )


def render(comparison: Comparison, a: Run, b: Run) -> _table.Table:
    table = _table.Table(
        [
            ("metric", "left"),
            ("A", "right"),
            ("B", "right"),
            ("change", "right"),
            ("interval of B-A", "right"),
            ("verdict", "left"),
        ]
    )
    for metric in comparison.metrics:
        style = (
            "bold red" if metric.regressed else "green" if metric.verdict == "improved" else None
        )
        table.add(
            [
                metric.name,
                _value(metric, metric.a),
                _value(metric, metric.b),
                _table.percent(metric.change_pct, sign=True),
                _interval_text(metric, comparison),
                metric.verdict,
            ],
            style,
        )
    table.add(["errors", f"{a.error_count:,}", f"{b.error_count:,}", "", "", ""], "dim")
    return table


def summary_lines(comparison: Comparison) -> list[str]:
    lines = []
    test = comparison.mann_whitney
    if test is not None:
        p = "p < 0.001" if test.p_value < 0.001 else f"p = {test.p_value:.3f}"
        lines.append(
            f"Mann-Whitney U on the latencies: z = {test.z:+.2f}, {p}, "
            f"P(a call of B is slower than one of A) = {test.prob_b_greater:.2f}"
        )
    each = 100.0 * (1.0 - (1.0 - comparison.confidence) / len(METRICS))
    lines.append(
        f"intervals: bootstrap, {each:.4g}% each, {comparison.confidence * 100:g}% for the "
        f"{len(METRICS)} metrics together (Bonferroni)"
    )
    lines += [f"note: {warning}" for warning in comparison.warnings]
    threshold = f"{comparison.threshold_pct:g}%"
    regressions = comparison.regressions
    if regressions:
        lines.append(
            f"REGRESSION: B is worse than A beyond {threshold} on {', '.join(regressions)}"
        )
    else:
        unsure = [m.name for m in comparison.metrics if m.verdict == "not significant"]
        tail = f" ({', '.join(unsure)} moved beyond it, but not significantly)" if unsure else ""
        lines.append(f"no significant regression beyond {threshold}{tail}")
    return lines


# -- the command ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("baseline", metavar="A.json", help="the baseline Run file")
    parser.add_argument("candidate", metavar="B.json", help="the Run file to judge")
    parser.add_argument(
        "--threshold",
        default=f"{DEFAULT_THRESHOLD:g}%",
        help="the largest change that is not a regression (default: %(default)s)",
    )
    parser.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="confidence of the four tests together (default: %(default)s)",
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="the bootstrap's random seed"
    )


def run(args: argparse.Namespace) -> int:
    try:
        threshold = parse_threshold(args.threshold)
        if not 0.5 <= args.confidence < 1.0:
            raise ValueError(f"--confidence must be in [0.5, 1), not {args.confidence}")
        a = load_run(args.baseline)
        b = load_run(args.candidate)
        comparison = compare_runs(
            a, b, threshold_pct=threshold, confidence=args.confidence, seed=args.seed
        )
    except (OSError, ValueError) as exc:
        print(f"millimcp compare: {exc}", file=sys.stderr)
        return 2
    print(_describe("A", _short(args.baseline), a))
    print(_describe("B", _short(args.candidate), b))
    render(comparison, a, b).print()
    for line in summary_lines(comparison):
        print(line)
    return 1 if comparison.regressions else 0


def _short(path: str) -> str:
    return Path(path).name
