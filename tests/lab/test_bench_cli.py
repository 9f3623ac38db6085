"""millimcp.lab.cli: the lazy registry behind ``millimcp bench | profile | ...``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from millimcp.cli import LAB_COMMANDS
from millimcp.cli import main as main_cli
from millimcp.lab import cli


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
