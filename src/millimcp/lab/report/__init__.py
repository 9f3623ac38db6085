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
import sys
from pathlib import Path

from millimcp.errors import ConfigurationError
from millimcp.lab.report.browser import browser_command, find_browser, screenshot
from millimcp.lab.report.charts import chart_specs
from millimcp.lab.report.page import render_report

__all__ = [
    "add_arguments",
    "browser_command",
    "chart_specs",
    "find_browser",
    "render_report",
    "run",
    "screenshot",
]


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
