"""millimcp.lab.results: the Run file others read, and the latency summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from millimcp.lab.results import (
    LATENCY_KEYS,
    SCHEMA,
    Run,
    TimelinePoint,
    host_info,
    latency_summary,
    load_run,
    now_iso,
    save_run,
)


def a_run(**changes: object) -> Run:
    fields: dict[str, object] = {
        "kind": "bench",
        "started_at": now_iso(),
        "target": "http://127.0.0.1:1/mcp",
        "transport": "http",
        "era": "modern",
        "server": "s/1",
        "tool": "echo",
        "args": {"text": "hi"},
        "mode": "open",
        "concurrency": 8,
        "rate": 100.0,
        "duration_s": 2.0,
        "warmup_s": 0.5,
        "calls": 4,
        "errors": {"http_503": 1},
        "throughput": 2.0,
        "latency_ms": latency_summary([1.0, 2.0, 3.0, 4.0]),
        "samples_ms": [1.0, 2.0, 3.0, 4.0],
        "timeline": [TimelinePoint(t=0.0, calls=2, errors=1, p50_ms=1.0, p99_ms=2.0)],
        "host": host_info(),
    }
    fields.update(changes)
    return Run(**fields)  # type: ignore[arg-type]


def test_latency_summary_uses_nearest_rank_percentiles() -> None:
    summary = latency_summary([float(v) for v in range(1, 1001)])
    assert list(summary) == list(LATENCY_KEYS)
    assert summary["min"] == 1.0
    assert summary["max"] == 1000.0
    assert summary["mean"] == 500.5
    assert summary["p50"] == 500.0
    assert summary["p90"] == 900.0
    assert summary["p99"] == 990.0
    assert summary["p999"] == 999.0
    assert summary["stdev"] == pytest.approx(288.8194, rel=1e-5)


def test_latency_summary_of_nothing_is_zeros() -> None:
    assert latency_summary([]) == dict.fromkeys(LATENCY_KEYS, 0.0)
    assert latency_summary([3.0])["stdev"] == 0.0


def test_a_run_round_trips_through_its_file(tmp_path: Path) -> None:
    run = a_run(notes=["closed loop"], client="lean")
    path = tmp_path / "run.json"
    save_run(run, path)
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA
    assert data["latency_ms"]["p99"] == 4.0
    assert data["stages"] is None
    assert data["timeline"][0] == {"t": 0.0, "calls": 2, "errors": 1, "p50_ms": 1.0, "p99_ms": 2.0}
    assert load_run(path) == run
    assert load_run(path).error_count == 1


def test_unknown_fields_are_ignored_and_wrong_files_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    save_run(a_run(), path)
    data = json.loads(path.read_text())
    data["added_later"] = 1
    path.write_text(json.dumps(data))
    assert load_run(path).calls == 4
    data["schema"] = "other@1"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="has schema 'other@1'"):
        load_run(path)
    del data["calls"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="not a lab Run file"):
        load_run(path)
