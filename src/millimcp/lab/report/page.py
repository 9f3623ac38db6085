"""The report's page: one self-contained HTML document (CSS, script and data inline).

Tables show the percentiles, errors, the steps of a scenario and, given two runs, the
comparison; each chart is a ``<figure>`` the script fills from the data block (see
:mod:`millimcp.lab.report.charts`).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from millimcp.errors import ConfigurationError
from millimcp.lab._table import duration
from millimcp.lab.compare import compare_runs, summary_lines
from millimcp.lab.report.charts import COLORS, chart_specs, run_tag
from millimcp.lab.results import Run

__all__ = ["render_report"]

PERCENTILE_KEYS: tuple[tuple[str, str], ...] = (
    ("p50", "p50"),
    ("p90", "p90"),
    ("p95", "p95"),
    ("p99", "p99"),
    ("p99.9", "p999"),
    ("max", "max"),
)


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
    head += [label for label, _ in PERCENTILE_KEYS]
    rows = []
    for index, run in enumerate(runs):
        latency = run.latency_ms
        errors = sum(run.errors.values())
        row = [
            _esc(run_tag(runs, index) or run.kind),
            _number(run.calls),
            f'<span class="{"bad" if errors else ""}">{errors:,}</span>',
            _number(run.throughput),
            f"{duration(latency.get('mean', 0.0))} ± {duration(latency.get('stdev', 0.0))}",
            duration(latency.get("min", 0.0)),
        ]
        row += [duration(latency.get(key, 0.0)) for _, key in PERCENTILE_KEYS]
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
    return resources.files("millimcp.lab.report").joinpath(name).read_text(encoding="utf-8")


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
