"""The report's charts as data: one spec per chart, drawn by the page's script into SVG.

The latency histogram (log bins), the latency by percentile (the CDF, with the tail spread
out), p50/p99 and throughput over time (from a run's ``timeline``) and the stage breakdown as
stacked bars (profile runs). Run A is drawn in the first of :data:`COLORS`, run B in the
second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from millimcp.lab.results import Run

__all__ = ["COLORS", "STAGE_COLORS", "chart_specs", "run_tag"]

COLORS = ("#2563eb", "#ea580c")
"""Run A and run B."""
STAGE_COLORS = (
    "#2563eb",
    "#16a34a",
    "#ea580c",
    "#9333ea",
    "#0891b2",
    "#dc2626",
    "#ca8a04",
    "#db2777",
    "#4b5563",
    "#65a30d",
    "#7c3aed",
    "#0d9488",
)
_HISTOGRAM_BINS = 40
_PERCENTILE_LEVELS = (
    0.0,
    0.1,
    0.25,
    0.5,
    0.75,
    0.8,
    0.9,
    0.95,
    0.97,
    0.98,
    0.99,
    0.995,
    0.999,
    0.9995,
    0.9999,
    0.99999,
)


# -- the distributions ------------------------------------------------------------------------


def _samples(run: Run) -> list[float]:
    """The run's latencies: its reservoir, else quantiles read from its HDR histogram."""
    if run.samples_ms:
        return sorted(float(value) for value in run.samples_ms)
    if not run.histogram:
        return []
    try:
        from hdrh.histogram import HdrHistogram  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return []
    histogram = HdrHistogram.decode(run.histogram.encode("ascii"))
    count = min(int(histogram.get_total_count()), 20_000)
    return [
        histogram.get_value_at_percentile(100.0 * (index + 0.5) / count) / 1000.0
        for index in range(count)
    ]


def _quantile(ordered: Sequence[float], level: float) -> float:
    position = min(len(ordered) - 1, max(0, math.ceil(level * len(ordered)) - 1))
    return ordered[position]


def _tail_x(level: float) -> float:
    """The percentile axis: 0 at the minimum, 1 at 90%, 2 at 99%, 3 at 99.9%..."""
    return -math.log10(1.0 - level) if level < 1.0 else 6.0


def _percentile_chart(runs: Sequence[Run], samples: Sequence[list[float]]) -> dict[str, Any]:
    series = []
    deepest = 1
    for index, ordered in enumerate(samples):
        if not ordered:
            continue
        levels = [level for level in _PERCENTILE_LEVELS if level <= 1.0 - 1.0 / len(ordered)]
        points: list[list[Any]] = [
            [_tail_x(level), _quantile(ordered, level), f"p{level * 100:g}"] for level in levels
        ]
        points.append([_tail_x(1.0 - 0.5 / len(ordered)), ordered[-1], "max"])
        for point in points:
            point[1] = max(point[1], 1e-3)  # a log axis
        deepest = max(deepest, math.ceil(points[-1][0] - 0.05))
        series.append(_series(runs, index, points=points))
    ticks = [[0, "0%"], [1, "90%"], [2, "99%"], [3, "99.9%"], [4, "99.99%"], [5, "99.999%"]]
    return {
        "id": "chart-percentiles",
        "kind": "lines",
        "title": "Latency by percentile (CDF, tail spread out)",
        "x": {"label": "percentile", "ticks": ticks[: deepest + 1], "min": 0, "max": deepest},
        "y": {"label": "latency (ms, log scale)", "scale": "log"},
        "series": series,
    }


def _histogram_chart(runs: Sequence[Run], samples: Sequence[list[float]]) -> dict[str, Any]:
    values = [ordered for ordered in samples if ordered]
    low = max(min(ordered[0] for ordered in values), 1e-3)
    high = max(max(ordered[-1] for ordered in values), low * 1.01)
    ratio = (high * 1.0001 / low) ** (1.0 / _HISTOGRAM_BINS)
    edges = [low * ratio**step for step in range(_HISTOGRAM_BINS + 1)]
    series = []
    for index, ordered in enumerate(samples):
        if not ordered:
            continue
        counts = [0] * _HISTOGRAM_BINS
        for value in ordered:
            slot = int(math.log(max(value, low) / low) / math.log(ratio))
            counts[min(max(slot, 0), _HISTOGRAM_BINS - 1)] += 1
        total = len(ordered)
        bins = [
            [edges[slot], edges[slot + 1], 100.0 * count / total, count]
            for slot, count in enumerate(counts)
            if count
        ]
        series.append(_series(runs, index, bins=bins))
    return {
        "id": "chart-histogram",
        "kind": "bars",
        "title": "Latency histogram",
        "x": {"label": "latency (ms, log scale)", "scale": "log", "min": low, "max": edges[-1]},
        "y": {"label": "% of calls", "min": 0},
        "series": series,
    }


def _timeline_charts(runs: Sequence[Run]) -> list[dict[str, Any]]:
    percentiles: list[dict[str, Any]] = []
    throughput: list[dict[str, Any]] = []
    for index, run in enumerate(runs):
        rows = [row for row in run.timeline if _get(row, "calls") > 0]
        if not rows:
            continue
        tag = run_tag(runs, index)
        for key, name, dash in (("p50_ms", "p50", ""), ("p99_ms", "p99", "6 4")):
            points = [[_get(row, "t"), _get(row, key)] for row in rows]
            percentiles.append(
                _series(runs, index, points=points, name=f"{tag}{name}".strip(), dash=dash)
            )
        points = [[_get(row, "t"), _get(row, "calls")] for row in run.timeline]
        throughput.append(_series(runs, index, points=points))
    if not percentiles:
        return []
    return [
        {
            "id": "chart-timeline",
            "kind": "lines",
            "title": "p50 and p99 over time",
            "x": {"label": "seconds", "min": 0},
            "y": {"label": "latency (ms)", "min": 0},
            "series": percentiles,
        },
        {
            "id": "chart-throughput",
            "kind": "lines",
            "title": "Calls per second over time",
            "x": {"label": "seconds", "min": 0},
            "y": {"label": "calls/s", "min": 0},
            "series": throughput,
        },
    ]


def _stage_chart(runs: Sequence[Run]) -> dict[str, Any] | None:
    rows = []
    names: list[str] = []
    for index, run in enumerate(runs):
        for label, stages in (("warm", run.stages), ("cold", run.cold)):
            if not stages:
                continue
            for name in stages:
                if name not in names:
                    names.append(name)
            rows.append((f"{run_tag(runs, index)}{label}", stages))
    if not rows:
        return None
    colors = {name: STAGE_COLORS[index % len(STAGE_COLORS)] for index, name in enumerate(names)}
    return {
        "id": "chart-stages",
        "kind": "stacked",
        "title": "Where the time goes (mean per stage)",
        "x": {"label": "milliseconds (mean)", "min": 0},
        "legend": [{"name": name, "color": colors[name]} for name in names],
        "rows": [
            {
                "name": label,
                "segments": [
                    {
                        "name": name,
                        "value": _get(stage, "mean_ms"),
                        "share": _get(stage, "share"),
                        "color": colors[name],
                    }
                    for name, stage in stages.items()
                ],
            }
            for label, stages in rows
        ],
    }


def _get(row: Any, key: str) -> float:
    """A number from a timeline row or stage, whether a dict or a struct."""
    value = row.get(key) if isinstance(row, dict) else getattr(row, key, None)
    return float(value) if isinstance(value, int | float) else 0.0


def run_tag(runs: Sequence[Run], index: int) -> str:
    """``"A "`` or ``"B "`` when two runs are shown, else nothing."""
    return "" if len(runs) == 1 else "AB"[index] + " "


def _series(runs: Sequence[Run], index: int, **fields: Any) -> dict[str, Any]:
    name = fields.pop("name", None) or ("run" if len(runs) == 1 else "AB"[index])
    return {"name": name, "color": COLORS[index % len(COLORS)], **fields}


def chart_specs(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """What the page's script draws, one spec per chart (also what a test expects)."""
    samples = [_samples(run) for run in runs]
    charts: list[dict[str, Any]] = []
    if any(samples):
        charts.append(_histogram_chart(runs, samples))
        charts.append(_percentile_chart(runs, samples))
    charts.extend(_timeline_charts(runs))
    stages = _stage_chart(runs)
    if stages is not None:
        charts.append(stages)
    return charts
