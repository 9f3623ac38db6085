"""The lab without its extra: each command says, in one line, what to install, and exits 2.

Each test runs ``millimcp`` in a fresh interpreter whose import system hides some modules (a
meta path finder installed before anything is imported), as if they were not installed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

HIDE = """
import importlib.abc
import sys

HIDDEN = frozenset(sys.argv[1].split(","))


class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden)", name=name)
        return None


sys.meta_path.insert(0, Hide())
from millimcp.cli import main

sys.exit(main(sys.argv[2:]))
"""
NOWHERE = "http://127.0.0.1:9/mcp"
"""Nothing listens there: a command that got as far as connecting would fail otherwise."""
AGENT_TOML = str(ROOT / "examples" / "scenarios" / "agent.toml")
STDIO_SERVER = [sys.executable, "-m", "millimcp", "serve"]
STDIO_SERVER += ["tests.integration.lab.bench_server:server", "--stdio"]


def without(hidden: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HIDE, hidden, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )


def assert_one_line(result: subprocess.CompletedProcess[str], command: str, missing: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"millimcp: millimcp {command} needs the 'lab' extra ({missing} is not installed): "
        "pip install 'millimcp[lab]'"
    ]
    assert "Traceback" not in result.stdout


def test_the_hider_hides() -> None:
    result = without("hdrh", "report", "--help")
    assert result.returncode == 0, result.stderr  # report's own parts need no extra
    check = subprocess.run(
        [sys.executable, "-c", HIDE.replace("from millimcp.cli", "import hdrh\nfrom x"), "hdrh"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "No module named 'hdrh' (hidden)" in check.stderr


@pytest.mark.parametrize(("hidden", "missing"), [("aiohttp", "aiohttp"), ("hdrh", "hdrhistogram")])
def test_bench_without_the_lab_extra(hidden: str, missing: str) -> None:
    result = without(hidden, "bench", NOWHERE, "--tool", "echo", "-n", "1")
    assert_one_line(result, "bench", missing)


def test_bench_progress_without_rich() -> None:
    argv = ["bench", "--tool", "echo", "--args", '{"text": "x"}', "-n", "3", "--progress"]
    result = without("rich", *argv, "--", *STDIO_SERVER)
    assert_one_line(result, "bench", "rich")


def test_profile_without_the_lab_extra() -> None:
    result = without("aiohttp", "profile", NOWHERE, "--tool", "echo")
    assert_one_line(result, "profile", "aiohttp")


@pytest.mark.parametrize(("hidden", "missing"), [("aiohttp", "aiohttp"), ("hdrh", "hdrhistogram")])
def test_scenario_without_the_lab_extra(hidden: str, missing: str) -> None:
    result = without(hidden, "scenario", AGENT_TOML, NOWHERE, "-n", "1")
    assert_one_line(result, "scenario", missing)
