"""``millimcp report RUN.json [RUN2.json] -o report.html``: one self-contained HTML page.

The page needs no network: its CSS and script are inline, and the script draws the charts
into inline SVG from the data embedded in the page (a JSON block): the latency histogram, the
latency by percentile (the CDF, with the tail spread out), p50/p99 and throughput over time
(from the run's ``timeline``), and the stage breakdown as stacked bars (profile runs). Tables
show the percentiles, errors, the steps of a scenario and, given two runs, the comparison.
When the script has drawn, ``<body>`` carries ``data-charts-drawn="N"`` and each chart's
``<svg>`` a ``data-marks`` count of the marks it drew: a headless browser can check it.

``--screenshot PNG`` also renders the page in a local headless Chromium (``chromium``,
``chromium-browser`` or ``google-chrome`` on PATH, or ``MILLIMCP_CHROMIUM``).
"""

from __future__ import annotations

import argparse
import html
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from millimcp.errors import ConfigurationError
from millimcp.lab._table import duration

if TYPE_CHECKING:
    from millimcp.lab.results import Run

__all__ = [
    "add_arguments",
    "chart_specs",
    "find_browser",
    "render_report",
    "run",
    "screenshot",
]

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
_PERCENTILE_KEYS: tuple[tuple[str, str], ...] = (
    ("p50", "p50"),
    ("p90", "p90"),
    ("p95", "p95"),
    ("p99", "p99"),
    ("p99.9", "p999"),
    ("max", "max"),
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
        tag = _tag(runs, index)
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
            rows.append((f"{_tag(runs, index)}{label}", stages))
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


def _tag(runs: Sequence[Run], index: int) -> str:
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


# -- the page ---------------------------------------------------------------------------------


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], css: str = "") -> str:
    cells = "".join(f"<th>{_esc(cell)}</th>" for cell in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>'


def _describe(run: Run) -> str:
    """One line saying what the run measured."""
    if run.kind == "scenario":
        what = f"scenario {(run.args or {}).get('scenario', '')}".strip()
    else:
        what = f"{run.kind} {run.tool or ''}".strip()
    if run.mode == "open":
        load = f"open loop at {run.rate:g}/s"
    else:
        load = f"closed loop, {run.concurrency} in flight"
    return f"{what} · {load} · {run.duration_s:.1f} s"


def _run_card(run: Run, index: int, count: int) -> str:
    tag = "" if count == 1 else f'<span class="tag" style="background:{COLORS[index]}">'
    tag += "" if count == 1 else f"{'AB'[index]}</span> "
    facts = [
        ("target", run.target),
        ("server", run.server or "unknown"),
        ("transport / era", f"{run.transport} / {run.era}"),
        ("started", run.started_at),
        ("processes", str(run.processes)),
        ("warm-up", f"{run.warmup_s:g} s"),
    ]
    if run.args and run.kind != "scenario":
        facts.append(("args", json.dumps(run.args)[:200]))
    if run.client:
        facts.append(("client", run.client))
    host = run.host if isinstance(run.host, dict) else {}
    if host:
        facts.append(("host", ", ".join(f"{key} {value}" for key, value in host.items())))
    items = "".join(f"<dt>{_esc(key)}</dt><dd>{_esc(value)}</dd>" for key, value in facts)
    notes = "".join(f"<li>{_esc(note)}</li>" for note in run.notes)
    notes = f'<ul class="notes">{notes}</ul>' if notes else ""
    return (
        f'<section class="card"><h2>{tag}{_esc(_describe(run))}</h2><dl>{items}</dl>'
        f"{notes}</section>"
    )


def _summary_table(runs: Sequence[Run]) -> str:
    head = ["run", "calls", "errors", "calls/s", "mean ± sd", "min"]
    head += [label for label, _ in _PERCENTILE_KEYS]
    rows = []
    for index, run in enumerate(runs):
        latency = run.latency_ms
        errors = sum(run.errors.values())
        row = [
            _esc(_tag(runs, index) or run.kind),
            _number(run.calls),
            f'<span class="{"bad" if errors else ""}">{errors:,}</span>',
            _number(run.throughput),
            f"{duration(latency.get('mean', 0.0))} ± {duration(latency.get('stdev', 0.0))}",
            duration(latency.get("min", 0.0)),
        ]
        row += [duration(latency.get(key, 0.0)) for _, key in _PERCENTILE_KEYS]
        rows.append(row)
    unit = "iterations" if all(run.kind == "scenario" for run in runs) else "calls"
    note = f'<p class="note">Latency of successful {unit}.'
    if any(run.mode == "closed" for run in runs):
        note += (
            " Closed loop: a call starts only when one ends, so a stall delays the calls"
            " behind it instead of showing in their latency (coordinated omission)."
        )
    note += "</p>"
    return "<h2>Latency</h2>" + _table(head, rows, "numbers") + note


def _errors_table(runs: Sequence[Run]) -> str:
    kinds = sorted({kind for run in runs for kind in run.errors})
    if not kinds:
        return ""
    head = ["kind", *(("count",) if len(runs) == 1 else ("A", "B"))]
    rows = [[_esc(kind), *(f"{run.errors.get(kind, 0):,}" for run in runs)] for kind in kinds]
    return "<h2>Errors</h2>" + _table(head, rows, "numbers")


def _step_field(step: Any, key: str) -> Any:
    return step.get(key) if isinstance(step, dict) else getattr(step, key, None)


def _steps_table(runs: Sequence[Run]) -> str:
    parts = []
    for index, run in enumerate(runs):
        if not run.steps:
            continue
        head = ["step", "calls", "errors", "mean", "p50", "p95", "p99", "max"]
        rows = []
        for name, step in run.steps.items():
            latency = _step_field(step, "latency_ms") or {}
            latency = latency if isinstance(latency, dict) else {}
            errors = _step_field(step, "errors") or 0
            count = sum(errors.values()) if isinstance(errors, dict) else int(errors)
            calls = int(_step_field(step, "calls") or 0)
            rows.append(
                [
                    f"<code>{_esc(name)}</code>",
                    _number(calls),
                    f'<span class="{"bad" if count else ""}">{count:,}</span>',
                    *(
                        duration(float(latency.get(key, 0.0))) if calls else "-"
                        for key in ("mean", "p50", "p95", "p99", "max")
                    ),
                ]
            )
        title = "Scenario steps" + (f" ({'AB'[index]})" if len(runs) > 1 else "")
        parts.append(f"<h2>{title}</h2>" + _table(head, rows, "numbers"))
    return "".join(parts)


def _compare_table(runs: Sequence[Run], threshold_pct: float) -> str:
    """B against A, as ``millimcp compare`` judges it (bootstrap intervals, Mann-Whitney U)."""
    if len(runs) != 2:
        return ""
    from millimcp.lab.compare import compare_runs, summary_lines

    a, b = runs
    comparison = compare_runs(a, b, threshold_pct=threshold_pct)
    rows = []
    for metric in comparison.metrics:
        css = "worse" if metric.regressed else "better" if metric.verdict == "improved" else ""
        if metric.name == "calls/s":
            shown = [f"{_number(metric.a)} /s", f"{_number(metric.b)} /s"]
        else:
            shown = [duration(metric.a), duration(metric.b)]
        interval = metric.interval
        if metric.test == "mann-whitney" and comparison.mann_whitney is not None:
            tested = f"U test, p = {comparison.mann_whitney.p_value:.2g}"
        elif interval is None:
            tested = "untested"
        elif metric.name == "calls/s":
            tested = f"[{interval.low:+,.1f}, {interval.high:+,.1f}] /s"
        else:
            tested = f"[{_signed_ms(interval.low)}, {_signed_ms(interval.high)}]"
        change = "n/a" if math.isinf(metric.change_pct) else f"{metric.change_pct:+.1f}%"
        rows.append(
            [
                _esc(metric.name),
                *shown,
                f'<span class="{css}">{change}</span>',
                _esc(tested),
                f'<span class="{css}">{_esc(metric.verdict)}</span>',
            ]
        )
    rows.append(["errors", f"{a.error_count:,}", f"{b.error_count:,}", "", "", ""])
    head = ["metric", "A", "B", "change", "interval of B-A", "verdict"]
    lines = "".join(f"<li>{_esc(line)}</li>" for line in summary_lines(comparison))
    return (
        "<h2>Comparison (B against A)</h2>"
        + _table(head, rows, "numbers compare")
        + f'<ul class="summary">{lines}</ul>'
    )


def _signed_ms(value: float) -> str:
    return ("+" if value >= 0 else "-") + duration(abs(value))


def _figure(spec: dict[str, Any]) -> str:
    return (
        f'<figure id="{_esc(spec["id"])}" class="chart"><figcaption>{_esc(spec["title"])}'
        "</figcaption><noscript>This chart needs JavaScript.</noscript></figure>"
    )


def _asset(name: str) -> str:
    return resources.files("millimcp.lab").joinpath(name).read_text(encoding="utf-8")


def _json_for_script(value: Any) -> str:
    """JSON that cannot end the ``<script>`` element it sits in."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_report(
    runs: Sequence[Run], *, title: str | None = None, threshold_pct: float = 15.0
) -> str:
    """The HTML page for one run, or for two runs compared (A, then B; a change beyond
    ``threshold_pct`` that is significant is a regression, as in ``millimcp compare``)."""
    if not 1 <= len(runs) <= 2:
        raise ConfigurationError("a report shows one run, or two compared")
    charts = chart_specs(runs)
    if title is None:
        title = "millimcp lab: " + (_describe(runs[0]) if len(runs) == 1 else "B against A")
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        f"<header><h1>{_esc(title)}</h1><p>Generated {generated} by millimcp report.</p></header>",
        '<div class="cards">',
        *(_run_card(run, index, len(runs)) for index, run in enumerate(runs)),
        "</div>",
        _compare_table(runs, threshold_pct),
        _summary_table(runs),
        '<h2>Charts</h2><div class="charts">',
        *(_figure(spec) for spec in charts),
        "</div>",
        _errors_table(runs),
        _steps_table(runs),
    ]
    data = {"charts": charts}
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_asset('report.css')}</style></head>"
        f'<body data-charts="{len(charts)}">'
        + "".join(body)
        + f'<script type="application/json" id="report-data">{_json_for_script(data)}</script>'
        + f"<script>{_asset('report.js')}</script></body></html>\n"
    )


# -- a browser, for screenshots ---------------------------------------------------------------


def find_browser() -> str | None:
    """A headless-capable Chromium: ``MILLIMCP_CHROMIUM``, else the first on PATH."""
    given = os.environ.get("MILLIMCP_CHROMIUM")
    if given:
        return given
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_command(browser: str, profile_dir: str, *extra: str) -> list[str]:
    """The headless command line (its own profile directory, no sandbox for root in CI)."""
    return [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--hide-scrollbars",
        f"--user-data-dir={profile_dir}",
        *extra,
    ]


def screenshot(
    page: Path, output: Path, *, width: int = 1280, height: int = 2000, timeout: float = 60.0
) -> None:
    """Render ``page`` in headless Chromium and save a PNG of it."""
    browser = find_browser()
    if browser is None:
        raise ConfigurationError("--screenshot needs chromium (or MILLIMCP_CHROMIUM)")
    with tempfile.TemporaryDirectory(prefix="millimcp-chromium-") as profile:
        command = browser_command(
            browser,
            profile,
            f"--screenshot={output.resolve()}",
            f"--window-size={width},{height}",
            "--force-device-scale-factor=1",
            page.resolve().as_uri(),
        )
        completed = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    if completed.returncode != 0 or not output.exists():
        tail = completed.stderr.decode(errors="replace")[-500:]
        raise ConfigurationError(f"chromium could not take the screenshot: {tail}")


# -- the command ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN.json", help="one run, or two (A B)")
    parser.add_argument("-o", "--output", default="report.html", help="the page to write")
    parser.add_argument("--title", help="the page's title")
    parser.add_argument(
        "--threshold",
        default="15%",
        help="two runs: a significant change beyond it is a regression (default 15%%)",
    )
    parser.add_argument(
        "--screenshot",
        metavar="PNG",
        help="also save a PNG of the page (needs a local headless chromium)",
    )


def run(args: argparse.Namespace) -> int:
    from millimcp.lab.compare import parse_threshold
    from millimcp.lab.results import load_run

    try:
        threshold = parse_threshold(args.threshold)
        if len(args.runs) > 2:
            raise ConfigurationError("a report shows one run, or two compared (A B)")
        runs = [load_run(path) for path in args.runs]
        output = Path(args.output)
        output.write_text(
            render_report(runs, title=args.title, threshold_pct=threshold), encoding="utf-8"
        )
        print(f"wrote {output}")
        if args.screenshot:
            screenshot(output, Path(args.screenshot))
            print(f"wrote {args.screenshot}")
    except (ConfigurationError, ValueError, OSError) as exc:
        print(f"millimcp report: {exc}", file=sys.stderr)
        return 2
    return 0
