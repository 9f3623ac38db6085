"""millimcp.lab.cli: the lazy registry behind ``millimcp bench | profile | ...``."""

from __future__ import annotations

import csv
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from millimcp.cli import LAB_COMMANDS
from millimcp.cli import main as main_cli
from millimcp.lab import cli
from millimcp.lab.results import load_run
from tests.conftest import free_port, start_server, stop_server

BENCH_SERVER = "tests.integration.lab.bench_server:server"


def test_the_registry_names_every_lab_command() -> None:
    assert tuple(cli.COMMANDS) == LAB_COMMANDS
    assert set(cli.available()) <= set(LAB_COMMANDS)


def test_a_command_without_its_module_is_left_out(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "bench", "millimcp.lab.no_such_module")
    assert "bench" not in cli.available()
    assert cli.main(["bench", "--help"]) == 2
    assert "not a lab command here" in capsys.readouterr().err


def test_the_main_cli_delegates_lab_commands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "scenario", "millimcp.lab.no_such_module")
    assert main_cli(["scenario", "x.toml"]) == 2
    assert "'scenario' is not a lab command here" in capsys.readouterr().err


def test_the_main_help_names_the_lab_commands() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "millimcp", "--help"], capture_output=True, text=True, check=True
    )
    assert " ".join(LAB_COMMANDS) in " ".join(proc.stdout.replace("|", " ").split())


# -- millimcp bench, as a user runs it ------------------------------------------------------


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
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


def millimcp(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "millimcp", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_bench_prints_a_summary_and_exports_json_and_csv(echo_url: str, tmp_path: Path) -> None:
    json_path, csv_path = tmp_path / "run.json", tmp_path / "run.csv"
    proc = millimcp(
        "bench", echo_url, "--tool", "echo", "--args", '{"text": "hi"}', "-c", "2", "-n", "300",
        "--warmup", "0.2", "--export-json", str(json_path), "--export-csv", str(csv_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f'Benchmark: echo {{"text":"hi"}} on {echo_url}\n'), out
    for label in ("Time (mean ± σ):", "Range (min … max):", "p99.9", "calls/s", "Errors:"):  # noqa: RUF001
        assert label in out, out
    assert "closed loop, 2 in flight" in out
    assert "coordinated omission" in out
    assert proc.stderr == ""  # no progress bar unless on a terminal or asked for

    run = load_run(json_path)
    assert (run.kind, run.tool, run.args, run.mode) == ("bench", "echo", {"text": "hi"}, "closed")
    assert run.calls == 300
    assert f"{run.latency_ms['p50']:.3f} ms" in out
    with csv_path.open(newline="") as source:
        rows = list(csv.DictReader(source))
    assert len(rows) == 1
    row = rows[0]
    assert row["target"] == echo_url
    assert (row["tool"], row["mode"], int(row["calls"]), int(row["errors"])) == (
        "echo", "closed", 300, 0,
    )  # fmt: skip
    for key, value in run.latency_ms.items():
        assert float(row[f"{key}_ms"]) == value, key
    assert float(row["throughput"]) == run.throughput
    assert float(row["duration_s"]) == run.duration_s


def test_bench_with_a_progress_bar_still_reports(echo_url: str) -> None:
    proc = millimcp(
        "bench", echo_url, "--tool", "echo", "--args", '{"text": "x"}', "--rate", "200",
        "-d", "1.2", "--warmup", "0", "--progress",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "open loop, 200 calls/s, at most 64 in flight" in proc.stdout
    assert "coordinated omission" not in proc.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tool", "nope"], "Unknown tool"),
        (["--tool", "echo", "--args", "[1]"], "--args must be a JSON object"),
        (["--tool", "echo", "--rate", "0"], "--rate must be above 0"),
        (["--tool", "echo", "-c", "1", "--processes", "2"], "-c must be at least --processes"),
        (["--tool", "echo", "-c", "2", "--processes", "2", "--as-task"], "runs in one process"),
    ],
)
def test_bench_refuses_bad_input_with_status_2(
    echo_url: str, argv: list[str], message: str
) -> None:
    proc = millimcp("bench", echo_url, "-n", "5", *argv)
    assert proc.returncode == 2
    assert message in proc.stderr
