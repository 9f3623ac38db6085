"""millimcp.lab.report: the self-contained HTML page, drawn by a real headless Chromium."""

from __future__ import annotations

import random
import re
import struct
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from millimcp.lab.cli import main as lab_main
from millimcp.lab.report import (
    browser_command,
    chart_specs,
    find_browser,
    render_report,
    screenshot,
)
from millimcp.lab.results import (
    Host,
    Run,
    Stage,
    Step,
    TimelinePoint,
    latency_summary,
    save_run,
)


def make_run(
    seed: int,
    *,
    scale: float = 1.0,
    kind: str = "bench",
    stages: bool = False,
    samples: int = 3000,
    target: str = "http://127.0.0.1:8000/mcp",
) -> Run:
    rng = random.Random(seed)
    latencies = [rng.lognormvariate(0.0, 0.4) * scale for _ in range(samples)]
    profile = (
        {
            "connect": Stage(mean_ms=0.1 * scale, p95_ms=0.2, share=0.08),
            "server": Stage(mean_ms=0.9 * scale, p95_ms=1.4, share=0.75),
            "decode": Stage(mean_ms=0.2 * scale, p95_ms=0.3, share=0.17),
        }
        if stages
        else None
    )
    return Run(
        kind=kind,  # type: ignore[arg-type]
        started_at="2026-08-01T10:00:00.000Z",
        target=target,
        transport="http",
        era="modern",
        server="demo/1.0",
        tool=None if kind == "scenario" else "echo",
        args={"scenario": "agent", "seed": 7} if kind == "scenario" else {"text": "hi"},
        concurrency=8,
        duration_s=6.0,
        calls=samples,
        errors={"timeout": 2} if scale > 1 else {},
        throughput=samples / 6.0,
        latency_ms=latency_summary(latencies),
        samples_ms=latencies,
        timeline=[
            TimelinePoint(t=float(second), calls=500, errors=0, p50_ms=scale, p99_ms=3 * scale)
            for second in range(6)
        ],
        stages=profile,
        cold=profile,
        steps=(
            {"order": Step(calls=samples, errors=0, latency_ms=latency_summary(latencies))}
            if kind == "scenario"
            else None
        ),
        host=Host(python="3.11.2", platform="Linux", cpus=2, millimcp="0.1.0"),
        notes=["closed loop: a stall hides <here>"],
        client="full",
    )


class Page(HTMLParser):
    """What a test needs from a page: body attributes, each svg's attributes, external refs."""

    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str | None] = {}
        self.svgs: list[dict[str, str | None]] = []
        self.tags: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        if tag == "body":
            self.body = found
        if tag == "svg":
            self.svgs.append(found)
        for name in ("src", "href"):
            if found.get(name):
                self.external.append(f"{tag} {name}={found[name]}")
        if tag == "link":
            self.external.append("link")


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


def expected_marks(spec: dict[str, Any]) -> int:
    if spec["kind"] == "lines":
        return sum(len(series["points"]) for series in spec["series"])
    if spec["kind"] == "bars":
        return sum(len(series["bins"]) for series in spec["series"])
    return sum(len(row["segments"]) for row in spec["rows"])


# -- the page, as written ---------------------------------------------------------------------


def test_the_page_is_self_contained() -> None:
    text = render_report([make_run(1, stages=True), make_run(2, scale=1.3)])
    page = parse(text)
    assert page.external == []  # no <link>, no src=, no href=: nothing to fetch
    assert "url(" not in text
    assert "@import" not in text
    assert page.tags.count("script") == 2  # the data and the drawing code, both inline
    assert page.body["data-charts"] == "5"


def test_text_from_a_run_cannot_break_out_of_the_page() -> None:
    hostile = "http://x/</script><script>alert(1)</script><b>&"
    text = render_report([make_run(1, target=hostile)])
    assert text.count("</script>") == 2
    assert "<script>alert(1)" not in text
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in text  # shown, escaped, in the card


def test_the_charts_follow_the_data() -> None:
    one = make_run(1, stages=True)
    specs = {spec["id"]: spec for spec in chart_specs([one])}
    assert list(specs) == [
        "chart-histogram",
        "chart-percentiles",
        "chart-timeline",
        "chart-throughput",
        "chart-stages",
    ]
    (bars,) = specs["chart-histogram"]["series"]
    assert sum(bin_[3] for bin_ in bars["bins"]) == 3000
    assert sum(bin_[2] for bin_ in bars["bins"]) == pytest.approx(100.0)
    (curve,) = specs["chart-percentiles"]["series"]
    latencies = [point[1] for point in curve["points"]]
    assert latencies == sorted(latencies)
    assert latencies[-1] == max(one.samples_ms)
    assert [point[2] for point in curve["points"]][:4] == ["p0", "p10", "p25", "p50"]
    assert [row["name"] for row in specs["chart-stages"]["rows"]] == ["warm", "cold"]
    # No samples and no histogram: only the timeline can be drawn.
    bare = make_run(1)
    bare.samples_ms = []
    assert [spec["id"] for spec in chart_specs([bare])] == ["chart-timeline", "chart-throughput"]


def test_a_run_with_only_its_hdr_histogram_still_gets_its_distribution() -> None:
    from hdrh.histogram import HdrHistogram

    run = make_run(3)
    histogram = HdrHistogram(1, 60_000_000, 3)
    for latency in run.samples_ms:
        histogram.record_value(round(latency * 1000))
    run.histogram = histogram.encode().decode("ascii")
    run.samples_ms = []
    specs = {spec["id"]: spec for spec in chart_specs([run])}
    (curve,) = specs["chart-percentiles"]["series"]
    median = next(point[1] for point in curve["points"] if point[2] == "p50")
    assert median == pytest.approx(run.latency_ms["p50"], rel=0.01)


def test_the_comparison_is_millimcp_compares_judgement() -> None:
    a, b = make_run(1), make_run(2, scale=1.5)
    text = render_report([a, b])
    assert "Comparison (B against A)" in text
    p50 = 100 * (b.latency_ms["p50"] / a.latency_ms["p50"] - 1)
    assert f'<span class="worse">{p50:+.1f}%</span>' in text
    assert '<span class="worse">regressed</span>' in text
    assert "REGRESSION: B is worse than A beyond 15%" in text
    assert "Mann-Whitney U on the latencies" in text
    # The other way round B is faster: an improvement, not a regression.
    text = render_report([b, a])
    assert '<span class="better">improved</span>' in text
    assert "REGRESSION" not in text
    # A threshold above the change: no regression either.
    assert "REGRESSION" not in render_report([a, b], threshold_pct=80.0)


def test_the_runs_notes_are_shown() -> None:
    text = render_report([make_run(1)])
    assert "<li>closed loop: a stall hides &lt;here&gt;</li>" in text


def test_a_scenario_run_gets_its_steps_table() -> None:
    text = render_report([make_run(1, kind="scenario")])
    assert "Scenario steps" in text
    assert "<code>order</code>" in text
    assert "scenario agent" in text


# -- the page, as a browser draws it ----------------------------------------------------------


@pytest.fixture(scope="module")
def browser(missing_tool: Any) -> str:
    found = find_browser()
    if found is None:
        missing_tool("chromium is not installed (.ci/run installs it: apt-get install chromium)")
    assert found is not None
    return found


def dump_dom(browser: str, page: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="millimcp-test-chromium-") as profile:
        command = browser_command(browser, profile, "--dump-dom", page.resolve().as_uri())
        completed = subprocess.run(command, capture_output=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr.decode(errors="replace")[-2000:]
    return completed.stdout.decode()


@pytest.mark.parametrize("count", [1, 2])
def test_chromium_draws_every_chart_with_the_data(browser: str, tmp_path: Path, count: int) -> None:
    runs = [make_run(1, stages=True, kind="scenario"), make_run(2, scale=1.4, stages=True)]
    runs = runs[:count]
    page = tmp_path / "report.html"
    page.write_text(render_report(runs))
    specs = chart_specs(runs)

    drawn = parse(dump_dom(browser, page))

    assert drawn.body.get("data-charts-drawn") == str(len(specs)) == "5"
    assert [int(svg.get("data-marks") or 0) for svg in drawn.svgs] == [
        expected_marks(spec) for spec in specs
    ]
    assert all(expected_marks(spec) > 0 for spec in specs)


def test_chromium_reports_a_chart_it_could_not_draw(browser: str, tmp_path: Path) -> None:
    text = render_report([make_run(1)])
    broken = re.sub(r'"kind":"bars"', '"kind":"pie"', text, count=1)
    assert broken != text
    page = tmp_path / "broken.html"
    page.write_text(broken)
    dom = dump_dom(browser, page)
    drawn = parse(dom)
    assert drawn.body.get("data-charts-drawn") == "3"  # of 4
    assert "This chart could not be drawn" in dom


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def test_the_command_writes_the_page_and_a_screenshot(
    browser: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    save_run(make_run(1, stages=True), a)
    save_run(make_run(2, scale=1.2, stages=True), b)
    out, shot = tmp_path / "report.html", tmp_path / "report.png"
    status = lab_main(["report", str(a), str(b), "-o", str(out), "--screenshot", str(shot)])
    assert status == 0, capsys.readouterr()
    assert parse(out.read_text()).body["data-charts"] == "5"
    assert png_size(shot) == (1280, 2000)
    assert shot.stat().st_size > 20_000  # a page with content, not a blank one
    screenshot(out, tmp_path / "small.png", width=800, height=600)
    assert png_size(tmp_path / "small.png") == (800, 600)


def test_the_command_refuses_three_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.json"
    save_run(make_run(1), path)
    assert lab_main(["report", str(path), str(path), str(path), "-o", str(tmp_path / "x")]) == 2
    assert "one run, or two" in capsys.readouterr().err
